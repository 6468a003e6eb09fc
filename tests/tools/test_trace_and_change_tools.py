"""query_traces and query_changes in the tool layer: allow-list and schemas, argument checks, redaction,
size bounds that keep the edges, replay from a recording, and the console's tool list."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from diagnosis.tools.backends.demo import DemoBackend
from diagnosis.tools.backends.tempo import TempoBackend
from diagnosis.tools.recorded import NOT_IN_RECORDING, RECORDED, RecordedBackend, RecordedCall
from diagnosis.tools.registry import ALLOWED_TOOLS, ERROR, SUCCESS, Backends, ToolBox, openai_tool_specs
from tests.backends.conftest import RecordingServer
from tests.tools.test_registry import Recorder

NOW = datetime(2026, 11, 30, 11, 0, tzinfo=timezone.utc)
A = "5a1c9e0b7d3f42e8a6b4c2d0e8f6a4b2"
B = "0a1c9e0b7d3f42e8a6b4c2d0e8f6a4b3"


def toolbox(world, **kwargs):
    recorder = Recorder()
    backends = Backends(logs=world, metrics=world, alerts=world, knowledge=None, traces=world, changes=world)
    return ToolBox(backends=backends, recorder=recorder, max_calls=10, **kwargs), recorder


@pytest.fixture
def tempo():
    server = RecordingServer()
    server.thread.start()
    server.respond_with_recording("/api/search", "tempo_search.json")
    server.respond_with_recording(f"/api/traces/{A}", "tempo_trace_v1_error.json")
    server.respond_with_recording(f"/api/traces/{B}", "tempo_trace_v1_ok.json")
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def test_both_tools_are_allow_listed_and_described_to_models():
    assert {"query_traces", "query_changes"} <= ALLOWED_TOOLS
    specs = {s["function"]["name"]: s["function"] for s in openai_tool_specs()}
    traces = specs["query_traces"]["parameters"]
    assert set(traces["properties"]) == {"service", "operation", "trace_id", "status", "min_duration", "start", "end",
                                         "limit"}
    assert traces["additionalProperties"] is False and traces["properties"]["limit"]["maximum"] == 50
    assert set(specs["query_changes"]["parameters"]["properties"]) == {"service", "namespace", "kind", "start", "end"}


def test_arguments_are_checked_before_a_backend_is_called():
    box, recorder = toolbox(DemoBackend.shipped(now=NOW))
    assert box.call("query_traces", {"service": "x", "status": "broken"}).error == \
        "status: must be one of any, error, got 'broken'"
    assert box.call("query_traces", {"service": "x", "limit": 51}).error == "limit: must be between 1 and 50, got 51"
    assert box.call("query_changes", {"kind": "deploy"}).error.startswith("kind: must be one of rollout, config")
    assert box.call("query_traces", {"trace_id": "not-an-id!"}).error.startswith("trace_id: not a trace id")
    assert [r["status"] for r in recorder.rows] == [ERROR] * 4


def test_the_result_separates_what_was_asked_from_the_spans_edges_and_changes():
    box, recorder = toolbox(DemoBackend.shipped(now=NOW))
    traces = box.call("query_traces", {"service": "storefront-gateway", "status": "error"})
    assert traces.status == SUCCESS, traces.error
    assert traces.result["request"]["arguments"] == {"service": "storefront-gateway", "status": "error"}
    assert {"service", "start", "end"} <= set(traces.result["request"]) and "service" not in traces.result
    assert {e["callee"] for e in traces.result["edges"]} == {"order-api", "orders-mysql"}
    changes = box.call("query_changes", {"kind": "config"})
    assert changes.result["changes"][0]["what"] == "ConfigMap invoice-renderer-flags updated by release-bot"
    assert "kind" not in changes.result and changes.result["request"]["kind"] == "config"
    assert recorder.rows[0]["result"] == traces.result


def test_span_attributes_are_redacted_before_they_are_stored(tempo):
    box, recorder = toolbox(None)
    box.backends.traces = TempoBackend(tempo.url)
    outcome = box.call("query_traces", {"trace_id": A})
    assert outcome.status == SUCCESS, outcome.error
    stored = json.dumps(recorder.rows[0]["result"])
    for secret in ("Hunter2-payments-pw", "sk_live_51HqLyjWDarjtT1zdp7dc", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"):
        assert secret not in stored, secret
    assert "[REDACTED" in stored and "payments.shop.svc" in stored


def test_a_capped_result_drops_spans_first_and_keeps_every_edge():
    world = DemoBackend.shipped(now=NOW)
    whole = world.query_traces(service="storefront-gateway", limit=50)
    box, _ = toolbox(world, max_result_bytes=9000)
    outcome = box.call("query_traces", {"service": "storefront-gateway", "limit": 50})
    assert outcome.truncated and len(json.dumps(outcome.result, ensure_ascii=False).encode()) <= 9000
    assert outcome.result["edges"] == whole["edges"]
    assert len(outcome.result["spans"]) < len(whole["spans"])


def test_a_replay_answers_both_tools_from_the_recording_and_nothing_else():
    calls = [RecordedCall(1, "inv-00000001", "query_traces", {"service": "user-service"}, "SUCCESS", {"edges": ["e"]}),
             RecordedCall(2, "inv-00000002", "query_changes", {"kind": "rollout"}, "SUCCESS", {"changes": ["c"]})]
    backend = RecordedBackend(calls)
    # Defaults filled in: the same call with the schema's defaults spelled out still matches.
    assert backend.query_traces(service="user-service", status="any", limit=20) == {"edges": ["e"]}
    assert backend.take_served().mode == RECORDED
    assert backend.query_changes(kind="rollout") == {"changes": ["c"]}
    box = ToolBox(backends=backend.backends(), recorder=Recorder(), max_calls=3)
    missed = box.call("query_traces", {"service": "order-api"})
    assert missed.status == ERROR and missed.error.startswith(NOT_IN_RECORDING)


@pytest.mark.django_db
def test_the_consoles_tool_filter_lists_both_tools():
    from traces.admin import ToolFilter

    names = [name for name, _ in ToolFilter.lookups(None, None, None)]
    assert "query_traces" in names and "query_changes" in names
