"""Grafana Tempo HTTP API backend for ``query_traces`` (REFERENCE: Tempo 2.x–3.0).

A search runs TraceQL on ``GET /api/search`` (integer Unix seconds, ``limit``), then reads each
found trace whole with ``GET /api/traces/<id>`` (OTLP JSON: base64 ids and enum names, or hex and
integers; both are parsed), so edges count every span of every found trace. ``TEMPO_TENANT`` is sent
as ``X-Scope-OrgID``. Failures raise ``BackendError``. Imports only stdlib + httpx.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx

from diagnosis.tools.backends.base import BackendError, go_string_literal
from diagnosis.tools.backends.http_json import JsonHttpClient, path_segment
from diagnosis.tools.backends.trace_formats import spans_from_otlp
from diagnosis.tools.backends.traces import (
    CheckedTraceSearch,
    Span,
    TraceQuery,
    format_duration,
    normalise_trace_id,
    traces_result,
)

__all__ = ["TempoBackend", "build_traceql"]

BACKEND_NAME = "tempo"
MAX_SEARCH_WINDOW = timedelta(hours=168)  # query_frontend.search.max_duration's default
SPANS_PER_SPANSET = 3
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def build_traceql(query: TraceQuery) -> str:
    """One spanset whose span satisfies every filter: ``{ resource.service.name = "x" && status = error }``."""
    conditions = []
    if query.service:
        conditions.append(f"resource.service.name = {go_string_literal(query.service)}")
    if query.operation:
        conditions.append(f"name = {go_string_literal(query.operation)}")
    if query.status == "error":
        conditions.append("status = error")
    if query.min_duration_ns is not None:
        conditions.append(f"duration >= {format_duration(query.min_duration_ns)}")
    return "{ " + " && ".join(conditions) + " }" if conditions else "{ }"


def _unix(value: datetime, *, up: bool) -> int:
    seconds = (value - _EPOCH).total_seconds()
    return math.ceil(seconds) if up else math.floor(seconds)


class TempoBackend(CheckedTraceSearch):
    """Traces from a Grafana Tempo server (or its query frontend)."""

    name = BACKEND_NAME

    def __init__(self, base_url: str, *, timeout_seconds: float = 5.0, tenant: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"X-Scope-OrgID": tenant} if tenant else {}
        self.http = JsonHttpClient(base_url, backend=BACKEND_NAME, timeout_seconds=timeout_seconds,
                                   headers=headers, transport=transport)

    def __repr__(self) -> str:
        return f"TempoBackend({self.http.display!r})"

    def answer(self, query: TraceQuery) -> dict[str, Any]:
        if query.trace_id is not None:
            window = (query.start, query.end) if query.window_given else None
            spans = self._trace(query.trace_id, window)
            if spans is None:
                raise BackendError(f"trace {query.trace_id} not found", argument="trace_id", backend=BACKEND_NAME)
            return traces_result(spans, query, backend=BACKEND_NAME)
        if query.end - query.start > MAX_SEARCH_WINDOW:
            raise BackendError("Tempo searches at most 168h at once; narrow the window", argument="start",
                               backend=BACKEND_NAME)
        start_s, end_s = _unix(query.start, up=False), _unix(query.end, up=True)
        params = {"q": build_traceql(query), "start": start_s, "end": max(end_s, start_s + 1), "limit": query.limit,
                  "spss": SPANS_PER_SPANSET}
        body = self.http.get_json("/api/search", params, what="tempo search")
        found = body.get("traces") if isinstance(body, dict) else None
        if found is None:
            found = []
        if not isinstance(found, list):
            raise BackendError("tempo search returned a malformed body (traces is not a list)", backend=BACKEND_NAME)
        spans: list[Span] = []
        missing = 0
        for item in found[: query.limit]:
            if not isinstance(item, dict) or not item.get("traceID"):
                continue
            trace = self._trace(normalise_trace_id(item["traceID"]), (query.start, query.end))
            if trace is None:
                missing += 1
                continue
            spans.extend(trace)
        note = f"{missing} found trace(s) could not be read by id" if missing else None
        return traces_result(spans, query, backend=BACKEND_NAME, matched=len(found), note=note)

    def _trace(self, trace_id: str, window: tuple[datetime, datetime] | None) -> list[Span] | None:
        """The whole trace, or None when Tempo has no trace of that id (404)."""
        params = {}
        if window is not None:
            params = {"start": _unix(window[0], up=False), "end": _unix(window[1], up=True)}
        reply = self.http.get(f"/api/traces/{path_segment(trace_id)}", params)
        if reply.status == 404:
            return None
        if not 200 <= reply.status < 300:
            raise self.http.error(f"tempo trace by id failed (HTTP {reply.status}): {self.http.snippet(reply)}")
        if not reply.is_json:
            raise self.http.error(f"tempo at {self.http.display} returned a non-JSON trace: {self.http.snippet(reply)}")
        return spans_from_otlp(reply.body, backend=BACKEND_NAME)
