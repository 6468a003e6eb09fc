"""The recorded tool backend: a replay serves every tool call from the original run's invocations.

Framework-free: the recorded calls come through `RecordingLookup` (implemented over the audit
tables in `diagnosis.services.replay`). The match is exact on the tool name plus the normalised
arguments; a call the original run never made raises `NotInRecording` (recorded as an ERROR
invocation), unless a live fallback backend was given, which then answers and is marked so.
Recorded results are served exactly as they were stored, timestamps included.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Iterable, Protocol

from diagnosis.redaction import redact_value
from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.registry import TOOL_SCHEMAS, Backends, call_optional_backend

RECORDED, NOT_IN_RECORDING, LIVE_FALLBACK = "recorded", "not_in_recording", "live_fallback"


@dataclass(frozen=True)
class RecordedCall:
    """One invocation of the original run, as stored."""

    pk: Any
    invocation_id: str
    tool_name: str
    arguments: dict
    status: str
    result: Any
    error_message: str = ""


class RecordingLookup(Protocol):
    def recorded_calls(self) -> Iterable[RecordedCall]:
        """The original run's invocations, in call order."""


class NotInRecording(BackendError):
    code = NOT_IN_RECORDING


def normalise_arguments(tool_name: str, arguments: Any) -> str:
    """A canonical key for (tool, arguments): defaults filled in, empty values dropped, integers as
    integers, strings stripped, keys sorted. Two calls match only if their keys are equal."""
    args = arguments if isinstance(arguments, dict) else {"raw": str(arguments)}
    props = (TOOL_SCHEMAS.get(tool_name) or {}).get("parameters", {}).get("properties", {})
    clean: dict[str, Any] = {}
    for key, spec in props.items():
        if "default" in spec:
            clean[key] = spec["default"]
    for key, value in args.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if isinstance(value, str):
            value = value.strip()
        if (props.get(key) or {}).get("type") == "integer" and isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        clean[key] = value
    return json.dumps([tool_name, clean], sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Served:
    """How the last dispatched call was answered: the recorder attaches it to the new invocation."""

    mode: str
    source: RecordedCall | None = None


class RecordedBackend:
    """Logs, metrics, alerts, Kubernetes, traces, changes and knowledge, all answered from one recorded run."""

    def __init__(self, calls: Iterable[RecordedCall], *, live: Backends | None = None,
                 cases_check=None):
        self._queues: dict[str, deque[RecordedCall]] = defaultdict(deque)
        self._last: dict[str, RecordedCall] = {}
        for call in calls:
            if call.status in ("SUCCESS", "ERROR"):  # a BLOCKED call never reached a backend
                self._queues[normalise_arguments(call.tool_name, call.arguments)].append(call)
        self.live = live
        # (recorded knowledge results) -> the same, with cases no longer published replaced by a stub
        self.cases_check = cases_check
        self._served: Served | None = None

    def take_served(self) -> Served | None:
        served, self._served = self._served, None
        return served

    def _serve(self, tool_name: str, arguments: dict, live_call) -> Any:
        key = normalise_arguments(tool_name, redact_value(arguments))
        queue = self._queues.get(key)
        call = queue.popleft() if queue else self._last.get(key)  # a repeated call gets the last answer again
        if call is None:
            if self.live is None:
                self._served = Served(NOT_IN_RECORDING)
                raise NotInRecording(
                    f"not_in_recording: the recorded run never called {tool_name} with these arguments "
                    f"({json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)[:300]})")
            self._served = Served(LIVE_FALLBACK)
            return live_call()
        self._last[key] = call
        self._served = Served(RECORDED, call)
        if call.status != "SUCCESS":
            raise BackendError(call.error_message or "the recorded call failed")
        return call.result

    # The backend protocols (LogsBackend, MetricsBackend, AlertsBackend, KnowledgeSearch).
    def query_logs(self, **args) -> Any:
        return self._serve("query_logs", args, lambda: self.live.logs.query_logs(**args))

    def query_metrics(self, **args) -> Any:
        return self._serve("query_metrics", args, lambda: self.live.metrics.query_metrics(**args))

    def query_alerts(self) -> Any:
        return self._serve("query_alerts", {}, lambda: self.live.alerts.query_alerts())

    def query_kubernetes(self, **args) -> Any:
        return self._serve("query_kubernetes", args, lambda: call_optional_backend(self.live, "query_kubernetes", args))

    def query_traces(self, **args) -> Any:
        return self._serve("query_traces", args, lambda: call_optional_backend(self.live, "query_traces", args))

    def query_changes(self, **args) -> Any:
        return self._serve("query_changes", args, lambda: call_optional_backend(self.live, "query_changes", args))

    def search(self, *, query: str, top_k: int, exclude_chunk_ids: set[str]) -> list[dict[str, Any]]:
        def live():
            return {"results": self.live.knowledge.search(query=query, top_k=top_k, exclude_chunk_ids=exclude_chunk_ids)}

        result = self._serve("lookup_knowledge", {"query": query, "top_k": top_k}, live)
        results = result.get("results") if isinstance(result, dict) else None
        results = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
        return self.cases_check(results) if self.cases_check is not None else results

    def backends(self) -> Backends:
        return Backends(logs=self, metrics=self, alerts=self, knowledge=self, kubernetes=self, traces=self, changes=self)
