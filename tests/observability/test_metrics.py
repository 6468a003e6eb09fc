"""GET /metrics: access control, and the series a run records (in-process registry)."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from diagnosis.models import DiagnosisRun
from tests.api.conftest import alice_api, token_client  # noqa: F401
from tests.diagnosis.conftest import demo_knowledge  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "scrape-token-0123456789"


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_are_not_served_unless_a_token_or_network_is_configured(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = None, []
    response = client.get("/metrics")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_a_bearer_token_is_required_when_one_is_configured(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, []
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert b"# TYPE aiops_runs_total counter" in response.content


def test_an_allowed_network_needs_no_token_and_others_are_refused(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = None, ["10.0.0.0/8", "127.0.0.1"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    refused = client.get("/metrics", REMOTE_ADDR="192.0.2.7")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert client.post("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 405


def test_a_diagnosis_run_records_runs_model_calls_tools_and_gatekeeper_decisions(
        alice_api, demo_knowledge, eager_tasks, client, settings):  # noqa: F811
    runs = dict(flow="CHAT", status="SUCCESS")
    before_runs = sum(value("aiops_runs_total", **runs, verdict=v, degraded=d)
                      for v in ("PASS", "LOW_CONFID", "REJECT", "none") for d in ("true", "false"))
    body = alice_api.post("/api/chat", {"question": "Why is payment-service failing?"}, format="json").json()
    assert body["status"] == "SUCCESS"
    run = DiagnosisRun.objects.get(run_id=body["runId"])

    after_runs = sum(value("aiops_runs_total", **runs, verdict=v, degraded=d)
                     for v in ("PASS", "LOW_CONFID", "REJECT", "none") for d in ("true", "false"))
    assert after_runs == before_runs + 1
    verdict, degraded = run.effective_verdict or "none", str(run.degraded).lower()
    assert value("aiops_runs_total", **runs, verdict=verdict, degraded=degraded) >= 1
    assert value("aiops_run_duration_seconds_count", **runs) >= 1
    assert value("aiops_run_queue_wait_seconds_count", flow="CHAT") >= 1

    settings.METRICS_TOKEN = TOKEN
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    model_lines = [line for line in text.splitlines() if line.startswith("aiops_model_calls_total{")]
    assert any('role="planner"' in line for line in model_lines), model_lines
    assert 'aiops_model_tokens_total{' in text and 'direction="input"' in text
    tool_lines = [line for line in text.splitlines() if line.startswith("aiops_tool_calls_total{")]
    assert any('backend="demo"' in line for line in tool_lines), tool_lines
    assert "aiops_tool_call_duration_seconds_bucket{" in text
    assert any(line.startswith("aiops_gatekeeper_decisions_total{") for line in text.splitlines())
