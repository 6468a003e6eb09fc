"""A PromQL subset evaluated over in-memory samples, as Prometheus 2.42 evaluates a range query.

The demo backend stores samples the way Prometheus does (gauges, cumulative ``_total`` counters with
resets, ``_bucket``/``_sum``/``_count`` histogram series) and answers ``query_range`` with this
module, so the numbers a model or the localiser reads are the numbers a real server would give.
``tests/backends/test_promql_parity.py`` backfills the same samples into a real Prometheus and
compares every supported query.

Supported: instant selectors ``name{l="v", l!="v", l=~"re", l!~"re"}`` (5-minute lookback),
``rate``/``irate``/``increase`` over ``name{...}[range]``, ``sum``/``avg``/``min``/``max``/``count``
with ``by (...)`` or ``without (...)``, ``histogram_quantile(φ, ...)`` over classic ``le`` buckets,
the set union ``a or b`` (without ``on``/``ignoring``), and parentheses. Anything else is refused with a message naming what is supported. Semantics that
differ between Prometheus versions follow 2.42 (the version the Prometheus backend targets): range
selectors and the lookback window are closed at both ends, ``rate`` extrapolates as in 2.42.

The grammar is parsed by ``promql-parser`` (the Rust PromQL parser's Python binding).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable, Iterable, Mapping, Sequence

import promql_parser

from diagnosis.tools.backends.base import BackendError

__all__ = [
    "LOOKBACK_MS",
    "SUPPORTED",
    "StoredSeries",
    "Matcher",
    "evaluate_range",
    "format_value",
    "label_matchers",
    "parse_expression",
]

LOOKBACK_MS = 5 * 60 * 1000  # Prometheus's default --query.lookback-delta
SUPPORTED = ("selectors name{label=\"value\"}, rate/irate/increase(name{...}[5m]), "
             "sum/avg/min/max/count [by|without (labels)] (...), histogram_quantile(0.99, ...), a or b")
_RANGE_FUNCTIONS = ("rate", "irate", "increase")
_AGGREGATIONS = ("sum", "avg", "min", "max", "count")

Matcher = tuple[str, str, str]  # (label, "=" | "!=" | "=~" | "!~", value)
LabelKey = tuple[tuple[str, str], ...]
Vector = dict[LabelKey, float]


@dataclass(frozen=True)
class StoredSeries:
    """One series as the TSDB holds it: labels and its samples, times in milliseconds, ascending."""

    labels: Mapping[str, str]
    times: tuple[int, ...]
    values: tuple[float, ...]
    key: LabelKey = field(init=False, repr=False, compare=False)  # the sorted label pairs

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", tuple(sorted(self.labels.items())))


def _error(message: str) -> BackendError:
    return BackendError(message, argument="query")


# --- parsing --------------------------------------------------------------------------------------


_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}


def label_matchers(selector: promql_parser.VectorSelector) -> list[Matcher]:
    """The matchers of a parsed vector selector, the metric name first as ``__name__ = name``."""
    out: list[Matcher] = [("__name__", "=", selector.name)] if selector.name else []
    for matcher in selector.matchers.matchers:
        op = _OPS.get(str(matcher.op).rsplit(".", 1)[-1])
        if op is None:
            raise _error(f"unsupported matcher operator {matcher.op}")
        if op in ("=~", "!~"):
            try:
                re.compile(matcher.value)
            except re.error as exc:
                raise _error(f"invalid regular expression {matcher.value!r} ({exc})") from None
        out.append((matcher.name, op, matcher.value))
    if selector.matchers.or_matchers:
        raise _error("'or' inside a selector is not supported by the demo backend")
    return out


def parse_expression(query: str) -> promql_parser.Expr:
    """Parse ``query`` as PromQL; a syntax error is a ``BackendError`` on ``query``."""
    if not isinstance(query, str):
        raise _error(f"expected text, got {type(query).__name__}")
    try:
        return promql_parser.parse(query)
    except ValueError as exc:
        raise _error(f"cannot parse {query!r} as PromQL: {exc}") from None


def _matches(labels: Mapping[str, str], matchers: Iterable[Matcher]) -> bool:
    for label, op, value in matchers:
        actual = labels.get(label, "")  # a missing label matches as the empty string, as in Prometheus
        if op == "=" and actual != value:
            return False
        if op == "!=" and actual == value:
            return False
        if op == "=~" and re.fullmatch(value, actual) is None:
            return False
        if op == "!~" and re.fullmatch(value, actual) is not None:
            return False
    return True


# --- compiling the expression into one function per evaluation time ---------------------------------

Node = Callable[[int], Vector]


class _Compiler:
    """Turns the parsed expression into closures over the stored series (selected once)."""

    def __init__(self, series: Sequence[StoredSeries], extra: Sequence[Matcher]) -> None:
        self.series = series
        self.extra = list(extra)

    def select(self, selector: promql_parser.VectorSelector) -> list[StoredSeries]:
        if selector.offset is not None or selector.at is not None:
            raise _error("'offset' and '@' modifiers are not supported by the demo backend")
        matchers = label_matchers(selector) + self.extra
        if all(_matches({}, [m]) for m in matchers):
            raise _error("a selector needs a metric name or a label matcher that does not match the empty string")
        chosen = [s for s in self.series if _matches(s.labels, matchers)]
        return sorted(chosen, key=lambda s: s.key)  # Prometheus reads series in label order

    def compile(self, expr) -> Node:
        if isinstance(expr, promql_parser.ParenExpr):
            return self.compile(expr.expr)
        if isinstance(expr, promql_parser.VectorSelector):
            return self._instant(expr)
        if isinstance(expr, promql_parser.Call):
            return self._call(expr)
        if isinstance(expr, promql_parser.AggregateExpr):
            return self._aggregate(expr)
        if isinstance(expr, promql_parser.BinaryExpr) and str(expr.op) == "or" and (
                expr.modifier is None or expr.modifier.matching is None):
            return self._union(self.compile(expr.lhs), self.compile(expr.rhs))
        if isinstance(expr, promql_parser.MatrixSelector):
            raise _error("a range selector such as x[5m] is only supported inside rate, irate or increase "
                         "(query_metrics already returns a range of samples)")
        raise _error(f"{type(expr).__name__} is not supported by the demo backend; supported: {SUPPORTED}")

    @staticmethod
    def _union(left: Node, right: Node) -> Node:
        """``a or b``: every sample of ``a``, and those of ``b`` whose labels (the name aside) ``a`` has none of."""

        def at(t: int) -> Vector:
            out = dict(left(t))
            have = {_drop_name(key) for key in out}
            out.update((key, value) for key, value in right(t).items() if _drop_name(key) not in have)
            return out

        return at

    def _instant(self, selector) -> Node:
        chosen = self.select(selector)

        def at(t: int) -> Vector:
            out: Vector = {}
            for s in chosen:
                i = bisect.bisect_right(s.times, t) - 1
                if i >= 0 and s.times[i] >= t - LOOKBACK_MS:
                    out[s.key] = s.values[i]
            return out

        return at

    def _call(self, call) -> Node:
        name = call.func.name
        args = list(call.args)
        if name in _RANGE_FUNCTIONS:
            if len(args) != 1 or not isinstance(args[0], promql_parser.MatrixSelector):
                raise _error(f"{name}() takes one range selector such as {name}(x_total[5m])")
            matrix = args[0]
            if getattr(matrix, "step", None):
                raise _error("subqueries are not supported by the demo backend")
            chosen = self.select(matrix.vector_selector)
            range_ms = int(matrix.range.total_seconds() * 1000)
            fn = {"rate": lambda p, t: _extrapolated_rate(p, t, range_ms, is_counter=True, is_rate=True),
                  "increase": lambda p, t: _extrapolated_rate(p, t, range_ms, is_counter=True, is_rate=False),
                  "irate": lambda p, t: _instant_rate(p)}[name]

            def at(t: int) -> Vector:
                out: Vector = {}
                for s in chosen:
                    lo = bisect.bisect_left(s.times, t - range_ms)
                    hi = bisect.bisect_right(s.times, t)
                    points = list(zip(s.times[lo:hi], s.values[lo:hi]))
                    value = fn(points, t)
                    if value is not None:
                        key = _drop_name(s.key)
                        if key in out:
                            raise _error("vector cannot contain metrics with the same labelset")
                        out[key] = value
                return out

            return at
        if name == "histogram_quantile":
            if len(args) != 2 or not isinstance(args[0], promql_parser.NumberLiteral):
                raise _error("histogram_quantile() takes a number and a vector: histogram_quantile(0.99, ...)")
            phi = float(args[0].val)
            inner = self.compile(args[1])
            return lambda t: _histogram_quantile(phi, inner(t))
        raise _error(f"function {name}() is not supported by the demo backend; supported: {SUPPORTED}")

    def _aggregate(self, agg) -> Node:
        op = str(agg.op)
        if op not in _AGGREGATIONS:
            raise _error(f"aggregation {op} is not supported by the demo backend; supported: {SUPPORTED}")
        if agg.param is not None:
            raise _error(f"{op} takes no parameter")
        inner = self.compile(agg.expr)
        modifier = agg.modifier
        without = modifier is not None and str(modifier.type).endswith("Without")
        grouping = set(modifier.labels) if modifier is not None else set()

        def group_key(key: LabelKey) -> LabelKey:
            if without:
                return tuple((k, v) for k, v in key if k not in grouping and k != "__name__")
            return tuple((k, v) for k, v in key if k in grouping)

        def at(t: int) -> Vector:
            groups: dict[LabelKey, list] = {}
            for key, value in inner(t).items():  # inputs in label order, as Prometheus iterates them
                g = group_key(key)
                state = groups.get(g)
                if state is None:
                    groups[g] = [value, 1, value]  # value (sum/min/max), count, mean
                    continue
                state[1] += 1
                if op == "sum":
                    state[0] += value
                elif op == "max":
                    if state[0] < value or math.isnan(state[0]):
                        state[0] = value
                elif op == "min":
                    if state[0] > value or math.isnan(state[0]):
                        state[0] = value
                elif op == "avg":
                    state[2] = _mean_step(state[2], value, state[1])
            result = {"sum": 0, "max": 0, "min": 0, "count": 1, "avg": 2}[op]
            return {g: float(state[result]) for g, state in groups.items()}

        return at


def _drop_name(key: LabelKey) -> LabelKey:
    return tuple((k, v) for k, v in key if k != "__name__")


def _mean_step(mean: float, value: float, count: int) -> float:
    """Prometheus 2.42's running mean for avg (divides both terms by the count to avoid overflow)."""
    if math.isinf(mean):
        if math.isinf(value) and (mean > 0) == (value > 0):
            return mean
        if not math.isinf(value) and not math.isnan(value):
            return mean
    return mean + (value / count - mean / count)


# --- the functions, as promql/functions.go and promql/quantile.go (v2.42) compute them --------------


def _extrapolated_rate(points: list[tuple[int, float]], t: int, range_ms: int, *, is_counter: bool,
                       is_rate: bool) -> float | None:
    """rate/increase: the change over the window, counter resets added back, extrapolated to the window's
    edges when the first/last sample lies within 1.1 average intervals of them (else by half an interval),
    never extrapolated below zero for a counter."""
    if len(points) < 2:
        return None
    range_start, range_end = t - range_ms, t
    first_t, first_v = points[0]
    last_t, last_v = points[-1]
    result = last_v - first_v
    if is_counter:
        prev = first_v
        for _, v in points[1:]:
            if v < prev:
                result += prev
            prev = v
    duration_to_start = (first_t - range_start) / 1000
    duration_to_end = (range_end - last_t) / 1000
    sampled = (last_t - first_t) / 1000
    average = sampled / (len(points) - 1)
    if is_counter and result > 0 and first_v >= 0:
        duration_to_zero = sampled * (first_v / result)
        if duration_to_zero < duration_to_start:
            duration_to_start = duration_to_zero
    threshold = average * 1.1
    interval = sampled
    interval += duration_to_start if duration_to_start < threshold else average / 2
    interval += duration_to_end if duration_to_end < threshold else average / 2
    factor = interval / sampled
    if is_rate:
        factor /= range_ms / 1000
    return result * factor


def _instant_rate(points: list[tuple[int, float]]) -> float | None:
    """irate: the per-second change between the last two samples (the last value after a reset)."""
    if len(points) < 2:
        return None
    (prev_t, prev_v), (last_t, last_v) = points[-2], points[-1]
    value = last_v if last_v < prev_v else last_v - prev_v
    if last_t == prev_t:
        return None
    return value / ((last_t - prev_t) / 1000)


def _parse_le(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.strip())  # Go's ParseFloat also reads +Inf, Inf and inf
    except ValueError:
        return None


def _histogram_quantile(phi: float, vector: Vector) -> Vector:
    """Group the input by its labels without ``le`` (and the metric name) and interpolate in each group."""
    groups: dict[LabelKey, list[tuple[float, float]]] = {}
    for key, value in vector.items():
        labels = dict(key)
        upper = _parse_le(labels.get("le"))
        if upper is None:
            continue  # no bucket label or a malformed one: skipped, as Prometheus does
        group = tuple((k, v) for k, v in key if k not in ("le", "__name__"))
        groups.setdefault(group, []).append((upper, value))
    return {group: _bucket_quantile(phi, buckets) for group, buckets in groups.items()}


def _bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    buckets = sorted(buckets, key=lambda b: b[0])
    if not math.isinf(buckets[-1][0]) or buckets[-1][0] < 0:
        return math.nan
    merged: list[list[float]] = []  # buckets with the same upper bound are added together
    for upper, count in buckets:
        if merged and merged[-1][0] == upper:
            merged[-1][1] += count
        else:
            merged.append([upper, count])
    highest = -math.inf  # counts are forced to be monotonic, as ensureMonotonic does
    for bucket in merged:
        if bucket[1] > highest:
            highest = bucket[1]
        elif bucket[1] < highest:
            bucket[1] = highest
    if len(merged) < 2:
        return math.nan
    observations = merged[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(merged) - 1) if merged[i][1] >= rank), len(merged) - 1)
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    return start + (end - start) * (rank / count)


# --- the range query ----------------------------------------------------------------------------------


def evaluate_range(
    query: str | promql_parser.Expr,
    series: Sequence[StoredSeries],
    *,
    start_ms: int,
    end_ms: int,
    step_ms: int,
    extra_matchers: Sequence[Matcher] = (),
) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
    """``/api/v1/query_range``: the expression at ``start, start+step, … <= end``; each output series with
    the times it had a value, sorted by labels. ``extra_matchers`` are added to every selector."""
    if step_ms <= 0:
        raise BackendError("must be a positive duration", argument="step")
    expr = parse_expression(query) if isinstance(query, str) else query
    node = _Compiler(series, extra_matchers).compile(expr)
    out: dict[LabelKey, list[tuple[int, float]]] = {}
    t = start_ms
    while t <= end_ms:
        for key, value in node(t).items():
            out.setdefault(key, []).append((t, value))
        t += step_ms
    return [(dict(key), points) for key, points in sorted(out.items())]


def format_value(value: float) -> str:
    """A sample value as Prometheus's JSON writes it (Go ``strconv.FormatFloat(v, 'f', -1, 64)``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    if "e" not in text:  # repr is already the shortest round-trip form; only exponents need expanding
        return text[:-2] if text.endswith(".0") else text
    text = format(Decimal(text), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text
