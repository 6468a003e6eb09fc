"""The embedded telemetry backend: scenario folders served as logs, metrics, alerts, Kubernetes state,
traces and changes.

Scenario times are relative (``offset_seconds``); at load they are shifted so that offset 0 is
"now". Results follow docs/ARCHITECTURE.md exactly (plus a few documented extra fields); the
scenario format is in diagnosis/demo/README.md.

Logs: records are returned oldest-first; when more than ``limit`` match, the newest ``limit`` are
kept (``total`` counts every match, ``truncated`` says some were dropped). ``{ts:<layout>}``
placeholders in a line are rendered from the record's served time; the served ``level`` is the
record's own, normalised, or read from the line as the Loki backend reads it (``base.detect_level``).
``query`` is a small line filter (``demo_queries.py``).

Metrics: samples are held as Prometheus holds them (counters, histogram buckets, gaps) and ``query``
is evaluated as Prometheus's ``query_range`` evaluates it (``promql.py``: a selector, or rate/irate/
increase, sum/avg/min/max/count by/without and histogram_quantile). ``metric`` and ``service`` add
matchers to a selector; unlike the Prometheus backend, ``service`` also applies to every selector of
an expression. ``stats`` and ``description`` come from ``base.py``.

Kubernetes state is served by ``demo_kubernetes.py``, traces by ``demo_traces.py`` and changes by
``demo_changes.py``.

Extra fields beyond the documented shapes: logs ``truncated`` (and ``note`` for an unknown
service), metric stats ``min_at``.
"""

from __future__ import annotations

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
    format_selector,
    format_timestamp,
    metric_series,
    metrics_result,
    range_query_step,
    resolve_window,
    workload_selectors,
)
from diagnosis.tools.backends.demo_changes import DemoChanges
from diagnosis.tools.backends.demo_kubernetes import DemoKubernetes
from diagnosis.tools.backends.demo_queries import (
    MAX_LOG_LIMIT,
    LogQuery,
    canonical_query,
    parse_limit,
    parse_log_query,
    parse_selector,
    served_level,
)
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
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


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
                                             served_level(record), record["message"]))
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
        self._kubernetes = DemoKubernetes(s.kubernetes for s in self.scenarios if s.kubernetes)
        # Stable sorts: records of the same second keep their file order.
        self._logs.sort(key=lambda r: r.offset)
        self._series.sort(key=lambda s: format_selector(s.labels))
        self._alerts.sort(key=lambda a: (a.offset, a.labels["alertname"], a.labels["service"]))

    def _stored(self, now: datetime) -> list[StoredSeries]:
        """Every series' samples at their times for this ``now`` (kept while ``now`` stays the same)."""
        cached = self._stored_cache  # one tuple, replaced whole: safe to share between threads
        if cached is None or cached[0] != now:
            cached = (now, [s.stored(now) for s in self._series])
            self._stored_cache = cached
        return cached[1]

    # --- query_kubernetes, query_traces and query_changes (demo_kubernetes.py, demo_traces.py, demo_changes.py) ---

    def query_kubernetes(self, **args: Any) -> dict[str, Any]:
        """Pods, Services and events of ``kubernetes.json``, in the shape the ``kubernetes`` backend returns."""
        return self._kubernetes.query_kubernetes(now=self.now, **args)

    def query_traces(self, **args: Any) -> dict[str, Any]:
        if self._traces is None:
            self._traces = DemoTraces(self.scenarios)
        return self._traces.query_traces(now=self.now, **args)

    def query_changes(self, **args: Any) -> dict[str, Any]:
        return DemoChanges(self.scenarios).query_changes(now=self.now, **args)

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
        limit_n = parse_limit(limit)
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
            selector = canonical_query(matchers)
            results = evaluate_range(selector, stored, start_ms=start_ms, end_ms=end_ms, step_ms=round(step_s * 1000))
            if service is not None and service.strip():
                # A service's series, its pods' and its volumes', as ``{service="x"} or {pod=~"…"} or
                # {persistentvolumeclaim=~"…"}`` selects them (``base.workload_selectors``).
                others = [m for m in matchers if m[0] != "service"]
                seen = {tuple(sorted(labels.items())) for labels, _ in results}
                for label, regex in workload_selectors(service.strip()):
                    alternative = canonical_query(others + [(label, "=~", regex)])
                    for labels, points in evaluate_range(alternative, stored, start_ms=start_ms, end_ms=end_ms,
                                                         step_ms=round(step_s * 1000)):
                        if tuple(sorted(labels.items())) not in seen:
                            seen.add(tuple(sorted(labels.items())))
                            results.append((labels, points))
                    selector = f"{selector} or {alternative}"
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
