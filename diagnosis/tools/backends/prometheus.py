"""Prometheus HTTP API backend (target: Prometheus 2.42).

Implements ``MetricsBackend.query_metrics`` and ``AlertsBackend.query_alerts`` from
``base.py`` against ``/api/v1/query_range``, ``/api/v1/query`` and ``/api/v1/alerts``.
Results follow the tool result shapes in docs/ARCHITECTURE.md. Any failure (unreachable
server, timeout, ``status: "error"``, non-JSON body, unexpected shape) raises
``BackendError``; an error is never turned into an empty success.

Imports only stdlib + httpx.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

import httpx

from diagnosis.tools.backends.base import (
    BackendError,
    format_timestamp,
    go_string_literal,
    metric_series,
    metrics_result,
    parse_time,
    range_query_step,
    resolve_window,
    workload_selectors,
)
from diagnosis.tools.backends.http_json import JsonHttpClient

__all__ = ["PrometheusBackend", "promql_selector", "promql_string"]

BACKEND_NAME = "prometheus"
_BODY_SNIPPET = 300

_METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


# --------------------------------------------------------------------------- helpers


def _error(message: str, *, argument: str | None = None) -> BackendError:
    return BackendError(message, argument=argument, backend=BACKEND_NAME)


def promql_string(value: str) -> str:
    """Quote ``value`` as a PromQL double-quoted string literal."""
    return go_string_literal(value)


def promql_selector(metric: str, labels: Mapping[str, str] | None = None) -> str:
    """Build ``metric{label="value",...}`` with escaped label values.

    Raises ``BackendError`` for a metric or label name that is not a valid identifier.
    """
    metric = (metric or "").strip()
    if not _METRIC_NAME_RE.match(metric):
        raise _error(f"not a valid metric name: {metric!r} (expected [a-zA-Z_:][a-zA-Z0-9_:]*)", argument="metric")
    matchers = []
    for name, value in (labels or {}).items():
        if not re.match(r"^[a-zA-Z_][a-zA-Z0-9_]*$", name or ""):
            raise _error(f"not a valid label name: {name!r}")
        matchers.append(f"{name}={promql_string(value)}")
    return metric + ("{" + ",".join(matchers) + "}" if matchers else "")


def _unix(value: datetime) -> float:
    return (value - _EPOCH) / timedelta(seconds=1)


def _fmt_unix(seconds: float) -> str:
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return text or "0"


def _normalize_iso(text: Any) -> Any:
    """RFC3339 with any offset / nanoseconds -> ISO UTC ``...Z``; other input unchanged."""
    if not isinstance(text, str) or not text:
        return text
    m = re.match(r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?$", text)
    if not m:
        return text
    base, frac, tz = m.groups()
    frac = (frac or "")[:7]  # "." + up to 6 digits
    tz = "+00:00" if tz in (None, "Z") else tz
    try:
        dt = datetime.fromisoformat(base.replace(" ", "T") + frac + tz)
    except ValueError:
        return text
    return format_timestamp(dt)


def _number(value: float) -> int | float:
    """Integral floats become ints (so JSON shows ``50`` rather than ``50.0``)."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return int(value)
    return value


def _timestamp(raw: Any) -> int | float:
    try:
        return _number(float(raw))
    except (TypeError, ValueError):
        raise _error(f"prometheus returned an invalid sample timestamp {raw!r}") from None


# --------------------------------------------------------------------------- backend


class PrometheusBackend:
    """Metrics and alerts from a Prometheus server's HTTP API."""

    name = BACKEND_NAME

    def __init__(
        self,
        base_url: str,
        timeout_seconds: float = 5,
        service_label: str = "service",
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.service_label = service_label or "service"
        self.http = JsonHttpClient(base_url, backend=BACKEND_NAME, timeout_seconds=timeout_seconds, transport=transport)

    def __repr__(self) -> str:
        return f"PrometheusBackend({self.http.display!r})"

    # ---------------------------------------------------------------- HTTP

    def _get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """GET ``path`` and return ``data`` of a ``status: success`` envelope."""
        reply = self.http.get(path, params)
        status = reply.status
        if 300 <= status < 400:
            raise _error(
                f"prometheus at {self.http.display} answered HTTP {status} redirect "
                f"(redirects are not followed)"
            )
        if not reply.is_json:
            snippet = reply.text[:_BODY_SNIPPET].strip()
            raise _error(
                f"prometheus at {self.http.display} returned a non-JSON response "
                f"(HTTP {status}): {snippet}"
            )
        payload = reply.body
        if not isinstance(payload, dict):
            raise _error(f"prometheus at {self.http.display} returned unexpected JSON (HTTP {status})")
        if payload.get("status") == "error":
            raise _error(
                f"prometheus query failed (HTTP {status}, {payload.get('errorType') or 'unknown'}): "
                f"{payload.get('error') or 'no error message'}"
            )
        if payload.get("status") != "success" or status >= 400:
            snippet = reply.text[:_BODY_SNIPPET].strip()
            raise _error(
                f"prometheus at {self.http.display} answered HTTP {status} without success: {snippet}"
            )
        return payload.get("data")

    # ---------------------------------------------------------------- metrics

    def build_query(self, *, query: str | None = None, metric: str | None = None,
                    service: str | None = None) -> str:
        """PromQL for a call: ``query`` as given, else ``metric`` of the service: ``metric{<service_label>="x"}
        or metric{pod=~"<x's pods>"} or metric{persistentvolumeclaim=~"<x's claims>"}`` (``base.workload_selectors``)."""
        if query is not None and str(query).strip():
            return str(query).strip()
        if metric is None or not str(metric).strip():
            raise _error("give a PromQL query, or a metric name (with an optional service)", argument="query")
        if service in (None, ""):
            return promql_selector(str(metric))
        # The service's series, its pods' (cAdvisor and kube-state-metrics label by pod only) and its volumes'
        # (the kubelet labels by persistentvolumeclaim only).
        name = str(metric).strip()
        alternatives = [promql_selector(name, {self.service_label: service})]
        alternatives += [f"{name}{{{label}=~{promql_string(regex)}}}"
                         for label, regex in workload_selectors(str(service))]
        return " or ".join(alternatives)

    def query_metrics(self, *, query: str | None = None, metric: str | None = None, service: str | None = None,
                      start: datetime | None = None, end: datetime | None = None, step: Any = None) -> dict[str, Any]:
        """Range query via ``/api/v1/query_range`` (default window: the last 60 minutes)."""
        promql = self.build_query(query=query, metric=metric, service=service)
        start_dt, end_dt = resolve_window(start, end, now=datetime.now(timezone.utc))
        start_s, end_s = _unix(start_dt), _unix(end_dt)

        step_s = range_query_step(step, end_s - start_s)

        data = self._get(
            "/api/v1/query_range",
            {"query": promql, "start": _fmt_unix(start_s), "end": _fmt_unix(end_s), "step": _fmt_unix(step_s)},
        )
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise _error(f"prometheus query_range returned {kind!r}, expected a matrix")
        series = [self._series(item) for item in data.get("result") or []]
        return metrics_result(backend=BACKEND_NAME, query=promql, start=start_dt, end=end_dt, step=_number(step_s),
                              series=series)

    def _labels(self, raw: Any) -> dict[str, str]:
        labels = {str(k): str(v) for k, v in (raw or {}).items()} if isinstance(raw, dict) else {}
        if self.service_label != "service" and "service" not in labels and self.service_label in labels:
            labels["service"] = labels[self.service_label]
        return labels

    def _series(self, item: Any) -> dict[str, Any]:
        if not isinstance(item, dict):
            raise _error("prometheus returned a malformed matrix entry")
        labels = self._labels(item.get("metric"))
        values = []
        for pair in item.get("values") or []:
            if not isinstance(pair, (list, tuple)) or len(pair) < 2:
                raise _error("prometheus returned a malformed sample")
            values.append([_timestamp(pair[0]), str(pair[1])])
        return metric_series(labels, values)

    def query_instant(self, query: str, *, time: datetime | None = None) -> dict[str, Any]:
        """Instant query via ``/api/v1/query``.

        Returns ``{"backend", "query", "time", "result_type", "series": [{"labels", "value": [t, "v"]}]}``;
        a scalar/string result is one series with empty labels.
        """
        if query is None or not str(query).strip():
            raise _error("give a PromQL query", argument="query")
        promql = str(query).strip()
        at = parse_time(time, argument="time")
        params = {"query": promql}
        if at is not None:
            params["time"] = _fmt_unix(_unix(at))
        data = self._get("/api/v1/query", params)
        if not isinstance(data, dict):
            raise _error("prometheus query returned no data object")
        result_type = data.get("resultType")
        result = data.get("result")
        series: list[dict[str, Any]] = []
        if result_type == "vector":
            for item in result or []:
                if not isinstance(item, dict) or not isinstance(item.get("value"), list) or len(item["value"]) < 2:
                    raise _error("prometheus returned a malformed vector entry")
                t, v = item["value"][0], item["value"][1]
                series.append({"labels": self._labels(item.get("metric")), "value": [_timestamp(t), str(v)]})
            series.sort(key=lambda s: sorted(s["labels"].items()))
        elif result_type in ("scalar", "string"):
            if not isinstance(result, list) or len(result) < 2:
                raise _error(f"prometheus returned a malformed {result_type} result")
            series.append({"labels": {}, "value": [_timestamp(result[0]), str(result[1])]})
        elif result_type == "matrix":
            # e.g. ``up[5m]``: keep the samples, last one as value
            for item in result or []:
                s = self._series(item)
                series.append({"labels": s["labels"], "value": s["values"][-1] if s["values"] else None,
                               "values": s["values"]})
        else:
            raise _error(f"prometheus query returned unknown resultType {result_type!r}")
        return {
            "backend": BACKEND_NAME,
            "query": promql,
            "time": format_timestamp(at) if at is not None else None,
            "result_type": result_type,
            "series": series,
        }

    # ---------------------------------------------------------------- alerts

    def query_alerts(self) -> dict[str, Any]:
        """Active (pending or firing) alerts via ``/api/v1/alerts``."""
        data = self._get("/api/v1/alerts")
        if not isinstance(data, dict) or not isinstance(data.get("alerts"), list):
            raise _error("prometheus /api/v1/alerts returned no alerts list")
        alerts = []
        for raw in data["alerts"]:
            if not isinstance(raw, dict):
                raise _error("prometheus returned a malformed alert")
            labels = self._labels(raw.get("labels"))
            annotations = {str(k): str(v) for k, v in (raw.get("annotations") or {}).items()}
            annotations.setdefault("summary", "")
            annotations.setdefault("description", "")
            alerts.append({
                "labels": labels,
                "annotations": annotations,
                "state": str(raw.get("state") or ""),
                "activeAt": _normalize_iso(raw.get("activeAt")),
                "value": None if raw.get("value") is None else str(raw.get("value")),
            })
        alerts.sort(key=lambda a: (a["state"] != "firing", a["labels"].get("alertname", ""),
                                   sorted(a["labels"].items())))
        return {"backend": BACKEND_NAME, "alerts": alerts}
