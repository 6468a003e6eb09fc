"""JaegerBackend against recorded responses of Jaeger's query API (/api/traces) served over HTTP."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.jaeger import JaegerBackend

from .conftest import RECORDINGS

START = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)
END = datetime(2026, 11, 30, 10, 30, tzinfo=timezone.utc)
A = "5a1c9e0b7d3f42e8a6b4c2d0e8f6a4b2"


def test_a_search_sends_microseconds_and_tags_and_aggregates_the_traces(http_server):
    http_server.respond_with_recording("/api/traces", "jaeger_search.json")
    result = JaegerBackend(http_server.url).query_traces(
        service="checkout", operation="POST /orders", status="error", min_duration="1.5s", start=START, end=END,
        limit=10)
    [request] = http_server.requests
    assert request["params"] == {"service": "checkout", "operation": "POST /orders", "start": "1796032800000000",
                                 "end": "1796034600000000", "limit": "10", "minDuration": "1500ms",
                                 "tags": '{"error": "true"}'}
    assert result["backend"] == "jaeger" and result["traces_matched"] == 2
    # A 64-bit trace id printed as 16 hex characters is padded to 32.
    assert {t["trace_id"] for t in result["traces"]} == {A, "00000000000000003f9e2a7c5b1d4e60"}
    edges = {(e["caller"], e["callee"]): e for e in result["edges"]}
    assert set(edges) == {("checkout", "payments"), ("checkout", "orders-db")}
    charge = edges[("checkout", "payments")]
    assert (charge["calls"], charge["errors"], charge["p50_ms"], charge["p99_ms"]) == (2, 1, 90, 611)


def test_jaeger_tags_become_kind_status_and_attributes(http_server):
    http_server.respond_with_recording("/api/traces", "jaeger_search.json")
    result = JaegerBackend(http_server.url).query_traces(service="checkout", start=START, end=END)
    spans = {s["span_id"]: s for s in result["spans"]}
    root = spans["1f2e3d4c5b6a7980"]
    assert (root["kind"], root["status"], root["status_message"]) == ("server", "error", "payment failed")
    assert root["attributes"] == {"http.request.method": "POST", "http.response.status_code": 502,
                                  "internal.span.format": "otlp"}
    # error=true plus no status description: the exception event gives the message.
    payments = spans["4b7d2e9f0a1c3e58"]
    assert (payments["service"], payments["status"], payments["parent_span_id"]) == ("payments", "error", "9c3e5a7b1d2f4e60")
    assert payments["status_message"] == "card processor did not answer in 600 ms"
    assert spans["5c7e9a1b3d5f7a92"]["status"] == "ok" and spans["6d8f0b2a4c6e8a01"]["status"] == "unset"
    assert spans["6d8f0b2a4c6e8a01"]["duration_ms"] == 12.5 and spans["6d8f0b2a4c6e8a01"]["start"] == "2026-11-30T10:15:00.140Z"


def test_a_trace_by_id_and_jaegers_error_envelope(http_server):
    http_server.respond_with_recording(f"/api/traces/{A}", "jaeger_trace.json")
    http_server.respond_with_recording("/api/traces/00000000000000000000000000000bad", "jaeger_trace_not_found.json",
                                       status=404)
    backend = JaegerBackend(http_server.url)
    result = backend.query_traces(trace_id=A)
    assert len(result["spans"]) == 4 and result["traces"][0]["root_operation"] == "POST /orders"
    with pytest.raises(BackendError, match="^trace_id: trace 00000000000000000000000000000bad not found"):
        backend.query_traces(trace_id="bad")


def test_an_error_envelope_with_text_plain_is_read_as_json(http_server):
    body = (RECORDINGS / "jaeger_400_no_service.json").read_bytes()
    http_server.respond("/api/traces", body, status=400, content_type="text/plain; charset=utf-8")
    with pytest.raises(BackendError, match=r"jaeger search failed \(HTTP 400\): parameter 'service' is required"):
        JaegerBackend(http_server.url).query_traces(service="checkout", start=START, end=END)


def test_jaegers_search_needs_a_service_and_an_unreachable_server_is_an_error(silent_port):
    with pytest.raises(BackendError, match="^service: Jaeger searches by service"):
        JaegerBackend("http://127.0.0.1:9").query_traces(status="error")
    with pytest.raises(BackendError, match="jaeger unreachable at http://127.0.0.1:.*timed out"):
        JaegerBackend(f"http://127.0.0.1:{silent_port}", timeout_seconds=0.2).query_traces(service="x")


def test_search_results_are_the_same_shape_for_every_backend(http_server):
    http_server.respond_with_recording("/api/traces", "jaeger_search.json")
    result = JaegerBackend(http_server.url).query_traces(service="checkout", start=START, end=END)
    assert set(result) == {"backend", "service", "start", "end", "traces_examined", "traces_matched", "traces",
                           "edges", "spans", "omitted_spans"}
    json.dumps(result)  # plain JSON


def test_api_v3_reads_otlp_json_documents_and_filters_errors_itself(http_server):
    http_server.respond_with_recording("/api/v3/traces", "jaeger_v3_traces.json")
    backend = JaegerBackend(http_server.url, api="v3")
    result = backend.query_traces(service="checkout", operation="POST /orders", start=START, end=END, limit=10)
    [request] = http_server.requests
    assert request["params"] == {"query.service_name": "checkout", "query.start_time_min": "2026-11-30T10:00:00Z",
                                 "query.start_time_max": "2026-11-30T10:30:00Z", "query.search_depth": "10",
                                 "query.operation_name": "POST /orders"}
    # Two chunks, one document each: both traces are read.
    assert result["traces_matched"] == 2 and {t["trace_id"] for t in result["traces"]} == {
        A, "0a1c9e0b7d3f42e8a6b4c2d0e8f6a4b3"}
    edges = {(e["caller"], e["callee"]): e for e in result["edges"]}
    assert (edges[("checkout", "payments")]["calls"], edges[("checkout", "payments")]["errors"]) == (2, 1)
    errors_only = backend.query_traces(service="checkout", status="error", start=START, end=END)
    assert [t["trace_id"] for t in errors_only["traces"]] == [A]
    slow = backend.query_traces(service="checkout", min_duration="250ms", start=START, end=END)
    assert http_server.requests[-1]["params"]["query.duration_min"] == "250ms"
    assert [t["trace_id"] for t in slow["traces"]] == [A]


def test_api_v3_by_id_and_its_not_found_answers(http_server):
    http_server.respond_with_recording(f"/api/v3/traces/{A}", "jaeger_v3_trace.json")
    backend = JaegerBackend(http_server.url, api="v3")
    assert len(backend.query_traces(trace_id=A)["spans"]) == 4
    http_server.respond_with_recording("/api/v3/traces/00000000000000000000000000000bad", "jaeger_v3_not_found.json",
                                       status=404)
    with pytest.raises(BackendError, match="^trace_id: trace 0+bad not found"):
        backend.query_traces(trace_id="bad")
    http_server.respond_with_recording("/api/v3/traces", "jaeger_v3_not_found.json", status=404)
    empty = backend.query_traces(service="checkout", start=START, end=END)
    assert empty["traces"] == [] and empty["traces_matched"] == 0
