# size: the demo backend serves every telemetry tool from scenario data, each answer shaped like the real one.
"""The embedded telemetry backend: scenario folders served as logs, metrics, alerts, Kubernetes state,
traces and changes.

Scenario times are relative (``offset_seconds``); at load they are shifted so that offset 0 is
"now". Results follow docs/ARCHITECTURE.md exactly (plus a few documented extra fields); the
scenario format is in diagnosis/demo/README.md.

Logs: records are returned oldest-first; when more than ``limit`` match, the newest ``limit`` are
kept (``total`` counts every match, ``truncated`` says some were dropped). ``{ts:<layout>}``
placeholders in a line are rendered from the record's served time; the served ``level`` is the
record's own, normalised, or read from the line as the Loki backend reads it (``base.detect_level``).
``query`` is a small line filter, case-insensitive, matched as substrings against
``"<service> <level> <rendered line>"``: whitespace-separated words must all match (AND),
``"quoted phrases"`` match as one term, ``OR`` (or ``|``) separates alternatives, and
``level:ERROR`` / ``level:WARN,ERROR`` filter by the served level.

Metrics: samples are held as Prometheus holds them (counters, histogram buckets, gaps) and ``query``
is evaluated as Prometheus's ``query_range`` evaluates it (``promql.py``: a selector, or rate/irate/
increase, sum/avg/min/max/count by/without and histogram_quantile). ``metric`` and ``service`` add
matchers to a selector; unlike the Prometheus backend, ``service`` also applies to every selector of
an expression. ``stats`` and ``description`` come from ``base.py``.

Extra fields beyond the documented shapes: logs ``truncated`` (and ``note`` for an unknown
service), metric stats ``min_at``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable

import promql_parser

from diagnosis.demo.loader import Scenario, ScenarioError, load_scenario, shipped_scenarios
from diagnosis.demo.timestamps import render_timestamps
from diagnosis.tools.backends.base import (
    BackendError,
    detect_level,
    format_selector,
    format_timestamp,
    metric_series,
    metrics_result,
    normalise_level,
    range_query_step,
    resolve_window,
    workload_pods_regex,
)
from diagnosis.tools.backends.demo_changes import DemoChanges
from diagnosis.tools.backends.demo_traces import DemoTraces
from diagnosis.tools.backends.promql import (
    StoredSeries,
    evaluate_range,
    format_value,
    label_matchers,
    parse_expression,
)

__all__ = ["DemoBackend", "LogQuery", "parse_log_query", "parse_selector", "MAX_LOG_LIMIT"]

BACKEND_NAME = "demo"
MAX_LOG_LIMIT = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_QUERY_TOKEN_RE = re.compile(r'"([^"]*)"|(\S+)')
_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


# --- log query ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogQuery:
    """A parsed log filter: allowed levels (None = any) and OR-groups of AND-terms."""

    levels: frozenset[str] | None
    groups: tuple[tuple[str, ...], ...]

    def matches(self, service: str, level: str, message: str) -> bool:
        if self.levels is not None and level not in self.levels:
            return False
        if not self.groups:
            return True
        haystack = f"{service} {level} {message}".lower()
        return any(all(term in haystack for term in group) for group in self.groups)


def _normalise_level(value: str) -> str:
    return normalise_level(value) or value.strip().upper()


def _served_level(record: dict[str, Any]) -> str:
    """The level a record is served with: its own, normalised as the Loki backend normalises a level
    label (WARNING -> WARN, NOTICE -> INFO), or without one what the Loki backend reads from the line."""
    if record.get("level"):
        return normalise_level(record["level"]) or record["level"]
    sample = render_timestamps(record["message"], _EPOCH)  # layouts are fixed-width: any time reads the same
    return detect_level({}, sample)


def parse_log_query(query: str | None) -> LogQuery:
    """``'level:ERROR "timed out" pool OR refused'`` -> LogQuery (see the module docstring)."""
    if query is None:
        return LogQuery(None, ())
    if not isinstance(query, str):
        raise BackendError(f"expected text, got {type(query).__name__}", argument="query")
    levels: set[str] = set()
    groups: list[tuple[str, ...]] = []
    current: list[str] = []
    for match in _QUERY_TOKEN_RE.finditer(query):
        phrase, word = match.group(1), match.group(2)
        if word is not None and word in ("OR", "|"):
            if current:
                groups.append(tuple(current))
            current = []
            continue
        if word is not None and word.lower().startswith("level:"):
            wanted = [_normalise_level(v) for v in word[6:].split(",") if v.strip()]
            if not wanted:
                raise BackendError("level: needs a value such as level:ERROR", argument="query")
            levels.update(wanted)
            continue
        term = (phrase if phrase is not None else word).strip().lower()
        if term:
            current.append(term)
    if current:
        groups.append(tuple(current))
    return LogQuery(frozenset(levels) if levels else None, tuple(groups))


# --- metric selector ----------------------------------------------------------------------------


def parse_selector(query: str) -> list[tuple[str, str, str]]:
    """``name{a="1", b!~"x.*"}`` -> ``[("__name__", "=", "name"), ("a", "=", "1"), ("b", "!~", "x.*")]``."""
    expr = parse_expression(query)
    if not isinstance(expr, promql_parser.VectorSelector):
        raise BackendError(f"expected a metric selector such as http_requests_total{{service=\"x\"}}, got {query!r}",
                           argument="query")
    return label_matchers(expr)


def _parse_limit(limit: Any) -> int:
    problem = f"must be an integer between 1 and {MAX_LOG_LIMIT}, got {limit!r}"
    if limit is None:
        return 50
    if isinstance(limit, bool):
        raise BackendError(problem, argument="limit")
    if isinstance(limit, int):
        n = limit
    elif isinstance(limit, float) and limit.is_integer():
        n = int(limit)
    elif isinstance(limit, str) and limit.strip().isdigit():
        n = int(limit.strip())
    else:
        raise BackendError(problem, argument="limit")
    if not 1 <= n <= MAX_LOG_LIMIT:
        raise BackendError(problem, argument="limit")
    return n


# --- Kubernetes objects, served as the kubernetes backend normalises them ------------------------------

_POD_KEYS = ("name", "namespace", "phase", "node", "podIP", "hostIP", "reason", "message", "labels", "containers",
             "conditions")


def _label_selector(selector: str | None) -> dict[str, str]:
    """``app=x,tier=db`` (also ``==``) -> ``{"app": "x", "tier": "db"}``."""
    pairs = [part.replace("==", "=").split("=", 1) for part in (selector or "").split(",") if "=" in part]
    return {k.strip(): v.strip() for k, v in pairs}


def _labels_match(labels: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())


def _served_pod(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Every key the kubernetes backend returns (absent ones null), then any further key of the file."""
    defaults = {"namespace": namespace, "labels": {}, "containers": [], "conditions": []}
    out = {key: pod.get(key, defaults.get(key)) for key in _POD_KEYS}
    return {**out, **{k: v for k, v in pod.items() if k not in out}}


def _pod_ready(pod: dict[str, Any]) -> bool:
    containers = pod.get("containers") or []
    return pod.get("phase", "Running") == "Running" and all(c.get("ready", True) for c in containers)


def _served_service(svc: dict[str, Any], world: dict[str, Any]) -> dict[str, Any]:
    """A Service with its endpoints: the file's, else the pods its selector picks that have a pod IP."""
    selector = dict(svc.get("selector") or {})
    if svc.get("endpoints") is not None:
        endpoints = [{"ip": e["ip"], "pod": e.get("pod"), "node": e.get("node"), "ready": e.get("ready", True)}
                     for e in svc["endpoints"]]
    elif selector:
        endpoints = [{"ip": p["podIP"], "pod": p["name"], "node": p.get("node"), "ready": _pod_ready(p)}
                     for p in world["pods"] if p.get("podIP") and _labels_match(p.get("labels") or {}, selector)]
    else:
        endpoints = []
    out = {
        "name": svc["name"], "namespace": world["namespace"], "type": svc.get("type", "ClusterIP"),
        "clusterIP": svc.get("clusterIP"),
        "ports": [{"name": p.get("name"), "port": p["port"], "targetPort": p.get("targetPort", p["port"]),
                   "protocol": p.get("protocol", "TCP")} for p in svc.get("ports", [])],
        "selector": selector, "endpoints": endpoints,
    }
    if svc.get("externalName"):
        out["externalName"] = svc["externalName"]
    return out


# --- the backend --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LogRecord:
    offset: float  # seconds before "now" (millisecond precision)
    service: str
    level: str  # the served level: the record's own, normalised, or the one read from its line
    message: str  # may hold {ts:<layout>} placeholders, rendered at query time

    def text(self, at: datetime) -> str:
        return render_timestamps(self.message, at)


@dataclass(frozen=True)
class _Series:
    labels: dict[str, str]
    step: int
    values: tuple[float | int | None, ...]  # oldest first; the last one is "now"; None: no sample

    def stored(self, now: datetime) -> StoredSeries:
        """The samples as the TSDB would hold them: the newest on the last step boundary at or before
        now, one every ``step`` seconds before it, none where the scenario has null."""
        now_unix = int((now - _EPOCH).total_seconds())
        anchor = now_unix - now_unix % self.step
        last = len(self.values) - 1
        times, values = [], []
        for i, v in enumerate(self.values):
            if v is not None:
                times.append((anchor - (last - i) * self.step) * 1000)
                values.append(float(v))
        return StoredSeries(self.labels, tuple(times), tuple(values))


@dataclass(frozen=True)
class _Alert:
    offset: int
    labels: dict[str, str]
    annotations: dict[str, str]
    state: str
    value: str


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class DemoBackend:
    """Logs, metrics and alerts of the given scenario folders, time-shifted so offset 0 is ``now``.

    With a fixed ``now`` the world is frozen and every answer is deterministic (tests, evaluation).
    Without one it follows the wall clock: each query re-anchors offset 0 to the current second,
    so a long-running demo server always shows its incidents as "just happening".
    """

    name = BACKEND_NAME

    def __init__(self, scenario_dirs: Iterable[Path | str] | None = None, now: datetime | None = None) -> None:
        if now is not None:
            if not isinstance(now, datetime):
                raise BackendError(f"expected a datetime, got {type(now).__name__}", argument="now")
            now = now.replace(tzinfo=timezone.utc) if now.tzinfo is None else now.astimezone(timezone.utc)
            now = now.replace(microsecond=0)
        self._fixed_now = now
        dirs = shipped_scenarios() if scenario_dirs is None else [Path(d) for d in scenario_dirs]
        try:
            self.scenarios: tuple[Scenario, ...] = tuple(load_scenario(d) for d in dirs)
        except ScenarioError as exc:
            raise BackendError(str(exc), argument="scenario_dirs", backend=BACKEND_NAME) from None
        self._logs: list[_LogRecord] = []
        self._series: list[_Series] = []
        self._alerts: list[_Alert] = []
        self._stored_cache: tuple[datetime, list[StoredSeries]] | None = None
        self._traces = None  # expanded on the first query_traces
        self._load()

    @property
    def now(self) -> datetime:
        """The moment offset 0 maps to: the fixed ``now`` or the current UTC second."""
        return self._fixed_now or datetime.now(timezone.utc).replace(microsecond=0)

    @property
    def follows_clock(self) -> bool:
        return self._fixed_now is None

    @classmethod
    def shipped(cls, names: Iterable[str] | None = None, now: datetime | None = None) -> DemoBackend:
        """All shipped scenarios (the default demo world), or only the named ones."""
        dirs = shipped_scenarios()
        if names is not None:
            wanted = list(names)
            unknown = sorted(set(wanted) - {d.name for d in dirs})
            if unknown:
                raise BackendError(f"unknown scenario(s) {', '.join(unknown)}", argument="names")
            dirs = [d for d in dirs if d.name in wanted]
        return cls(dirs, now=now)

    def __repr__(self) -> str:
        when = "clock" if self.follows_clock else format_timestamp(self.now)
        return f"DemoBackend({[s.name for s in self.scenarios]!r}, now={when!r})"

    def _load(self) -> None:
        seen_series: dict[str, str] = {}
        for scenario in self.scenarios:
            for record in scenario.logs:
                self._logs.append(_LogRecord(record["offset_seconds"], record["service"],
                                             _served_level(record), record["message"]))
            for raw in scenario.series:
                labels = dict(raw["labels"])
                key = format_selector(labels)
                if key in seen_series:
                    raise BackendError(
                        f"series {key} is defined by both {seen_series[key]} and {scenario.name}",
                        argument="scenario_dirs", backend=BACKEND_NAME,
                    )
                seen_series[key] = scenario.name
                self._series.append(_Series(labels, raw["step_seconds"], tuple(raw["values"])))
            for raw in scenario.alerts:
                self._alerts.append(_Alert(raw["offset_seconds"], dict(raw["labels"]), dict(raw["annotations"]),
                                           raw["state"], raw["value"]))
        self._kubernetes = [s.kubernetes for s in self.scenarios if s.kubernetes]
        # Stable sorts: records of the same second keep their file order.
        self._logs.sort(key=lambda r: r.offset)
        self._series.sort(key=lambda s: format_selector(s.labels))
        self._alerts.sort(key=lambda a: (a.offset, a.labels["alertname"], a.labels["service"]))

    # --- query_kubernetes: pods and events of kubernetes.json, times shifted like everything else ---

    def query_kubernetes(self, *, namespace: str | None = None, kind: str | None = None, name: str | None = None,
                         selector: str | None = None) -> dict[str, Any]:
        """Pods, Services and events of ``kubernetes.json``, in the shape the ``kubernetes`` backend returns."""
        from diagnosis.tools.backends.kubernetes import check_arguments

        kind = check_arguments(namespace=namespace, kind=kind, name=name, selector=selector)
        wanted_labels = _label_selector(selector)
        now = self.now
        pods, events, namespaces, services = [], [], set(), []
        for world in self._kubernetes:
            if namespace and world["namespace"] != namespace:
                continue
            namespaces.add(world["namespace"])
            chosen: list[dict[str, Any]] = []
            if kind == "service":
                for svc in world["services"]:
                    if (name and svc["name"] != name) or not _labels_match(svc.get("labels") or {}, wanted_labels):
                        continue
                    services.append(_served_service(svc, world))
                    if name and svc.get("selector"):
                        chosen += [p for p in world["pods"] if _labels_match(p.get("labels") or {}, svc["selector"])]
            else:
                for pod in world["pods"]:
                    if name and not (pod["name"] == name or (kind != "pod" and pod["name"].startswith(f"{name}-"))):
                        continue
                    if _labels_match(pod.get("labels") or {}, wanted_labels):
                        chosen.append(pod)
            pods += [self._shift(_served_pod(pod, world["namespace"]), now) for pod in chosen]
            names = {p["name"] for p in chosen}
            prefix = f"{name}-" if name and kind != "service" else None
            for event in world["events"]:
                target = event["object"].split("/", 1)[-1]
                if target in names or (name and target == name) or (prefix and target.startswith(prefix)):
                    events.append(self._shift(event, now))
        if kind == "service" and name and not services:
            raise BackendError(f"service {name!r} not found in namespace {namespace or self._namespaces()!r}",
                               argument="name", backend=BACKEND_NAME)
        events.sort(key=lambda e: e.get("lastTimestamp") or "")
        result = {"backend": BACKEND_NAME, "namespace": namespace or ",".join(sorted(namespaces)), "kind": kind,
                  "name": name, "selector": selector, "pods": pods, "events": events}
        if kind == "service":
            result["services"] = services
        return result

    def _stored(self, now: datetime) -> list[StoredSeries]:
        """Every series' samples at their times for this ``now`` (kept while ``now`` stays the same)."""
        cached = self._stored_cache  # one tuple, replaced whole: safe to share between threads
        if cached is None or cached[0] != now:
            cached = (now, [s.stored(now) for s in self._series])
            self._stored_cache = cached
        return cached[1]

    def _namespaces(self) -> str:
        return ",".join(sorted({w["namespace"] for w in self._kubernetes}))

    # --- query_traces and query_changes: traces.json and changes.json (demo_traces.py, demo_changes.py) ---

    def query_traces(self, **args: Any) -> dict[str, Any]:
        if self._traces is None:
            self._traces = DemoTraces(self.scenarios)
        return self._traces.query_traces(now=self.now, **args)

    def query_changes(self, **args: Any) -> dict[str, Any]:
        return DemoChanges(self.scenarios).query_changes(now=self.now, **args)

    @classmethod
    def _shift(cls, value: Any, now: datetime) -> Any:
        """``x_offset_seconds`` keys become ``x`` timestamps (``last_offset_seconds`` -> ``lastTimestamp``)."""
        if isinstance(value, list):
            return [cls._shift(v, now) for v in value]
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            if key.endswith("_offset_seconds") and _finite(item):
                stem = key[: -len("_offset_seconds")]
                target = {"first": "firstTimestamp", "last": "lastTimestamp", "started": "startedAt",
                          "finished": "finishedAt"}.get(stem, stem)
                out[target] = format_timestamp(now + timedelta(seconds=item))
            else:
                out[key] = cls._shift(item, now)
        return out

    # --- discovery helpers (not part of the protocols) ---

    def services(self) -> list[str]:
        """Every service that has logs, series or alerts in the loaded scenarios."""
        names = {r.service for r in self._logs} | {s.labels["service"] for s in self._series if "service" in s.labels}
        names |= {a.labels["service"] for a in self._alerts}
        return sorted(names)

    def metric_names(self, service: str | None = None) -> list[str]:
        """Metric names, optionally only those with a series for ``service``."""
        return sorted({s.labels["__name__"] for s in self._series
                       if service is None or s.labels.get("service") == service})

    # --- LogsBackend ---

    def query_logs(self, *, service: str | None = None, query: str | None = None, start: datetime | None = None,
                   end: datetime | None = None, limit: int = 50) -> dict[str, Any]:
        """Matching log records in the window, oldest-first (the newest ``limit`` when more match)."""
        if service is not None and not isinstance(service, str):
            raise BackendError(f"expected a service name, got {type(service).__name__}", argument="service")
        if service is not None:
            service = service.strip() or None
        limit_n = _parse_limit(limit)
        log_query = parse_log_query(query)
        now = self.now
        start_dt, end_dt = resolve_window(start, end, now=now)
        # Offsets of records inside the window, so no datetime is built per record.
        low, high = (start_dt - now).total_seconds(), (end_dt - now).total_seconds()

        wanted = service.lower() if service else None
        matched = []
        for r in self._logs:
            if low <= r.offset <= high and (wanted is None or r.service.lower() == wanted):
                at = now + timedelta(seconds=r.offset)
                text = r.text(at)
                if log_query.matches(r.service, r.level, text):
                    matched.append((at, r, text))
        kept = matched[-limit_n:]
        result: dict[str, Any] = {
            "backend": BACKEND_NAME,
            "service": service,
            "query": query,
            "start": format_timestamp(start_dt),
            "end": format_timestamp(end_dt),
            "total": len(matched),
            "truncated": len(matched) > len(kept),
            "records": [
                {"timestamp": format_timestamp(at), "service": r.service, "level": r.level, "message": text}
                for at, r, text in kept
            ],
        }
        if wanted is not None and not any(r.service.lower() == wanted for r in self._logs):
            result["note"] = f"no logs exist for service {service!r}; known services: {', '.join(self.services())}"
        return result

    # --- MetricsBackend ---

    def query_metrics(self, *, query: str | None = None, metric: str | None = None, service: str | None = None,
                      start: datetime | None = None, end: datetime | None = None, step: Any = None) -> dict[str, Any]:
        """``query`` evaluated as Prometheus's ``query_range`` evaluates it (see ``promql.py``): a selector
        (``metric`` and ``service`` add matchers to it), or an expression of the supported subset
        (``service`` then adds a matcher to every selector in it). Each series comes with stats and a
        one-line description."""
        expression = None
        matchers: list[tuple[str, str, str]] = []
        if query is not None and str(query).strip():
            expression = parse_expression(str(query).strip())
            if isinstance(expression, promql_parser.VectorSelector):
                matchers.extend(label_matchers(expression))
                expression = None
        if metric is not None and str(metric).strip():
            metric = str(metric).strip()
            if _METRIC_NAME_RE.fullmatch(metric) is None:
                raise BackendError(f"not a metric name: {metric!r}", argument="metric")
            if expression is not None:
                raise BackendError("give a metric name or a PromQL expression, not both", argument="metric")
            matchers.append(("__name__", "=", metric))
        if service is not None and not isinstance(service, str):
            raise BackendError(f"expected a service name, got {type(service).__name__}", argument="service")
        if service is not None and service.strip():
            matchers.append(("service", "=", service.strip()))
        if expression is None and not matchers:
            raise BackendError("give a query, a metric name or a service", argument="query")
        matchers = list(dict.fromkeys(matchers))  # the same matcher given twice counts once
        now = self.now
        start_dt, end_dt = resolve_window(start, end, now=now)
        start_ms, end_ms = _unix_ms(start_dt), _unix_ms(end_dt)
        step_s = range_query_step(step, (end_ms - start_ms) / 1000)
        stored = self._stored(now)
        if expression is None:
            selector = _canonical_query(matchers)
            results = evaluate_range(selector, stored, start_ms=start_ms, end_ms=end_ms, step_ms=round(step_s * 1000))
            if service is not None and service.strip():
                # A service's series, and its pods' (as ``{service="x"} or {pod=~"x-..."}`` selects them).
                pods = [m for m in matchers if m[0] != "service"] + [("pod", "=~", workload_pods_regex(service.strip()))]
                pod_selector = _canonical_query(pods)
                seen = {tuple(sorted(labels.items())) for labels, _ in results}
                results += [r for r in evaluate_range(pod_selector, stored, start_ms=start_ms, end_ms=end_ms,
                                                      step_ms=round(step_s * 1000))
                            if tuple(sorted(r[0].items())) not in seen]
                selector = f"{selector} or {pod_selector}"
        else:
            selector = str(query).strip()
            results = evaluate_range(expression, stored, start_ms=start_ms, end_ms=end_ms,
                                     step_ms=round(step_s * 1000), extra_matchers=matchers)
        # A series without a value in the window is not returned.
        series_out = [metric_series(labels, [[_seconds(t), format_value(v)] for t, v in points])
                      for labels, points in results]
        return metrics_result(backend=BACKEND_NAME, query=selector, start=start_dt, end=end_dt,
                              step=_seconds(round(step_s * 1000)), series=series_out)

    # --- AlertsBackend ---

    def query_alerts(self) -> dict[str, Any]:
        """Active (pending or firing) alerts, oldest activeAt first."""
        now = self.now
        return {
            "backend": BACKEND_NAME,
            "alerts": [
                {
                    "labels": dict(alert.labels),
                    "annotations": dict(alert.annotations),
                    "state": alert.state,
                    "activeAt": format_timestamp(now + timedelta(seconds=alert.offset)),
                    "value": alert.value,
                }
                for alert in self._alerts
            ],
        }


def _unix_ms(value: datetime) -> int:
    """Milliseconds, rounded as Prometheus rounds a query's start and end."""
    return round((value - _EPOCH) / timedelta(milliseconds=1))


def _seconds(millis: int) -> int | float:
    """Milliseconds -> unix seconds as Prometheus writes them (an int when whole)."""
    return millis // 1000 if millis % 1000 == 0 else millis / 1000


def _canonical_query(matchers: list[tuple[str, str, str]]) -> str:
    """The effective selector, e.g. ``db_pool_active_connections{service="payment-service"}``."""
    name = next((v for label, op, v in matchers if label == "__name__" and op == "="), "")
    rest = list(matchers)
    if name:
        rest.remove(("__name__", "=", name))
    inner = ",".join(
        f'{label}{op}"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for label, op, v in rest
    )
    return f"{name}{{{inner}}}" if inner or not name else name
