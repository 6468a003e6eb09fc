"""Metric series as Prometheus stores them (gauges, counters that only grow or reset, classic histograms
with cumulative ``le`` buckets), on the incident's one-hour grid, with gaps where a scrape failed."""

from __future__ import annotations

import math
from typing import Any, Iterable

from diagnosis.evaluation.generator.world import STEP

HISTOGRAM_BOUNDS = (0.005, 0.025, 0.1, 0.25, 1.0, 2.5, 10.0)
SPREAD = 0.6  # log-normal shape of request latencies around their median


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def series(name: str, labels: dict[str, str], values: Iterable[float | None]) -> dict[str, Any]:
    return {"labels": {"__name__": name, **labels}, "step_seconds": STEP,
            "values": [None if v is None else _round(v) for v in values]}


def gauge(name: str, labels: dict[str, str], values: list[float], missing: Iterable[int] = ()) -> dict[str, Any]:
    gone = set(missing)
    return series(name, labels, [None if i in gone else v for i, v in enumerate(values)])


def cumulative(per_step: list[float], start: float, resets: Iterable[int] = ()) -> list[float]:
    """Running totals of ``per_step`` increments from ``start``; at a reset sample the count restarts near 0."""
    out, total, reset_at = [], start, set(resets)
    for i, inc in enumerate(per_step):
        total = (inc * 0.3 if i in reset_at else total + inc)
        out.append(round(total, 3))
    return out


def counter(name: str, labels: dict[str, str], per_step: list[float], start: float,
            missing: Iterable[int] = (), resets: Iterable[int] = ()) -> dict[str, Any]:
    """A ``_total`` (or exporter-named) counter from increments per step."""
    return gauge(name, labels, cumulative(per_step, start, resets), missing)


def _fraction_below(bound: float, median: float) -> float:
    """Share of observations <= ``bound`` for a log-normal latency with this median."""
    z = (math.log(bound) - math.log(max(median, 1e-6))) / SPREAD
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def histogram(base: str, labels: dict[str, str], counts: list[float], medians: list[float], start: float,
              missing: Iterable[int] = (), resets: Iterable[int] = (), bounds: tuple[float, ...] = HISTOGRAM_BOUNDS,
              scale: float = 1.0, with_count: bool = True) -> list[dict[str, Any]]:
    """``base_bucket`` per bound (and ``+Inf``), ``base_count`` and ``base_sum``: observations per step with a
    median per step (seconds; ``scale`` 1000 writes milliseconds). Buckets never decrease with ``le``."""
    gone, reset_at = set(missing), set(resets)
    per_bound: list[list[float]] = [[] for _ in bounds]
    for count, median in zip(counts, medians):
        whole = int(count)
        for k, bound in enumerate(bounds):
            per_bound[k].append(math.floor(whole * _fraction_below(bound / scale, median)))
    totals = [float(int(c)) for c in counts]
    start_inf = int(start)
    out = []
    for k, bound in enumerate(bounds):
        start_k = math.floor(start_inf * _fraction_below(bound / scale, medians[0]))
        values = _int_cumulative(per_bound[k], start_k, reset_at)
        out.append(series(f"{base}_bucket", {**labels, "le": _le(bound)}, [None if i in gone else v for i, v in enumerate(values)]))
    inf = _int_cumulative(totals, start_inf, reset_at)
    out.append(series(f"{base}_bucket", {**labels, "le": "+Inf"}, [None if i in gone else v for i, v in enumerate(inf)]))
    if with_count:
        out.append(series(f"{base}_count", labels, [None if i in gone else v for i, v in enumerate(inf)]))
    sums = [c * m * math.exp(SPREAD ** 2 / 2) * scale for c, m in zip(totals, medians)]
    out.append(series(f"{base}_sum", labels, [None if i in gone else v
                                               for i, v in enumerate(cumulative(sums, start * medians[0] * scale, reset_at))]))
    return out


def _int_cumulative(per_step: list[float], start: int, resets: set[int]) -> list[float]:
    out, total = [], start
    for i, inc in enumerate(per_step):
        total = int(inc) if i in resets else total + int(inc)
        out.append(float(total))
    return out


def _le(bound: float) -> str:
    return f"{bound:g}" if bound < 1e5 else f"{bound:.0f}"
