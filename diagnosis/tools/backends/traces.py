"""Spans from any tracing backend in one shape, and their aggregation per service-to-service edge.

The ``query_traces`` result (docs/TOOLS.md) is built here for every backend (Tempo, Jaeger, demo):
``traces`` (one summary per trace), ``spans`` (bounded, errors and the slowest first when cut) and
``edges`` (calls, errors and latency percentiles between two services over the window). The wire
formats are parsed into ``Span`` by ``trace_formats.py``. Stdlib only.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping

from diagnosis.tools.backends.base import BackendError, format_number, format_timestamp, parse_time

__all__ = [
    "Span", "TraceQuery", "CheckedTraceSearch", "check_trace_query", "traces_result",
    "aggregate_edges", "normalise_trace_id", "format_duration", "MAX_LIMIT", "DEFAULT_LIMIT",
]

DEFAULT_LIMIT = 20
MAX_LIMIT = 50
MAX_SPANS = 120  # spans listed in one result; edges and trace summaries still count every span
MAX_ATTRIBUTES = 24
MAX_ATTRIBUTE_CHARS = 300
SAMPLE_TRACES = 3  # trace ids an edge names as examples (error traces first)
STATUSES = ("any", "error")
# Attributes that name the far side of an outgoing call whose callee sent no span of its own
# (a database, a cache, an uninstrumented service), in order of preference (OpenTelemetry conventions).
PEER_ATTRIBUTES = ("peer.service", "server.address", "net.peer.name", "db.name")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_HEX_RE = re.compile(r"^[0-9a-fA-F]+$")
_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$")
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000,
            "h": 3_600_000_000_000}


@dataclass(frozen=True)
class Span:
    """One span, whatever backend it came from. Ids are lowercase hex (32 and 16 characters)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    service: str
    operation: str
    kind: str  # server | client | producer | consumer | internal | unspecified
    start_ns: int
    duration_ns: int
    status: str  # error | ok | unset
    status_message: str = ""
    attributes: Mapping[str, Any] = field(default_factory=dict)

    # This and the dataclass below are shaped like llm.base's `wants_json` and `ChatReply`: a likeness, no logic.
    @property
    def is_error(self) -> bool:
        return self.status == "error"


@dataclass(frozen=True)
class TraceQuery:
    """Checked ``query_traces`` arguments; the window is resolved against ``now``."""

    service: str | None
    operation: str | None
    trace_id: str | None
    status: str
    min_duration_ns: int | None
    start: datetime
    end: datetime
    limit: int
    window_given: bool = False  # the caller named start or end (a lookup by id then keeps to that window)

    def matches(self, spans: list[Span]) -> bool:
        """Whether a trace has one span satisfying every filter (as TraceQL's one spanset does)."""
        for span in spans:
            if self.service and span.service != self.service:
                continue
            if self.operation and span.operation != self.operation:
                continue
            if self.status == "error" and not span.is_error:
                continue
            if self.min_duration_ns is not None and span.duration_ns < self.min_duration_ns:
                continue
            return True
        return False


# --- arguments --------------------------------------------------------------------------------------


def normalise_trace_id(value: Any, *, argument: str = "trace_id", width: int = 32) -> str:
    """Hex (left-padded to ``width``) from hex or base64 text, as Tempo and Jaeger print ids."""
    text = str(value or "").strip()
    if text and len(text) <= width and _HEX_RE.match(text):
        return text.lower().rjust(width, "0")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if raw and len(raw) * 2 <= width:
        return raw.hex().rjust(width, "0")
    raise BackendError(f"not a trace id (up to {width} hex characters, or base64): {text[:80]!r}", argument=argument)


def parse_duration_ns(value: Any, *, argument: str = "min_duration") -> int | None:
    """``250ms``, ``1.5s``, ``1m30s`` (Go durations) -> nanoseconds."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    if not _DURATION_RE.match(text):
        raise BackendError(f"use a duration such as 250ms, 1.5s or 2m, got {value!r}", argument=argument)
    total = sum(float(n) * _UNIT_NS[u] for n, u in _DURATION_PART_RE.findall(text))
    if not math.isfinite(total) or total <= 0 or total > 24 * _UNIT_NS["h"]:
        raise BackendError(f"must be a positive duration of at most 24h, got {value!r}", argument=argument)
    return int(total)


def format_duration(ns: int) -> str:
    """Nanoseconds as the shortest exact Go duration: ``250ms``, ``1500us``, ``2s``."""
    for unit, size in (("h", _UNIT_NS["h"]), ("m", _UNIT_NS["m"]), ("s", _UNIT_NS["s"]), ("ms", _UNIT_NS["ms"]),
                       ("us", _UNIT_NS["us"])):
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"


def check_trace_query(*, service: str | None = None, operation: str | None = None, trace_id: str | None = None,
                      status: str | None = None, min_duration: str | None = None, start: Any = None,
                      end: Any = None, limit: Any = None, now: datetime) -> TraceQuery:
    """Validate the arguments every backend shares; a bad one raises ``BackendError`` naming it."""
    service = (service or "").strip() or None
    operation = (operation or "").strip() or None
    status = (status or "any").strip().lower()
    if status not in STATUSES:
        raise BackendError(f"must be one of {', '.join(STATUSES)}, got {status!r}", argument="status")
    if limit in (None, ""):
        limit = DEFAULT_LIMIT
    if isinstance(limit, bool) or not str(limit).strip().isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
        raise BackendError(f"must be an integer between 1 and {MAX_LIMIT}, got {limit!r}", argument="limit")
    end_dt = parse_time(end, argument="end") or now
    start_dt = parse_time(start, argument="start") or end_dt - timedelta(minutes=60)
    if end_dt <= start_dt:
        raise BackendError("end must be after start", argument="end")
    tid = normalise_trace_id(trace_id) if trace_id not in (None, "") else None
    if tid is None and not service and not operation and status == "any" and min_duration in (None, ""):
        # An unfiltered search returns whatever traces happen to be newest: say what to look for.
        raise BackendError("give a service (and optionally an operation, status=error or min_duration), "
                           "or a trace_id", argument="service")
    return TraceQuery(service, operation, tid, status, parse_duration_ns(min_duration), start_dt, end_dt, int(limit),
                      window_given=bool(start or end))


class CheckedTraceSearch:
    """``query_traces`` of a remote trace store: the arguments checked here, the search in ``answer``."""

    def query_traces(self, *, service: str | None = None, operation: str | None = None, trace_id: str | None = None,
                     status: str | None = None, min_duration: str | None = None, start: Any = None, end: Any = None,
                     limit: Any = None) -> dict[str, Any]:
        return self.answer(check_trace_query(service=service, operation=operation, trace_id=trace_id, status=status,
                                             min_duration=min_duration, start=start, end=end, limit=limit,
                                             now=datetime.now(timezone.utc)))

    def answer(self, query: TraceQuery) -> dict[str, Any]:
        raise NotImplementedError


# --- the result ------------------------------------------------------------------------------------


def _iso(ns: int) -> str:
    """Unix nanoseconds -> ISO 8601 UTC with milliseconds (``2026-11-29T10:02:03.125Z``)."""
    millis = ns // 1_000_000
    text = (_EPOCH + timedelta(milliseconds=millis)).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{millis % 1000:03d}Z"


def _ms(ns: int | float) -> int | float:
    value = round(ns / 1_000_000, 3)
    return int(value) if value == int(value) else value


def _percentile(sorted_values: list[int], p: float) -> int:
    """Nearest-rank percentile (no interpolation: every value it reports was observed)."""
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def _attribute_value(value: Any) -> Any:
    """Strings cut at ``MAX_ATTRIBUTE_CHARS``; arrays of scalars kept (bounded); maps as compact JSON text."""
    if isinstance(value, str):
        return value if len(value) <= MAX_ATTRIBUTE_CHARS else value[:MAX_ATTRIBUTE_CHARS] + "…"
    if isinstance(value, list) and all(not isinstance(v, (list, dict)) for v in value):
        return [_attribute_value(v) for v in value[:MAX_ATTRIBUTES]]
    if isinstance(value, (list, dict)):
        return _attribute_value(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))
    return value


def _peer(span: Span) -> tuple[str, str] | None:
    for key in PEER_ATTRIBUTES:
        value = span.attributes.get(key)
        if isinstance(value, str) and value.strip() and value.strip() != span.service:
            return value.strip(), key
    return None


@dataclass
class _Edge:
    caller: str
    callee: str
    via: str
    durations: list[int] = field(default_factory=list)
    errors: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    first_error_ns: int | None = None
    error_traces: list[str] = field(default_factory=list)
    ok_traces: list[str] = field(default_factory=list)

    def add(self, span: Span, error: bool) -> None:
        self.durations.append(span.duration_ns)
        self.first_ns = span.start_ns if self.first_ns is None else min(self.first_ns, span.start_ns)
        self.last_ns = span.start_ns if self.last_ns is None else max(self.last_ns, span.start_ns)
        if error:
            self.errors += 1
            self.first_error_ns = span.start_ns if self.first_error_ns is None else min(self.first_error_ns, span.start_ns)
        bucket = self.error_traces if error else self.ok_traces
        if span.trace_id not in bucket:
            bucket.append(span.trace_id)

    def to_dict(self) -> dict[str, Any]:
        values = sorted(self.durations)
        calls = len(values)
        ratio = round(self.errors / calls, 4) if calls else 0
        p50, p95, p99 = (_ms(_percentile(values, p)) for p in (50, 95, 99))
        samples = (self.error_traces + [t for t in self.ok_traces if t not in self.error_traces])[:SAMPLE_TRACES]
        return {
            "caller": self.caller, "callee": self.callee, "calls": calls, "errors": self.errors,
            "error_ratio": ratio, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "max_ms": _ms(values[-1]),
            "first_at": _iso(self.first_ns), "last_at": _iso(self.last_ns),
            "first_error_at": _iso(self.first_error_ns) if self.first_error_ns is not None else None,
            "via": self.via, "sample_trace_ids": samples,
            "description": (f"{self.caller} -> {self.callee}: {calls} calls, {self.errors} errors "
                            f"({format_number(round(ratio * 100, 1))}%), p50 {format_number(p50)} ms, "
                            f"p95 {format_number(p95)} ms, p99 {format_number(p99)} ms"),
        }


def aggregate_edges(spans: Iterable[Span]) -> list[dict[str, Any]]:
    """Calls, errors and latency per caller -> callee pair.

    A span whose parent belongs to another service is one call of parent service -> span service
    (``via: "parent"``); its latency is the callee span's duration, and it failed when the callee
    span or the caller's client span around it is an error. A client or producer span with no
    child in another service is a call to the peer its attributes name (``via`` is that attribute,
    e.g. ``peer.service``): a database or a service that sends no spans.
    """
    spans = list(spans)
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    remote_parents = set()
    edges: dict[tuple[str, str], _Edge] = {}
    for span in spans:
        parent = by_id.get((span.trace_id, span.parent_span_id)) if span.parent_span_id else None
        if parent is not None and parent.service != span.service:
            remote_parents.add((parent.trace_id, parent.span_id))
            error = span.is_error or (parent.kind == "client" and parent.is_error)
            edges.setdefault((parent.service, span.service), _Edge(parent.service, span.service, "parent")).add(span, error)
    for span in spans:
        if span.kind not in ("client", "producer") or (span.trace_id, span.span_id) in remote_parents:
            continue
        peer = _peer(span)
        if peer is not None:
            edge = edges.setdefault((span.service, peer[0]), _Edge(span.service, peer[0], peer[1]))
            edge.add(span, span.is_error)
    return [edges[key].to_dict() for key in sorted(edges)]


def _span_dict(span: Span) -> dict[str, Any]:
    attributes = {k: _attribute_value(span.attributes[k]) for k in sorted(span.attributes)[:MAX_ATTRIBUTES]}
    status = span.status.upper() + (f": {span.status_message}" if span.status_message else "")
    return {
        "trace_id": span.trace_id, "span_id": span.span_id, "parent_span_id": span.parent_span_id,
        "service": span.service, "operation": span.operation, "kind": span.kind, "start": _iso(span.start_ns),
        "duration_ms": _ms(span.duration_ns), "status": span.status, "status_message": span.status_message,
        "attributes": attributes,
        "description": f"{span.service} {span.kind} {span.operation} {format_number(_ms(span.duration_ns))} ms {status}",
    }


def _trace_summary(trace_id: str, spans: list[Span]) -> dict[str, Any]:
    ids = {s.span_id for s in spans}
    roots = sorted((s for s in spans if not s.parent_span_id or s.parent_span_id not in ids), key=lambda s: s.start_ns)
    root = roots[0] if roots else None
    start = min(s.start_ns for s in spans)
    end = max(s.start_ns + s.duration_ns for s in spans)
    return {
        "trace_id": trace_id, "root_service": root.service if root else None,
        "root_operation": root.operation if root else None, "start": _iso(start), "duration_ms": _ms(end - start),
        "spans": len(spans), "errors": sum(1 for s in spans if s.is_error),
        "services": sorted({s.service for s in spans}),
    }


def _select_spans(spans: list[Span], limit: int) -> list[Span]:
    """All spans when they fit; else the error spans, then the slowest, listed in time order."""
    if len(spans) <= limit:
        chosen = spans
    else:
        ranked = sorted(spans, key=lambda s: (not s.is_error, -s.duration_ns, s.start_ns, s.trace_id, s.span_id))
        chosen = ranked[:limit]
    return sorted(chosen, key=lambda s: (s.start_ns, s.trace_id, s.span_id))


def _ns(value: datetime) -> int:
    return ((value - _EPOCH) // timedelta(microseconds=1)) * 1000


def traces_result(spans: Iterable[Span], query: TraceQuery, *, backend: str, matched: int | None = None,
                  note: str | None = None) -> dict[str, Any]:
    """The ``query_traces`` result for the spans a backend fetched.

    Only spans starting inside the window count for a search (a trace asked for by id is kept whole);
    ``traces`` are newest first, ``spans`` oldest first, ``edges`` sorted by caller and callee.
    """
    spans = list(spans)
    if query.trace_id is None:
        low, high = _ns(query.start), _ns(query.end)
        spans = [s for s in spans if low <= s.start_ns <= high]
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    summaries = sorted((_trace_summary(t, s) for t, s in by_trace.items()), key=lambda t: (t["start"], t["trace_id"]),
                       reverse=True)
    listed = _select_spans(spans, MAX_SPANS)
    result: dict[str, Any] = {
        "backend": backend,
        "service": query.service,
        "start": format_timestamp(query.start),
        "end": format_timestamp(query.end),
        "traces_examined": len(by_trace),
        "traces": summaries,
        "edges": aggregate_edges(spans),
        "spans": [_span_dict(s) for s in listed],
        "omitted_spans": len(spans) - len(listed),
    }
    if matched is not None:
        result["traces_matched"] = matched
    if note:
        result["note"] = note
    return result
