"""TempoBackend against recorded Tempo responses (search, then each trace by id) served over HTTP."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.tempo import TempoBackend
from diagnosis.tools.backends.trace_formats import spans_from_otlp

from .conftest import RECORDINGS

START = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)
END = datetime(2026, 11, 30, 10, 30, tzinfo=timezone.utc)
A = "5a1c9e0b7d3f42e8a6b4c2d0e8f6a4b2"
B = "0a1c9e0b7d3f42e8a6b4c2d0e8f6a4b3"


@pytest.fixture
def tempo(http_server):
    http_server.respond_with_recording("/api/search", "tempo_search.json")
    http_server.respond_with_recording(f"/api/traces/{A}", "tempo_trace_v1_error.json")
    http_server.respond_with_recording(f"/api/traces/{B}", "tempo_trace_v1_ok.json")
    return http_server


def test_a_search_sends_traceql_in_unix_seconds_and_reads_each_trace_whole(tempo):
    result = TempoBackend(tempo.url, tenant="shop").query_traces(
        service="checkout", status="error", min_duration="250ms", start=START, end=END, limit=5)
    search, first, second = tempo.requests
    assert search["path"] == "/api/search"
    assert search["params"] == {"q": '{ resource.service.name = "checkout" && status = error && duration >= 250ms }',
                                "start": "1796032800", "end": "1796034600", "limit": "5", "spss": "3"}
    assert search["headers"]["x-scope-orgid"] == "shop"
    # Tempo drops the leading zero of a trace id: it is padded back to 32 characters before the read.
    assert [first["path"], second["path"]] == [f"/api/traces/{A}", f"/api/traces/{B}"]
    assert first["params"] == {"start": "1796032800", "end": "1796034600"}
    assert result["traces_matched"] == 2 and result["traces_examined"] == 2
    assert [t["trace_id"] for t in result["traces"]] == [B, A]  # newest first
    assert result["traces"][1] == {"trace_id": A, "root_service": "checkout", "root_operation": "POST /orders",
                                   "start": "2026-11-30T10:15:00.123Z", "duration_ms": 842, "spans": 4, "errors": 3,
                                   "services": ["checkout", "payments"]}


def test_spans_keep_service_parent_kind_status_duration_and_attributes(tempo):
    result = TempoBackend(tempo.url).query_traces(service="checkout", start=START, end=END)
    spans = {s["span_id"]: s for s in result["spans"]}
    payments = spans["4b7d2e9f0a1c3e58"]
    assert payments == {
        "trace_id": A, "span_id": "4b7d2e9f0a1c3e58", "parent_span_id": "9c3e5a7b1d2f4e60", "service": "payments",
        "operation": "POST /charge", "kind": "server", "start": "2026-11-30T10:15:00.200Z", "duration_ms": 611,
        "status": "error", "status_message": "card processor timeout",
        "attributes": {"http.request.method": "POST", "http.response.status_code": 504, "retry.attempts": 2.0},
        "description": "payments server POST /charge 611 ms ERROR: card processor timeout",
    }
    root = spans["1f2e3d4c5b6a7980"]
    assert root["parent_span_id"] is None and root["kind"] == "server" and root["status"] == "error"
    assert spans["6d8f0b2a4c6e8a01"]["attributes"]["server.port"] == 5432  # intValue arrives as a string
    assert spans["6d8f0b2a4c6e8a01"]["status"] == "unset" and spans["6d8f0b2a4c6e8a01"]["duration_ms"] == 12.5
    assert spans["5c7e9a1b3d5f7a92"]["status"] == "ok"
    assert [s["start"] for s in result["spans"]] == sorted(s["start"] for s in result["spans"])


def test_edges_count_calls_errors_and_latency_between_services(tempo):
    result = TempoBackend(tempo.url).query_traces(service="checkout", start=START, end=END)
    edges = {(e["caller"], e["callee"]): e for e in result["edges"]}
    charge = edges[("checkout", "payments")]
    assert (charge["calls"], charge["errors"], charge["error_ratio"], charge["via"]) == (2, 1, 0.5, "parent")
    assert (charge["p50_ms"], charge["p99_ms"], charge["first_error_at"]) == (90, 611, "2026-11-30T10:15:00.200Z")
    assert charge["sample_trace_ids"] == [A, B]  # the error trace first
    assert charge["description"] == "checkout -> payments: 2 calls, 1 errors (50%), p50 90 ms, p95 611 ms, p99 611 ms"
    database = edges[("checkout", "orders-db")]
    assert (database["calls"], database["errors"], database["via"], database["max_ms"]) == (2, 0, "peer.service", 12.5)
    # The client span whose callee sent its own span is not counted a second time as a peer call.
    assert set(edges) == {("checkout", "payments"), ("checkout", "orders-db")}


def test_a_trace_by_id_is_read_without_a_search_and_a_missing_one_names_the_argument(tempo):
    result = TempoBackend(tempo.url).query_traces(trace_id=A)
    assert [r["path"] for r in tempo.requests] == [f"/api/traces/{A}"] and tempo.requests[0]["params"] == {}
    assert result["traces"][0]["trace_id"] == A and len(result["spans"]) == 4
    with pytest.raises(BackendError, match="^trace_id: trace 00000000000000000000000000000bad not found"):
        TempoBackend(tempo.url).query_traces(trace_id="bad")


def test_a_rejected_query_is_a_backend_error_with_tempos_message(http_server):
    http_server.respond_with_recording("/api/search", "tempo_400_traceql.txt", status=400)
    with pytest.raises(BackendError, match=r"tempo search failed \(HTTP 400\): invalid TraceQL query"):
        TempoBackend(http_server.url).query_traces(service="checkout", start=START, end=END)


def test_bad_arguments_are_refused_before_any_request(http_server):
    backend = TempoBackend(http_server.url)
    with pytest.raises(BackendError, match="^status: must be one of any, error"):
        backend.query_traces(service="x", status="failed")
    with pytest.raises(BackendError, match="^min_duration: use a duration"):
        backend.query_traces(service="x", min_duration="fast")
    with pytest.raises(BackendError, match="^start: Tempo searches at most 168h"):
        backend.query_traces(service="x", start="2026-11-01T00:00:00Z", end="2026-11-30T00:00:00Z")
    with pytest.raises(BackendError, match="^service: give a service"):
        backend.query_traces()
    assert http_server.requests == []


def test_both_otlp_json_spellings_parse_to_the_same_spans():
    tempo_v1 = spans_from_otlp(json.loads((RECORDINGS / "tempo_trace_v1_ok.json").read_text()), backend="tempo")
    otlp_v2 = spans_from_otlp(json.loads((RECORDINGS / "otlp_trace_v2_hex.json").read_text()), backend="tempo")
    assert tempo_v1 == otlp_v2 and len(tempo_v1) == 4
    assert {s.trace_id for s in tempo_v1} == {B}
