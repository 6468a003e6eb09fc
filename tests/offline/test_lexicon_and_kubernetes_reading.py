"""The analyser's vocabulary: anchored change detection, the broad taxonomy, Kubernetes state as quotable evidence."""

from __future__ import annotations

import json

import pytest

from diagnosis.gatekeeper import observed_part
from diagnosis.jsonpath import parse, resolve_segments
from diagnosis.llm.offline.lexicon import CAUSE_BY_KEY, CAUSES, CHANGE_PATTERNS
from diagnosis.llm.offline.observations import Observations


def _is_change(text: str) -> bool:
    return any(p.search(text) for p in CHANGE_PATTERNS)


@pytest.mark.parametrize("text", [
    "Deployed catalog-service v5.2.1 (3 replicas)", "Deployment ledger-api rollout started: image x:3.2.0",
    "feature flag checkout.new_pricing flipped to true", "Scaled up replica set ledger-api-6f7d8c9b5 to 1",
    "config reload: applied 3 changes",
])
def test_a_deploy_rollout_config_reload_or_flag_flip_is_a_change(text):
    assert _is_change(text)


@pytest.mark.parametrize("text", [
    "WARNING: This is a development server. Do not use it in a production deployment.",
    " * Serving Flask app 'app'", "Started GET \"/health\" for 10.0.0.1",
])
def test_a_start_up_banner_is_not_a_change(text):
    assert not _is_change(text)


@pytest.mark.parametrize(("text", "key"), [
    ('Error: secret "ledger-db-credentials-v2" not found', "missing_config"),
    ("Back-off pulling image \"registry/x:9.9\": ImagePullBackOff", "image_pull"),
    ("0/6 nodes are available: 6 Insufficient memory.", "failed_scheduling"),
    ("Job has reached the specified backoff limit", "job_backoff_limit"),
    ("dial tcp: lookup maps.internal on 10.96.0.10:53: no such host", "dns_failure"),
    ("x509: certificate has expired or is not yet valid", "tls_certificate_expired"),
    ("FATAL:  sorry, too many clients already", "db_too_many_connections"),
    ("Deadlock found when trying to get lock; try restarting transaction", "db_deadlock"),
    ("HTTP 429 Too Many Requests from api.partner", "upstream_rate_limited"),
    ('"reason": "OOMKilled", "exitCode": 137', "oom_killed"),
])
def test_the_broad_taxonomy_recognises_real_wording(text, key):
    assert CAUSE_BY_KEY[key].matches_text(text)


def test_an_oom_kill_alone_is_not_a_memory_leak():
    assert not CAUSE_BY_KEY["memory_leak_oom"].matches_text('"reason": "OOMKilled", "exitCode": 137')
    assert not CAUSE_BY_KEY["memory_leak_oom"].matches_series("kube_pod_container_status_restarts_total", "up")
    assert len({c.key for c in CAUSES}) == len(CAUSES) >= 25


def test_kubernetes_state_becomes_lines_whose_excerpts_sit_at_their_paths():
    result = {"request": {"arguments": {"name": "thumb"}}, "backend": "demo", "pods": [{
        "name": "thumb-7c5b9d6f4-h2x8r", "containers": [{
            "name": "t", "image": "i:1", "ready": True, "restartCount": 4, "state": {"state": "running"},
            "lastState": {"state": "terminated", "reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-11-30T10:00:00Z"}}]}],
        "events": [{"type": "Normal", "reason": "Pulled", "message": "already present", "object": "pod/thumb-7c5b9d6f4-h2x8r"},
                   {"type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container t",
                    "object": "pod/thumb-7c5b9d6f4-h2x8r", "lastTimestamp": "2026-11-30T10:01:00Z"}]}
    stored = json.loads(json.dumps(result))
    obs = Observations([{"tool_name": "query_kubernetes", "arguments": {"name": "thumb"}, "status": "SUCCESS",
                         "invocation_id": "inv-0000000a", "result": stored}])
    lines = obs.profiles["thumb"].lines
    assert [line.level for line in lines] == ["ERROR", "WARN"]  # the Normal event is not evidence of trouble
    assert CAUSE_BY_KEY["oom_killed"].matches_text(lines[0].message)
    for line in lines:
        value = resolve_segments(observed_part(stored), parse(line.binding()["raw_path"]))
        haystack = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        assert line.message in haystack and line.binding()["tool_name"] == "query_kubernetes"
