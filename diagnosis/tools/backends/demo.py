# size: the demo backend serves every telemetry tool from scenario data, each answer shaped like the real one.
"""The embedded telemetry backend: shipped incident scenarios served as logs, metrics and alerts.

Scenario times are relative (``offset_seconds``); at load they are shifted so that offset 0 is
"now". Results follow docs/ARCHITECTURE.md exactly (plus a few documented extra fields).

Logs: records are returned oldest-first; when more than ``limit`` match, the newest ``limit`` are
kept (``total`` counts every match, ``truncated`` says some were dropped). ``query`` is a small
line filter, case-insensitive, matched as substrings against ``"<service> <level> <message>"``:
whitespace-separated words must all match (AND), ``"quoted phrases"`` match as one term, ``OR``
(or ``|``) separates alternatives, and ``level:ERROR`` / ``level:WARN,ERROR`` filter by level.

Metrics: ``query`` is a metric name or a selector ``name{label="v", other!="w", x=~"re"}``;
``metric`` and ``service`` add matchers. A larger ``step`` than the stored resolution keeps every
k-th sample counted back from the newest. ``stats`` and ``description`` come from ``base.py``.
Unlike the Prometheus backend, ``service`` is also applied when a ``query`` is given.

Extra fields beyond the documented shapes: logs ``truncated`` (and ``note`` for an unknown
service), metric stats ``min_at``. Stdlib only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable

from diagnosis.demo.loader import Scenario, ScenarioError, load_scenario, shipped_scenarios
from diagnosis.tools.backends.base import (
    BackendError,
    describe_series,
    format_selector,
    format_timestamp,
    parse_step,
    resolve_window,
    series_stats,
)
from diagnosis.tools.backends.demo_changes import DemoChanges
from diagnosis.tools.backends.demo_traces import DemoTraces

__all__ = ["DemoBackend", "LogQuery", "parse_log_query", "parse_selector", "MAX_LOG_LIMIT"]

BACKEND_NAME = "demo"
MAX_LOG_LIMIT = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LEVEL_ALIASES = {"WARNING": "WARN", "ERR": "ERROR", "CRITICAL": "FATAL", "CRIT": "FATAL", "INFORMATION": "INFO"}
_QUERY_TOKEN_RE = re.compile(r'"([^"]*)"|(\S+)')
_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_SELECTOR_RE = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(?:\{(.*)\})?\s*$", re.S)
_MATCHER_RE = re.compile(
    r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*(,|$)""",
    re.S,
)


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
    upper = value.strip().upper()
    return _LEVEL_ALIASES.get(upper, upper)


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


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), value)


def parse_selector(query: str) -> list[tuple[str, str, str]]:
    """``name{a="1", b!~"x.*"}`` -> ``[("__name__", "=", "name"), ("a", "=", "1"), ("b", "!~", "x.*")]``."""
    if not isinstance(query, str):
        raise BackendError(f"expected text, got {type(query).__name__}", argument="query")
    match = _SELECTOR_RE.match(query)
    if match is None:
        raise BackendError(
            f"only metric selectors such as http_error_ratio{{service=\"x\"}} are supported by the demo "
            f"backend (no functions, ranges or operators), got {query!r}",
            argument="query",
        )
    name, body = match.group(1), match.group(2)
    matchers: list[tuple[str, str, str]] = [("__name__", "=", name)] if name else []
    if body is not None and body.strip():
        pos = 0
        while pos < len(body):
            m = _MATCHER_RE.match(body, pos)
            if m is None:
                raise BackendError(
                    f"cannot parse label matchers in {query!r}; use label=\"value\" pairs separated by commas",
                    argument="query",
                )
            raw = m.group(3) if m.group(3) is not None else m.group(4)
            label, op, value = m.group(1), m.group(2), _unescape(raw)
            if op in ("=~", "!~"):
                try:
                    re.compile(value)
                except re.error as exc:
                    raise BackendError(f"invalid regular expression {value!r} ({exc})", argument="query") from None
            matchers.append((label, op, value))
            pos = m.end()
            if m.group(5) == "" and pos < len(body):
                raise BackendError(f"cannot parse label matchers in {query!r}", argument="query")
    if not matchers:
        raise BackendError("a selector needs a metric name or at least one label matcher", argument="query")
    return matchers


def _matches(labels: dict[str, str], matchers: Iterable[tuple[str, str, str]]) -> bool:
    for label, op, value in matchers:
        actual = labels.get(label, "")
        if op == "=" and actual != value:
            return False
        if op == "!=" and actual == value:
            return False
        if op == "=~" and re.fullmatch(value, actual) is None:
            return False
        if op == "!~" and re.fullmatch(value, actual) is not None:
            return False
    return True


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


def _value_text(value: float | int) -> str:
    # Prometheus sends sample values as strings; integral values print without ".0".
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


# --- the backend --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LogRecord:
    offset: int  # seconds before "now"
    service: str
    level: str
    message: str


@dataclass(frozen=True)
class _Series:
    labels: dict[str, str]
    step: int
    values: tuple[float | int, ...]  # oldest first; the last one is "now"

    def points(self, now: datetime) -> list[tuple[int, float | int]]:
        """(unix seconds, value) pairs; the newest sits on the last step boundary at or before now."""
        now_unix = int((now - _EPOCH).total_seconds())
        anchor = now_unix - now_unix % self.step
        last = len(self.values) - 1
        return [(anchor - (last - i) * self.step, v) for i, v in enumerate(self.values)]


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
                self._logs.append(_LogRecord(record["offset_seconds"], record["service"], record["level"],
                                             record["message"]))
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
        from diagnosis.tools.backends.kubernetes import check_arguments

        kind = check_arguments(namespace=namespace, kind=kind, name=name, selector=selector)
        wanted_labels = dict(part.split("=", 1) for part in (selector or "").split(",") if "=" in part)
        now = self.now
        pods, events, namespaces = [], [], set()
        for world in self._kubernetes:
            if namespace and world["namespace"] != namespace:
                continue
            namespaces.add(world["namespace"])
            for pod in world["pods"]:
                labels = pod.get("labels") or {}
                if name and not (pod["name"] == name or (kind != "pod" and pod["name"].startswith(f"{name}-"))):
                    continue
                if wanted_labels and any(labels.get(k.strip()) != v.strip() for k, v in wanted_labels.items()):
                    continue
                pods.append(self._shift(pod, now))
            names = {p["name"] for p in pods}
            for event in world["events"]:
                target = event["object"].split("/", 1)[-1]
                if target in names or (name and (target == name or target.startswith(f"{name}-"))):
                    events.append(self._shift(event, now))
        events.sort(key=lambda e: e.get("lastTimestamp") or "")
        return {"backend": BACKEND_NAME, "namespace": namespace or ",".join(sorted(namespaces)), "kind": kind,
                "name": name, "selector": selector, "pods": pods, "events": events}

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
        names = {r.service for r in self._logs} | {s.labels["service"] for s in self._series}
        names |= {a.labels["service"] for a in self._alerts}
        return sorted(names)

    def metric_names(self, service: str | None = None) -> list[str]:
        """Metric names, optionally only those with a series for ``service``."""
        return sorted({s.labels["__name__"] for s in self._series
                       if service is None or s.labels.get("service") == service})

    # --- LogsBackend ---

    def query_logs(
        self,
        *,
        service: str | None = None,
        query: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
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
        matched = [
            r for r in self._logs
            if low <= r.offset <= high
            and (wanted is None or r.service.lower() == wanted)
            and log_query.matches(r.service, r.level, r.message)
        ]
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
                {"timestamp": format_timestamp(now + timedelta(seconds=r.offset)), "service": r.service,
                 "level": r.level, "message": r.message}
                for r in kept
            ],
        }
        if wanted is not None and not any(r.service.lower() == wanted for r in self._logs):
            result["note"] = f"no logs exist for service {service!r}; known services: {', '.join(self.services())}"
        return result

    # --- MetricsBackend ---

    def query_metrics(
        self,
        *,
        query: str | None = None,
        metric: str | None = None,
        service: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        step: Any = None,
    ) -> dict[str, Any]:
        """Series matching the selector, with samples in the window, stats and a one-line description."""
        matchers: list[tuple[str, str, str]] = []
        if query is not None and str(query).strip():
            matchers.extend(parse_selector(str(query)))
        if metric is not None and str(metric).strip():
            metric = str(metric).strip()
            if _METRIC_NAME_RE.fullmatch(metric) is None:
                raise BackendError(f"not a metric name: {metric!r}", argument="metric")
            matchers.append(("__name__", "=", metric))
        if service is not None and not isinstance(service, str):
            raise BackendError(f"expected a service name, got {type(service).__name__}", argument="service")
        if service is not None and service.strip():
            matchers.append(("service", "=", service.strip()))
        if not matchers:
            raise BackendError("give a query, a metric name or a service", argument="query")
        matchers = list(dict.fromkeys(matchers))  # the same matcher given twice counts once
        step_s = parse_step(step)
        now = self.now
        start_dt, end_dt = resolve_window(start, end, now=now)
        start_u = (start_dt - _EPOCH).total_seconds()
        end_u = (end_dt - _EPOCH).total_seconds()

        series_out = []
        for series in self._series:
            if not _matches(series.labels, matchers):
                continue
            stride = max(1, round(step_s / series.step)) if step_s else 1
            all_points = series.points(now)
            newest = all_points[-1][0]
            points = [
                (t, v) for t, v in all_points
                if start_u <= t <= end_u and ((newest - t) // series.step) % stride == 0
            ]
            if not points:
                continue  # like Prometheus, a series without samples in the window is not returned
            values = [[t, _value_text(v)] for t, v in points]
            stats = series_stats(values)
            series_out.append({
                "labels": dict(series.labels),
                "values": values,
                "stats": stats,
                "description": describe_series(series.labels, stats),
            })
        effective_step = int(step_s) if step_s else (self._series[0].step if self._series else 60)
        return {
            "backend": BACKEND_NAME,
            "query": _canonical_query(matchers),
            "start": format_timestamp(start_dt),
            "end": format_timestamp(end_dt),
            "step": effective_step,
            "series": series_out,
        }

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
