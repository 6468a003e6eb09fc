"""Jaeger query HTTP API backend for ``query_traces``: the internal ``/api`` or the supported ``/api/v3``.

``internal`` (Jaeger 1.x and 2.x up to v2.20): a search is ``GET /api/traces?service=…&start=&end=`` (µs),
which answers whole traces; a trace by id is ``GET /api/traces/<id>``. Answers come in the envelope
``{"data", "errors"}``, errors too (with ``Content-Type: text/plain``), so the body is read as JSON
whatever its type. ``v3``: ``GET /api/v3/traces?query.service_name=…&query.start_time_min=<RFC 3339>…``
and ``/api/v3/traces/<id>`` answer OTLP JSON (``{"result": {"resourceSpans"}}``, one document per chunk);
"no traces" is a 404. Either search needs a service. Failures raise ``BackendError``. Imports only
stdlib + httpx.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx

from diagnosis.tools.backends.base import BackendError, format_timestamp
from diagnosis.tools.backends.trace_formats import spans_from_otlp
from diagnosis.tools.backends.http_json import JsonHttpClient, Reply, path_segment
from diagnosis.tools.backends.trace_formats import spans_from_jaeger
from diagnosis.tools.backends.traces import (
    CheckedTraceSearch,
    Span,
    TraceQuery,
    format_duration,
    traces_result,
)

__all__ = ["JaegerBackend"]

BACKEND_NAME = "jaeger"
APIS = ("internal", "v3")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


class JaegerBackend(CheckedTraceSearch):
    """Traces from a Jaeger query service."""

    name = BACKEND_NAME

    def __init__(self, base_url: str, *, api: str = "internal", timeout_seconds: float = 5.0,
                 transport: httpx.BaseTransport | None = None):
        if api not in APIS:
            raise BackendError(f"unsupported Jaeger API {api!r}; use one of {', '.join(APIS)}", backend=BACKEND_NAME)
        self.api = api
        self.http = JsonHttpClient(base_url, backend=BACKEND_NAME, timeout_seconds=timeout_seconds, transport=transport)

    def __repr__(self) -> str:
        return f"JaegerBackend({self.http.display!r})"

    def _data(self, reply: Reply, *, what: str) -> Any:
        body = reply.body if reply.is_json and isinstance(reply.body, dict) else None
        errors = (body or {}).get("errors") or []
        if not 200 <= reply.status < 300 or errors:
            detail = "; ".join(str(e.get("msg") or e) for e in errors if isinstance(e, dict)) or self.http.snippet(reply)
            raise self.http.error(f"{what} failed (HTTP {reply.status}): {detail}")
        if body is None:
            raise self.http.error(f"jaeger at {self.http.display} returned a non-JSON response: {self.http.snippet(reply)}")
        return body.get("data")

    def answer(self, query: TraceQuery) -> dict[str, Any]:
        if self.api == "v3":
            return self._query_v3(query)
        if query.trace_id is not None:
            params = {"start": _micros(query.start), "end": _micros(query.end)} if query.window_given else {}
            reply = self.http.get(f"/api/traces/{path_segment(query.trace_id)}", params)
            if reply.status == 404:
                raise BackendError(f"trace {query.trace_id} not found", argument="trace_id", backend=BACKEND_NAME)
            data = self._data(reply, what="jaeger trace by id")
            traces = data if isinstance(data, list) else []
            if not traces:
                raise BackendError(f"trace {query.trace_id} not found", argument="trace_id", backend=BACKEND_NAME)
            return traces_result(self._spans(traces), query, backend=BACKEND_NAME)
        if not query.service:
            raise BackendError("Jaeger searches by service; name one", argument="service", backend=BACKEND_NAME)
        params: dict[str, Any] = {"service": query.service, "start": _micros(query.start), "end": _micros(query.end),
                                  "limit": query.limit}
        if query.operation:
            params["operation"] = query.operation
        if query.min_duration_ns is not None:
            params["minDuration"] = format_duration(query.min_duration_ns)
        if query.status == "error":
            params["tags"] = json.dumps({"error": "true"})
        data = self._data(self.http.get("/api/traces", params), what="jaeger search")
        if data is None:
            data = []
        if not isinstance(data, list):
            raise BackendError("jaeger search returned a malformed body (data is not a list)", backend=BACKEND_NAME)
        traces = data[: query.limit]
        return traces_result(self._spans(traces), query, backend=BACKEND_NAME, matched=len(data))

    def _query_v3(self, query: TraceQuery) -> dict[str, Any]:
        if query.trace_id is not None:
            reply = self.http.get(f"/api/v3/traces/{path_segment(query.trace_id)}")
            if reply.status == 404:
                raise BackendError(f"trace {query.trace_id} not found", argument="trace_id", backend=BACKEND_NAME)
            return traces_result(self._otlp_documents(reply, what="jaeger trace by id"), query, backend=BACKEND_NAME)
        if not query.service:
            raise BackendError("Jaeger searches by service; name one", argument="service", backend=BACKEND_NAME)
        params: dict[str, Any] = {"query.service_name": query.service,
                                  "query.start_time_min": format_timestamp(query.start),
                                  "query.start_time_max": format_timestamp(query.end),
                                  "query.search_depth": query.limit}
        if query.operation:
            params["query.operation_name"] = query.operation
        if query.min_duration_ns is not None:
            params["query.duration_min"] = format_duration(query.min_duration_ns)
        reply = self.http.get("/api/v3/traces", params)
        if reply.status == 404:  # api_v3's answer to a search that found nothing
            return traces_result([], query, backend=BACKEND_NAME, matched=0)
        by_trace: dict[str, list[Span]] = {}
        for span in self._otlp_documents(reply, what="jaeger search"):
            by_trace.setdefault(span.trace_id, []).append(span)
        # api_v3 has no status filter: the error condition is applied to the traces it returned.
        kept = [spans for spans in by_trace.values() if query.matches(spans)][: query.limit]
        return traces_result([s for spans in kept for s in spans], query, backend=BACKEND_NAME, matched=len(kept))

    def _otlp_documents(self, reply: Reply, *, what: str) -> list[Span]:
        """Every span of the one or more ``{"result": {"resourceSpans"}}`` documents of a v3 answer."""
        if not 200 <= reply.status < 300:
            raise self.http.error(f"{what} failed (HTTP {reply.status}): {self.http.snippet(reply)}")
        text = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
        decoder, position, spans = json.JSONDecoder(), 0, []
        while position < len(text):
            if text[position].isspace():
                position += 1
                continue
            try:
                document, position = decoder.raw_decode(text, position)
            except ValueError:
                raise self.http.error(f"jaeger at {self.http.display} returned a non-JSON response: "
                                      f"{self.http.snippet(reply)}") from None
            if isinstance(document, dict) and document.get("error"):
                raise self.http.error(f"{what} failed: {json.dumps(document['error'])[:300]}")
            spans.extend(spans_from_otlp(document, backend=BACKEND_NAME))
        return spans

    @staticmethod
    def _spans(traces: list[Any]) -> list[Span]:
        spans: list[Span] = []
        for trace in traces:
            spans.extend(spans_from_jaeger(trace, backend=BACKEND_NAME))
        return spans
