"""The contract every telemetry backend implements: protocols, BackendError and shared helpers.

Result shapes are the ones in docs/ARCHITECTURE.md ("Tool results"). Stdlib only.
"""

from __future__ import annotations

import math
import re
import statistics
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

__all__ = [
    "BackendError",
    "LogsBackend",
    "MetricsBackend",
    "AlertsBackend",
    "TelemetryBackend",
    "DEFAULT_WINDOW",
    "format_timestamp",
    "parse_time",
    "resolve_window",
    "parse_step",
    "range_query_step",
    "format_number",
    "format_selector",
    "go_string_literal",
    "series_stats",
    "describe_series",
    "metric_series",
    "metrics_result",
    "SERVED_LEVELS",
    "normalise_level",
    "detect_level",
    "workload_pods_regex",
    "workload_claims_regex",
    "workload_selectors",
]

DEFAULT_WINDOW = timedelta(minutes=60)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+$")
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class BackendError(Exception):
    """A backend that is down, answered with an error, or was called with an invalid argument.

    ``argument`` names the offending argument when the caller got one wrong; the message
    always starts with it then (``"limit: must be between 1 and 1000, got 0"``), so the
    recorded ERROR invocation tells the model what to fix.
    """

    def __init__(self, message: str, *, argument: str | None = None, backend: str | None = None) -> None:
        if argument and not message.startswith(f"{argument}:"):
            message = f"{argument}: {message}"
        super().__init__(message)
        self.message = message
        self.argument = argument
        self.backend = backend


@runtime_checkable
class LogsBackend(Protocol):
    """Log lines of a service; ``start``/``end`` default to the last 60 minutes."""

    def query_logs(self, *, service: str | None = None, query: str | None = None, start: datetime | None = None,
                   end: datetime | None = None, limit: int = 50) -> dict[str, Any]:
        """``{"backend", "service", "query", "start", "end", "total", "records": [...]}``."""
        ...


@runtime_checkable
class MetricsBackend(Protocol):
    """Metric series, by a PromQL-style query or a metric name plus a service."""

    def query_metrics(self, *, query: str | None = None, metric: str | None = None, service: str | None = None,
                      start: datetime | None = None, end: datetime | None = None, step: Any = None) -> dict[str, Any]:
        """``{"backend", "query", "start", "end", "step", "series": [...]}``."""
        ...


@runtime_checkable
class AlertsBackend(Protocol):
    """The currently active (pending or firing) alerts."""

    def query_alerts(self) -> dict[str, Any]:
        """``{"backend", "alerts": [{"labels", "annotations", "state", "activeAt", "value"}]}``."""
        ...


@runtime_checkable
class TelemetryBackend(LogsBackend, MetricsBackend, AlertsBackend, Protocol):
    """A backend that serves logs, metrics and alerts (the demo backend does)."""


# --- time ---------------------------------------------------------------------------------------


def format_timestamp(value: datetime | float | int) -> str:
    """A datetime or unix seconds -> ``2026-11-29T10:02:03Z`` (fraction only when non-zero)."""
    if isinstance(value, datetime):
        value = (_as_utc(value) - _EPOCH) / timedelta(seconds=1)
    millis = int(round(float(value) * 1000))
    whole, frac = divmod(millis, 1000)
    text = (_EPOCH + timedelta(seconds=whole)).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += f".{frac:03d}"
    return text + "Z"


def _as_utc(value: datetime) -> datetime:
    # A naive datetime is read as UTC: every timestamp in this system is UTC.
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def parse_time(value: Any, *, argument: str) -> datetime | None:
    """``None``, an aware/naive datetime, unix seconds or an ISO-8601 string -> aware UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return _as_utc(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise BackendError(f"not a finite unix timestamp: {value!r}", argument=argument)
        return _EPOCH + timedelta(seconds=float(value))
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            return _as_utc(datetime.fromisoformat(text))
        except ValueError:
            pass
    raise BackendError(
        f"expected an ISO-8601 UTC time such as 2026-11-29T10:02:03Z, got {value!r}", argument=argument
    )


def resolve_window(start: Any, end: Any, *, now: datetime) -> tuple[datetime, datetime]:
    """The query window: ``end`` defaults to now, ``start`` to 60 minutes before ``end``."""
    end_dt = parse_time(end, argument="end") or now
    start_dt = parse_time(start, argument="start") or end_dt - DEFAULT_WINDOW
    if end_dt < start_dt:
        raise BackendError(
            f"end {format_timestamp(end_dt)} is before start {format_timestamp(start_dt)}", argument="end"
        )
    return start_dt, end_dt


def parse_step(step: Any, *, maximum: float = 86400) -> float | None:
    """``None`` or seconds (number, "60", "30s", "5m", "1h30m") -> positive seconds."""
    if step is None or step == "":
        return None
    if isinstance(step, timedelta):
        seconds = step.total_seconds()
    elif isinstance(step, (int, float)) and not isinstance(step, bool):
        seconds = float(step)
    elif isinstance(step, str):
        text = step.strip()
        try:
            seconds = float(text)
        except ValueError:
            if not _DURATION_RE.match(text):
                raise BackendError(f"use seconds or a duration like 30s or 5m, got {step!r}", argument="step")
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART_RE.findall(text))
    else:
        raise BackendError(f"use seconds or a duration like 30s or 5m, got {step!r}", argument="step")
    if not math.isfinite(seconds) or seconds <= 0 or seconds > maximum:
        raise BackendError(f"must be a positive duration of at most {maximum:g}s, got {step!r}", argument="step")
    return seconds


# --- log levels: one table for every logs backend ---------------------------------------------------

# What a level label or word of a real format means; the served level is one of SERVED_LEVELS.
_LEVEL_ALIASES = {
    "trace": "TRACE",
    "debug": "DEBUG", "dbug": "DEBUG",
    "info": "INFO", "information": "INFO", "informational": "INFO", "notice": "INFO",
    "warn": "WARN", "warning": "WARN",
    "error": "ERROR", "err": "ERROR", "eror": "ERROR",
    "fatal": "FATAL", "critical": "CRITICAL", "crit": "CRITICAL",
    "panic": "PANIC", "emerg": "FATAL", "emergency": "FATAL", "alert": "CRITICAL",
    "note": "INFO", "system": "INFO",  # MySQL 8 error log: [System] [Note] [Warning] [ERROR]
}
SERVED_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "CRITICAL", "FATAL", "PANIC", "UNKNOWN")
_LEVEL_KV_RE = re.compile(
    r"""(?ix)
    (?:^|[\s{,])"?(?:level|lvl|severity|loglevel|log_level)"?\s*[=:]\s*"?([a-z]+)"?
    """
)
_LEVEL_WORD_RE = re.compile(
    r"(?<![A-Za-z0-9_])(TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|CRIT|PANIC)(?![A-Za-z0-9_])"
)
# A level in square brackets, any case: nginx "[error]", MySQL "[Note]", gunicorn "[INFO]", and the like.
_LEVEL_BRACKET_RE = re.compile(
    r"\[(trace|debug|info|notice|note|system|warn|warning|error|err|crit|critical|alert|emerg|fatal|panic)\]", re.I)
# glog/klog: "E1129 10:02:03.042000    1 main.go:42] ..." (Kubernetes components, Go services using klog).
_GLOG_RE = re.compile(r"^([IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d{6}\b")
_GLOG_LEVELS = {"I": "INFO", "W": "WARN", "E": "ERROR", "F": "FATAL"}


def normalise_level(raw: Any) -> str | None:
    """A level name as written by a real format (``warning``, ``NOTICE``, ``crit``) -> a served level, or None."""
    if not isinstance(raw, str):
        return None
    return _LEVEL_ALIASES.get(raw.strip().lower())


def detect_level(labels: Mapping[str, str], line: str) -> str:
    """Level from a stream label (``level``, ``detected_level``, ``severity``, ``lvl``), else from the line
    (a glog/klog prefix, a ``level=``/``"level":`` field, a bracketed level such as nginx's ``[error]`` or
    MySQL's ``[Note]``, an upper-case level word; the last two in the first 200 characters), else ``UNKNOWN``."""
    for key in ("level", "detected_level", "severity", "lvl"):
        level = normalise_level(labels.get(key))
        if level:
            return level
    match = _GLOG_RE.match(line)
    if match:
        return _GLOG_LEVELS[match.group(1)]
    match = _LEVEL_KV_RE.search(line)
    if match and normalise_level(match.group(1)):
        return normalise_level(match.group(1))  # type: ignore[return-value]
    match = _LEVEL_BRACKET_RE.search(line[:200])
    if match:
        return normalise_level(match.group(1)) or "UNKNOWN"
    match = _LEVEL_WORD_RE.search(line[:200])
    if match:
        return normalise_level(match.group(1)) or "UNKNOWN"
    return "UNKNOWN"


# --- range queries ---------------------------------------------------------------------------------

RANGE_DEFAULT_STEP_SECONDS = 60.0
RANGE_MAX_POINTS = 1000


def range_query_step(step: Any, span_seconds: float) -> float:
    """The resolution of a range query: ``step`` (default 60 s), widened so the window holds at most
    ``RANGE_MAX_POINTS`` points (Prometheus refuses more than 11,000)."""
    step_s = parse_step(step) or RANGE_DEFAULT_STEP_SECONDS
    if span_seconds > 0 and span_seconds / step_s + 1 > RANGE_MAX_POINTS:
        step_s = float(math.ceil(span_seconds / (RANGE_MAX_POINTS - 1)))
    return step_s


# --- series statistics and the one-line description citations quote ------------------------------


def _number(value: float) -> int | float:
    # Integral floats become ints so JSON shows 50 rather than 50.0.
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return int(value)
    return value


def format_number(value: Any) -> str:
    """Deterministic text for a number in a description: ``50``, ``0.4123``, ``2.14748e+09``."""
    if value is None:
        return "n/a"
    value = float(value)
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".6g")


def _quote(value: str) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def go_string_literal(value: str) -> str:
    """``value`` as a Go double-quoted string literal, the quoting PromQL and LogQL share."""
    out = []
    for ch in str(value):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_POD_HASH = "[bcdfghjklmnpqrstvwxz2456789]"


def _regex_literal(text: str) -> str:
    """``text`` as an RE2 pattern that matches only itself."""
    return re.sub(r"([.\\+*?()|\[\]{}^$])", r"\\\1", text)


def workload_pods_regex(service: str) -> str:
    """The names of a workload's pods as an RE2 pattern (PromQL anchors it): Deployment pods
    ``<name>-<template hash>-<5>``, DaemonSet pods ``<name>-<5>``, StatefulSet pods ``<name>-<ordinal>``.
    cAdvisor and kube-state-metrics label a container's series by pod, never by service: a query about a
    service matches its pods' series this way too."""
    name = _regex_literal(service)
    return f"{name}-(?:{_POD_HASH}{{6,10}}-)?{_POD_HASH}{{5}}|{name}-[0-9]+"


def workload_claims_regex(service: str) -> str:
    """The names of a StatefulSet's PersistentVolumeClaims as an RE2 pattern (PromQL anchors it):
    ``<volumeClaimTemplate>-<name>-<ordinal>``, e.g. ``data-orders-db-0``. The kubelet labels a volume's
    series by ``namespace`` and ``persistentvolumeclaim`` only. Anchored at the end, the pattern cannot
    take another StatefulSet's claim whose name only begins with this one (``data-orders-db-archive-0``);
    it does take the claims of a StatefulSet whose name ends in ``-<name>`` (``orders-db`` for ``db``), as a
    template name may itself hold dashes and the claim name alone cannot tell them apart."""
    return f"[a-z0-9-]+-{_regex_literal(service)}-[0-9]+"


def workload_selectors(service: str) -> tuple[tuple[str, str], ...]:
    """Besides ``<service label>="<service>"``, the ``(label, RE2 pattern)`` matchers that select a service's
    series, each an alternative: its pods' (``pod``) and its volumes' (``persistentvolumeclaim``). Both
    metrics backends select a service as ``{service="x"} or {pod=~"…"} or {persistentvolumeclaim=~"…"}``."""
    return ("pod", workload_pods_regex(service)), ("persistentvolumeclaim", workload_claims_regex(service))


def format_selector(labels: Mapping[str, str]) -> str:
    """``name{a="1",b="2"}`` with label names sorted, as Prometheus prints a series."""
    name = labels.get("__name__", "")
    inner = ",".join(f"{k}={_quote(v)}" for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inner}}}" if inner or not name else name


def series_stats(values: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """min/max/mean/last/max_at/baseline (+ min_at) over ``[[unix_seconds, "value"], ...]``.

    ``baseline`` is the median of the first third of the samples (at least one); ``max_at`` and
    ``min_at`` are the first time the extreme is reached. NaN/Inf samples are ignored.
    """
    points: list[tuple[float, float]] = []
    for t, raw in values:
        try:
            v = float(raw)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            points.append((float(t), v))
    if not points:
        return {"min": None, "max": None, "mean": None, "last": None, "max_at": None,
                "baseline": None, "min_at": None}
    nums = [v for _, v in points]
    max_value, min_value = max(nums), min(nums)
    head = nums[: max(1, len(nums) // 3)]
    return {
        "min": _number(min_value),
        "max": _number(max_value),
        "mean": _number(round(math.fsum(nums) / len(nums), 6)),
        "last": _number(nums[-1]),
        "max_at": format_timestamp(next(t for t, v in points if v == max_value)),
        "baseline": _number(float(statistics.median(head))),
        "min_at": format_timestamp(next(t for t, v in points if v == min_value)),
    }


def describe_series(labels: Mapping[str, str], stats: Mapping[str, Any]) -> str:
    """One deterministic line: ``name{l="v",...} max M at T, baseline B, last L``."""
    head = format_selector(labels)
    if stats.get("max") is None:
        return f"{head} no finite samples"
    return (
        f"{head} max {format_number(stats['max'])} at {stats['max_at']}, "
        f"baseline {format_number(stats['baseline'])}, last {format_number(stats['last'])}"
    )


def metric_series(labels: dict[str, str], values: list[list[Any]]) -> dict[str, Any]:
    """One series of a metrics result: its samples with their stats and one-line description."""
    stats = series_stats(values)
    return {"labels": labels, "values": values, "stats": stats, "description": describe_series(labels, stats)}


def metrics_result(*, backend: str, query: str, start: datetime, end: datetime, step: Any,
                   series: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``query_metrics`` result, its series in label order so the same data reads the same."""
    return {
        "backend": backend,
        "query": query,
        "start": format_timestamp(start),
        "end": format_timestamp(end),
        "step": step,
        "series": sorted(series, key=lambda s: sorted(s["labels"].items())),
    }
