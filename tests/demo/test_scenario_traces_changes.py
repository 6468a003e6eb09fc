"""The optional traces.json and changes.json of the shipped scenarios: valid, and true to each scenario's story.

Traces: the root-cause service's spans (or the calls into it) deviate once the incident starts, and
no service outside the story does. Changes: a change precedes the onset only where the story has one,
and then on the root-cause service.
"""

from __future__ import annotations

import json
import statistics
from datetime import datetime, timezone

import pytest

from diagnosis.demo import ScenarioError, load_scenario, shipped_scenarios
from diagnosis.tools.backends.demo import DemoBackend
from diagnosis.tools.backends.demo_traces import DemoTraces

SCENARIOS = [load_scenario(d) for d in shipped_scenarios()]
WITH_TRACES = [s for s in SCENARIOS if s.traces]
WITH_CHANGES = [s for s in SCENARIOS if s.changes]
CHANGE_STORIES = {"config_change", "upstream_breaking_change", "missing_config"}  # root causes that are a change
NOW = datetime(2026, 11, 30, 11, 0, tzinfo=timezone.utc)
HOUR = 3600


def _onset(scenario) -> int:
    """The first WARN/ERROR log line: when the incident shows."""
    return min(r["offset_seconds"] for r in scenario.logs if r["level"] in ("WARN", "ERROR", "FATAL"))


def _involved(spans, service):
    """Spans of `service`, and client spans of other services that call it by peer attribute."""
    return [s for s in spans if s.service == service
            or (s.kind == "client" and s.attributes.get("peer.service") == service)]


def _deviation(spans, service, split_ns) -> tuple[float, float]:
    """(error ratio after - before, median duration after / before) of the spans involving `service`."""
    before = [s for s in _involved(spans, service) if s.start_ns < split_ns]
    after = [s for s in _involved(spans, service) if s.start_ns >= split_ns]
    assert before and after, service
    errors = sum(s.is_error for s in after) / len(after) - sum(s.is_error for s in before) / len(before)
    slower = statistics.median(s.duration_ns for s in after) / max(1, statistics.median(s.duration_ns for s in before))
    return errors, slower


def _relative_spans(scenario):
    world = DemoTraces([scenario])
    return [s for _, _, spans in world._traces for s in spans]


def test_at_least_three_shipped_scenarios_carry_traces_and_three_carry_changes():
    assert len(WITH_TRACES) >= 3 and len(WITH_CHANGES) >= 3


@pytest.mark.parametrize("scenario", WITH_TRACES, ids=[s.name for s in WITH_TRACES])
def test_trace_services_and_peers_are_services_of_the_scenario(scenario):
    spans = _relative_spans(scenario)
    assert {s.service for s in spans} <= set(scenario.services)
    assert {s.attributes["peer.service"] for s in spans if "peer.service" in s.attributes} <= set(scenario.services)
    assert all(s.start_ns <= 0 for s in spans if s.parent_span_id is None)  # the story ends at "now"


@pytest.mark.parametrize("scenario", WITH_TRACES, ids=[s.name for s in WITH_TRACES])
def test_the_root_cause_shows_in_the_traces_and_bystanders_stay_healthy(scenario):
    truth = scenario.ground_truth
    spans = _relative_spans(scenario)
    split = truth["incident_window"]["start_offset_seconds"] * 1_000_000_000
    errors, slower = _deviation(spans, truth["root_cause_service"], split)
    assert errors >= 0.5 or slower >= 3, (errors, slower)
    story = {truth["root_cause_service"], *truth.get("symptom_services", [])}
    for service in {s.service for s in spans} - story:
        if not [s for s in _involved(spans, service) if s.start_ns >= split]:
            continue  # no longer called once its caller fails early (promo-service behind a failed checkout lock)
        errors, slower = _deviation(spans, service, split)
        assert errors <= 0 and slower < 1.5, (service, errors, slower)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_change_precedes_the_onset_only_where_the_story_has_one(scenario):
    truth = scenario.ground_truth
    if truth["expected_nothing_wrong"]:
        assert not scenario.changes or all(c["offset_seconds"] < -6 * HOUR for c in scenario.changes)
        return
    onset = _onset(scenario)
    before_onset = [c for c in scenario.changes if onset - HOUR <= c["offset_seconds"] <= onset]
    assert {c["service"] for c in before_onset} <= {truth["root_cause_service"]}, before_onset
    if truth["root_cause"] in CHANGE_STORIES:
        assert before_onset, f"{scenario.name}: the story is a change, so changes.json needs it before the onset"
    else:
        assert not before_onset


def test_the_demo_world_serves_traces_and_changes_deterministically():
    one, two = DemoBackend.shipped(now=NOW), DemoBackend.shipped(now=NOW)
    first = one.query_traces(service="user-service", status="error", limit=5)
    assert first == two.query_traces(service="user-service", status="error", limit=5)
    assert first["traces_examined"] == 5 and first["traces_matched"] >= 10
    assert all(t["errors"] >= 1 for t in first["traces"])
    (edge,) = first["edges"]
    assert (edge["caller"], edge["callee"], edge["via"]) == ("user-service", "profile-db", "peer.service")
    assert edge["description"].startswith("user-service -> profile-db: 5 calls, 5 errors (100%), p50 2000 ms")
    whole = one.query_traces(trace_id=first["traces"][0]["trace_id"])
    assert whole["traces"] == [first["traces"][0]]
    changes = one.query_changes(service="carrier-rates-service")
    (change,) = changes["changes"]
    assert change["at"] == "2026-11-30T10:43:10Z" and change["kind"] == "rollout" and change["namespace"] == "logistics"
    assert change["description"].startswith("2026-11-30T10:43:10Z rollout carrier-rates-service: revision 42: ")
    assert one.query_changes(kind="config", start="2026-11-30T10:00:00Z")["changes"][0]["service"] == "invoice-renderer"
    assert one.query_changes(namespace="fin")["total"] == 1
    json.dumps(first)


def test_a_malformed_traces_or_changes_file_names_the_file_and_the_problem(tmp_path):
    source = shipped_scenarios()[0]
    for name in ("scenario.json", "logs.jsonl", "metrics.json", "alerts.json", "ground_truth.json"):
        (tmp_path / name).write_bytes((source / name).read_bytes())
    (tmp_path / "traces.json").write_text(json.dumps({"traces": [
        {"offset_seconds": -60, "root": {"service": "a", "operation": "GET /", "duration_ms": [], "kind": "server"}}]}))
    with pytest.raises(ScenarioError, match=r"traces.json: traces\[0\].root: 'duration_ms' must be a number"):
        load_scenario(tmp_path)
    (tmp_path / "traces.json").unlink()
    (tmp_path / "changes.json").write_text(json.dumps({"changes": [
        {"kind": "deploy", "service": "a", "offset_seconds": -60, "what": "x", "object": "deployment/a"}]}))
    with pytest.raises(ScenarioError, match=r"changes.json: changes\[0\]: 'kind' must be one of rollout, config"):
        load_scenario(tmp_path)
