"""``query_traces`` for the demo world: the scenarios' trace templates expanded and time-shifted.

Each template of a scenario's ``traces.json`` becomes one trace per occurrence; ids are derived
from the scenario, the template and the occurrence, so every answer is deterministic for a fixed
"now". Filters behave like a TraceQL search (one span meets them all); the newest ``limit`` matching
traces are read whole, as Tempo and Jaeger return them. Stdlib only.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Iterable

from diagnosis.demo.loader import Scenario
from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.traces import Span, check_trace_query, traces_result

__all__ = ["DemoTraces"]

BACKEND_NAME = "demo"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = 1_000_000


def _id(*parts: Any, width: int) -> str:
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()[:width]
    return digest if digest.strip("0") else "1".rjust(width, "0")


def _occurrences(template: dict[str, Any]) -> list[int]:
    if "offset_seconds" in template:
        return [template["offset_seconds"]]
    return list(range(template["from_offset_seconds"], template["to_offset_seconds"] + 1, template["every_seconds"]))


def _expand(span: dict[str, Any], *, trace_id: str, path: str, parent: str | None, start_ns: int, occurrence: int,
            out: list[Span]) -> None:
    durations = span["duration_ms"] if isinstance(span["duration_ms"], list) else [span["duration_ms"]]
    span_id = _id(trace_id, path, width=16)
    begin = start_ns + int(span.get("start_ms", 0) * _MS)
    out.append(Span(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent, service=span["service"],
        operation=span["operation"], kind=span.get("kind", "internal"), start_ns=begin,
        duration_ns=int(durations[occurrence % len(durations)] * _MS), status=span.get("status", "unset"),
        status_message=span.get("status_message", ""), attributes=dict(span.get("attributes", {})),
    ))
    for i, child in enumerate(span.get("children", [])):
        _expand(child, trace_id=trace_id, path=f"{path}.{i}", parent=span_id, start_ns=begin, occurrence=occurrence,
                out=out)


class DemoTraces:
    """Every trace of the given scenarios, with start times relative to "now" (offset 0)."""

    def __init__(self, scenarios: Iterable[Scenario]) -> None:
        self._traces: list[tuple[int, str, list[Span]]] = []  # (offset ns, trace id, spans relative to now)
        for scenario in scenarios:
            for t, template in enumerate(scenario.traces):
                for k, offset in enumerate(_occurrences(template)):
                    trace_id = _id(scenario.name, t, offset, width=32)
                    spans: list[Span] = []
                    _expand(template["root"], trace_id=trace_id, path="0", parent=None, start_ns=offset * 1_000_000_000,
                            occurrence=k, out=spans)
                    self._traces.append((offset * 1_000_000_000, trace_id, spans))
        self._traces.sort(key=lambda item: (item[0], item[1]))

    def __len__(self) -> int:
        return len(self._traces)

    def services(self) -> set[str]:
        return {s.service for _, _, spans in self._traces for s in spans}

    def query_traces(self, *, now: datetime, service: str | None = None, operation: str | None = None,
                     trace_id: str | None = None, status: str | None = None, min_duration: str | None = None,
                     start: Any = None, end: Any = None, limit: Any = None) -> dict[str, Any]:
        query = check_trace_query(service=service, operation=operation, trace_id=trace_id, status=status,
                                  min_duration=min_duration, start=start, end=end, limit=limit, now=now)
        now_ns = int((now - _EPOCH).total_seconds()) * 1_000_000_000

        def shifted(spans: list[Span]) -> list[Span]:
            return [replace(s, start_ns=s.start_ns + now_ns) for s in spans]

        if query.trace_id is not None:
            for _, tid, spans in self._traces:
                if tid == query.trace_id:
                    return traces_result(shifted(spans), query, backend=BACKEND_NAME)
            raise BackendError(f"trace {query.trace_id} not found", argument="trace_id", backend=BACKEND_NAME)
        low = int((query.start - _EPOCH).total_seconds() * 1e9) - now_ns
        high = int((query.end - _EPOCH).total_seconds() * 1e9) - now_ns
        matching = [spans for offset, _, spans in self._traces if low <= offset <= high and query.matches(spans)]
        read = matching[-query.limit:]
        note = None
        if query.service and query.service not in self.services():
            note = f"no traces exist for service {query.service!r}"
        return traces_result([s for spans in read for s in shifted(spans)], query, backend=BACKEND_NAME,
                             matched=len(matching), note=note)
