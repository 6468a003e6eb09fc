"""The evidence tools: their schemas, the allow-list, and the one call path that records every call.

Framework-free: persistence goes through `InvocationRecorder`, knowledge through
`KnowledgeSearch`; the Django implementations live in `diagnosis.services`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from diagnosis.contracts import RANKING_TOOL
from diagnosis.redaction import redact_value
from diagnosis.tools.ranking_hint import RANKING_SCHEMA, rank_root_causes
from diagnosis.tools.backends.base import AlertsBackend, BackendError, LogsBackend, MetricsBackend

SUCCESS, ERROR, BLOCKED = "SUCCESS", "ERROR", "BLOCKED"
# Top-level result keys that restate what was asked (or comment on it) rather than what was observed:
# they move under `request` with the call's arguments, where no citation may point (`path_not_evidence`).
REQUEST_KEYS = ("service", "query", "start", "end", "step", "note", "namespace", "kind", "name", "selector")


def _tool(description: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A tool's schema: its description and its arguments, a closed JSON object."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    parameters["additionalProperties"] = False
    return {"description": description, "parameters": parameters}


# One entry per tool, alike in shape by design (a JSON Schema each); `_tool` holds what they share.
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "lookup_knowledge": _tool(
        "Search runbooks and the case library of past useful diagnoses (English or Chinese).",
        {
            "query": {"type": "string", "description": "What to look for, e.g. 'connection pool exhausted'."},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
        },
        required=["query"],
    ),
    "query_logs": _tool(
        "Log lines of one service in a time window, optionally filtered by words (e.g. 'error timeout').",
        {
            "service": {"type": "string"},
            "query": {"type": "string", "description": "Words the line must contain; 'level:ERROR' filters by level."},
            "start": {"type": "string", "description": "ISO-8601 UTC; default 60 minutes ago."},
            "end": {"type": "string", "description": "ISO-8601 UTC; default now."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
        },
        required=["service"],
    ),
    "query_metrics": _tool(
        "Metric series with min/max/baseline stats: a PromQL query, or a metric name and a service.",
        {
            "query": {"type": "string"},
            "metric": {"type": "string"},
            "service": {"type": "string"},
            "start": {"type": "string"},
            "end": {"type": "string"},
            "step": {"type": "string", "description": "Resolution such as 60s or 5m."},
        },
    ),
    "query_kubernetes": _tool(
        "Kubernetes events plus pod and container status (state, last state, reason, exit code, "
        "restart count, image, pod IP) of a workload or pod, by name or label selector; kind 'service' "
        "returns Services with their cluster IP, ports and endpoint pod IPs (every Service of the "
        "namespace when no name is given), to tell which service an address belongs to. Read-only.",
        {
            "namespace": {"type": "string", "description": "Default: the configured namespace."},
            "kind": {"type": "string", "description": "pod, deployment, statefulset, daemonset, job, cronjob, service …; default pod."},
            "name": {"type": "string", "description": "The object's name (a workload name matches its pods)."},
            "selector": {"type": "string", "description": "A label selector such as app=checkout."},
        },
    ),
    "query_traces": _tool(
        "Distributed traces of a service (or one trace by id): spans with service, operation, parent, "
        "status, duration and attributes, and per caller->callee edge the calls, errors and latency "
        "percentiles over the window. Read-only.",
        {
            "service": {"type": "string", "description": "Traces with a span of this service."},
            "operation": {"type": "string", "description": "Only spans of this operation, e.g. 'POST /orders'."},
            "trace_id": {"type": "string", "description": "One trace, whole (hex id); no other filter needed."},
            "status": {"type": "string", "enum": ["any", "error"], "default": "any",
        "description": "'error': only traces with an error span (of the service)."},
            "min_duration": {"type": "string", "description": "Only spans at least this long, e.g. 500ms or 2s."},
            "start": {"type": "string", "description": "ISO-8601 UTC; default 60 minutes before end."},
            "end": {"type": "string", "description": "ISO-8601 UTC; default now."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20,
                      "description": "How many traces to read."},
        },
    ),
    "query_changes": _tool(
        "What changed, oldest first: Kubernetes rollouts (Deployment, StatefulSet, DaemonSet revisions "
        "with image or spec differences), ConfigMap and Secret updates (names and times, never "
        "values), Helm release history and Argo CD syncs. Read-only.",
        {
            "service": {"type": "string", "description": "A workload, release or application name; default all."},
            "namespace": {"type": "string", "description": "Default: the configured namespace."},
            "kind": {"type": "string", "enum": ["rollout", "config", "secret", "helm", "argocd"],
                     "description": "Only changes of this kind; default every kind."},
            "start": {"type": "string", "description": "ISO-8601 UTC; default 24 hours before end."},
            "end": {"type": "string", "description": "ISO-8601 UTC; default now."},
        },
    ),
    "query_alerts": _tool("The currently firing or pending alerts.", {}),
    RANKING_TOOL: RANKING_SCHEMA,
}
ALLOWED_TOOLS = frozenset(TOOL_SCHEMAS)
# The tools whose results are evidence: what a plan names and a citation may name. The ranking is a hint.
EVIDENCE_TOOLS = ALLOWED_TOOLS - {RANKING_TOOL}


def openai_tool_specs(names=ALLOWED_TOOLS) -> list[dict[str, Any]]:
    """The allow-listed tools in OpenAI function-calling form."""
    return [
        {"type": "function", "function": {"name": name, **TOOL_SCHEMAS[name]}}
        for name in sorted(names)
    ]


# Alike in shape to llm.base.ToolCall only (an id, a tool name, arguments): what a call produced, not a request.
@dataclass(frozen=True)
class ToolOutcome:
    """What one call produced, as recorded: the id claims cite and the stored (redacted) result."""

    invocation_id: str
    tool_name: str
    arguments: dict[str, Any]
    status: str
    result: Any
    error: str = ""
    truncated: bool = False
    duration_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "invocation_id": self.invocation_id, "tool_name": self.tool_name, "arguments": self.arguments,
            "status": self.status, "result": self.result, "error": self.error, "truncated": self.truncated,
        }


class InvocationRecorder(Protocol):
    def record(
        self, *, tool_name: str, arguments: dict, status: str, result: Any, truncated: bool,
        error_message: str, duration_ms: int, retrieval_details: dict | None,
    ) -> str:
        """Persist one invocation; return its short invocation id (unique in the run)."""


class KnowledgeSearch(Protocol):
    def search(self, *, query: str, top_k: int, exclude_chunk_ids: set[str]) -> list[dict[str, Any]]:
        """Ranked results in the `lookup_knowledge` result shape (each with a `chunk_id`)."""


@dataclass
class Backends:
    logs: LogsBackend
    metrics: MetricsBackend
    alerts: AlertsBackend
    knowledge: KnowledgeSearch
    kubernetes: Any = None  # a backend with ``query_kubernetes``; None: the tool answers "not configured"
    traces: Any = None  # a backend with ``query_traces`` (tempo, jaeger, demo); None: "not configured"
    changes: Any = None  # a backend with ``query_changes`` (kubernetes + helm + argocd, demo); None: "not configured"


# Tools whose backend may be absent: tool -> (Backends attribute, what it is called, the setting that configures it).
OPTIONAL_BACKENDS = {
    "query_kubernetes": ("kubernetes", "Kubernetes", "KUBERNETES_BACKEND"),
    "query_traces": ("traces", "traces", "TRACES_BACKEND"),
    "query_changes": ("changes", "changes", "CHANGES_BACKEND"),
}


def call_optional_backend(backends: Backends, tool: str, args: dict[str, Any]) -> Any:
    """``tool`` on its backend, or a BackendError saying which setting configures it."""
    attribute, label, setting = OPTIONAL_BACKENDS[tool]
    backend = getattr(backends, attribute)
    if backend is None:
        raise BackendError(f"no {label} backend is configured ({setting})", backend=attribute)
    return getattr(backend, tool)(**args)


class ToolArgumentError(ValueError):
    def __init__(self, argument: str, message: str):
        super().__init__(f"{argument}: {message}")
        self.argument = argument


def _check_arguments(name: str, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, dict):
        raise ToolArgumentError("arguments", "must be a JSON object")
    schema = TOOL_SCHEMAS[name]["parameters"]
    props = schema["properties"]
    for key in arguments:
        if key not in props:
            raise ToolArgumentError(key, f"unknown argument for {name}; allowed: {', '.join(sorted(props)) or 'none'}")
    for key in schema.get("required", ()):
        if arguments.get(key) in (None, ""):
            raise ToolArgumentError(key, "is required")
    clean = {}
    for key, value in arguments.items():
        kind = props[key]["type"]
        if value is None:
            continue
        if kind == "integer":
            if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().lstrip("-").isdigit():
                raise ToolArgumentError(key, f"must be an integer, got {value!r}")
            value = int(value)
            low, high = props[key].get("minimum"), props[key].get("maximum")
            if (low is not None and value < low) or (high is not None and value > high):
                raise ToolArgumentError(key, f"must be between {low} and {high}, got {value}")
        elif not isinstance(value, str):
            raise ToolArgumentError(key, f"must be a string, got {type(value).__name__}")
        elif len(value) > 2000:
            raise ToolArgumentError(key, "is longer than 2000 characters")
        elif "enum" in props[key] and value not in props[key]["enum"]:
            raise ToolArgumentError(key, f"must be one of {', '.join(props[key]['enum'])}, got {value!r}")
        clean[key] = value
    if name == "query_kubernetes" and not (clean.get("name") or clean.get("selector")
                                           or str(clean.get("kind", "")).strip().lower() == "service"):
        raise ToolArgumentError("name", "give a name or a label selector (e.g. app=checkout)")
    if name == "query_metrics" and not (clean.get("query") or clean.get("metric") or clean.get("service")):
        raise ToolArgumentError("query", "give a query, or a metric and/or a service")
    return clean


def cap_result(result: Any, max_bytes: int) -> tuple[Any, bool]:
    """Keep a result under `max_bytes` of JSON by dropping trailing list items; flag it truncated."""
    size = len(json.dumps(result, ensure_ascii=False, default=str).encode())
    if size <= max_bytes:
        return result, False
    if isinstance(result, dict):
        result = dict(result)
        # Trace spans go before trace summaries and edges: the edges aggregate every span.
        for key in ("records", "series", "alerts", "results", "events", "pods", "spans", "traces", "changes", "edges",
                    "candidates"):
            items = result.get(key)
            if isinstance(items, list) and items:
                keep = list(items)
                # Log records, events and changes are oldest-first: the newest matter most, so drop from the front.
                newest_last = key in ("records", "events", "changes")
                while keep and len(json.dumps({**result, key: keep}, ensure_ascii=False, default=str).encode()) > max_bytes:
                    size = max(0, len(keep) * 3 // 4)
                    keep = keep[len(keep) - size:] if newest_last else keep[:size]
                result[key] = keep
                result["truncated"] = True
                result["omitted_items"] = len(items) - len(keep)
                if len(json.dumps(result, ensure_ascii=False, default=str).encode()) <= max_bytes:
                    return result, True
    return {"truncated": True, "note": f"result of {size} bytes exceeded the {max_bytes}-byte cap"}, True


def split_request(result: Any, arguments: dict[str, Any]) -> Any:
    """``{"request": {"arguments", <echoed keys>}, <observed keys>}``: what was asked, apart from what was seen."""
    if not isinstance(result, dict):
        return result
    request = {"arguments": dict(arguments)}
    observed = {}
    for key, value in result.items():
        (request if key in REQUEST_KEYS else observed)[key] = value
    return {"request": request, **observed}


@dataclass
class ToolBox:
    """Runs allow-listed tools for one run and records every call, blocked and failed ones included."""

    backends: Backends
    recorder: InvocationRecorder
    max_calls: int
    max_result_bytes: int = 1_000_000
    on_call: Callable[[ToolOutcome], None] | None = None
    ranking_hint: bool = True  # offer `rank_root_causes` (LLM_RANKING_HINT)
    calls: int = 0
    seen_chunk_ids: set[str] = field(default_factory=set)
    outcomes: list[ToolOutcome] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return max(0, self.max_calls - self.calls)

    @property
    def offered(self) -> frozenset[str]:
        """The tools a model is offered in this run: every allow-listed tool, the ranking hint when it is on."""
        return ALLOWED_TOOLS if self.ranking_hint else EVIDENCE_TOOLS

    def call(self, name: str, arguments: Any) -> ToolOutcome:
        started = time.perf_counter()
        safe_args = redact_value(arguments) if isinstance(arguments, dict) else {"raw": redact_value(str(arguments))}
        if name not in ALLOWED_TOOLS:
            return self._record(name, safe_args, BLOCKED, None, f"tool {name!r} is not on the allow-list", started)
        if name not in self.offered:
            return self._record(name, safe_args, BLOCKED, None, f"tool {name!r} is not offered (LLM_RANKING_HINT is off)",
                                started)
        if self.calls >= self.max_calls:
            return self._record(name, safe_args, BLOCKED, None, f"tool-call budget of {self.max_calls} per run is spent", started)
        self.calls += 1
        details = None
        try:
            clean = _check_arguments(name, arguments)
            result, details = self._dispatch(name, clean)
            result = split_request(result, clean)
        except (ToolArgumentError, BackendError) as exc:
            return self._record(name, safe_args, ERROR, None, str(exc), started)
        except Exception as exc:  # an unexpected backend fault is data for the audit, never a crash
            return self._record(name, safe_args, ERROR, None, f"{type(exc).__name__}: {exc}", started)
        return self._record(name, safe_args, SUCCESS, result, "", started, details)

    def _dispatch(self, name: str, args: dict[str, Any]) -> tuple[Any, dict | None]:
        b = self.backends
        if name == "query_logs":
            return b.logs.query_logs(**args), None
        if name == "query_metrics":
            return b.metrics.query_metrics(**args), None
        if name == "query_alerts":
            return b.alerts.query_alerts(), None
        if name in OPTIONAL_BACKENDS:
            return call_optional_backend(b, name, args), None
        if name == RANKING_TOOL:  # no backend: the localiser over what this run recorded so far
            return rank_root_causes((o.to_dict() for o in self.outcomes), args), None
        top_k = args.get("top_k", 3)
        results = b.knowledge.search(query=args["query"], top_k=top_k, exclude_chunk_ids=set(self.seen_chunk_ids))
        self.seen_chunk_ids.update(r["chunk_id"] for r in results)
        details = {"returned_chunk_ids": [r["chunk_id"] for r in results], "excluded": len(self.seen_chunk_ids) - len(results)}
        cases = [{"caseId": r["case_id"], "version": r.get("case_version"), "status": r.get("case_status", "published")}
                 for r in results if r.get("source_type") == "case" and r.get("case_id")]
        if cases:
            details["cases"] = cases  # the case versions this run used (a replay shows a withdrawn one as such)
        return {"query": args["query"], "results": results}, details

    def _record(self, name, args, status, result, error, started, details=None) -> ToolOutcome:
        truncated = False
        if result is not None:
            result, truncated = cap_result(redact_value(result), self.max_result_bytes)
        error = redact_value(error)
        duration = int((time.perf_counter() - started) * 1000)
        invocation_id = self.recorder.record(
            tool_name=name[:64], arguments=args, status=status, result=result, truncated=truncated,
            error_message=error, duration_ms=duration, retrieval_details=details,
        )
        outcome = ToolOutcome(invocation_id, name, args, status, result, error, truncated, duration)
        self.outcomes.append(outcome)
        if self.on_call:
            self.on_call(outcome)
        return outcome
