"""Signals: what deviated, on which service, since when, and which records show it.

A ``Signal`` is typed: its source (metric, log, kube, alert, change, trace), its kind (the metric kind
from naming conventions, ``log`` for a failure template, the Kubernetes reason, ...), its onset and a
strength in [0, 1]. Faults are the signals that say something is wrong on that service; alerts and
changes are context (an alert does not name a cause; a change is never the cause by itself).
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Mapping

from diagnosis.localisation.deviation import Shift, rates, ratio, shift
from diagnosis.localisation.levels import at_least
from diagnosis.localisation.log_rates import LOG_LLR, MIN_BASELINE_S, ongoing, rate_change, unseen_before
from diagnosis.localisation.records import Evidence, LogRecord, MetricSeries, Ref, service_of, workload_of
from diagnosis.localisation.templates import Template, mine, zeroed

MIN_SCORE = 6.0  # robust deviations for a metric shift to count
MIN_RELATIVE = 0.2  # and at least this far from its baseline, relatively


@dataclass
class Signal:
    entity: str
    source: str  # metric | log | kube | alert | change | trace
    kind: str  # latency | errors | saturation | cpu | memory | disk | restart | traffic | level | log | <reason>
    onset: float | None
    strength: float
    refs: list[Ref]
    text: str  # what recognition reads: the template, the reason and message, the metric name
    fault: bool = True
    detail: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- metric conventions

_CPU = re.compile(r"cpu|throttl", re.I)
_MEMORY = re.compile(r"mem|heap|rss|working_set|oom", re.I)
_DISK = re.compile(r"disk|filesystem|_fs_|volume|inode|storage", re.I)
# Envoy's ``rq_time`` and nginx's ``request_time`` are request durations in their units.
_LATENCY = re.compile(r"latency|duration|response_time|rq_time|request_time|_time_|_seconds$|_milliseconds$|_ms$|_us$|"
                      r"delay|rtt", re.I)
_ERRORS = re.compile(r"error|fail|exception|fault|5xx|reject|dropped|timeouts?(?:_total)?$", re.I)
_SATURATION = re.compile(r"pool|pending|queue|waiting|inflight|in_flight|active|connections?|threads?|backlog|lag|"
                         r"utili[sz]ation|saturat|usage|busy|used|conns|clients|sessions|stat_activity|depth|open_fds", re.I)
_RESTART = re.compile(r"restart", re.I)
_GOOD_WHEN_HIGH = re.compile(r"avail|free|hit_ratio|hits|success|_up$|^up$|ready|capacity|limit|quota_remaining", re.I)
_STATUS_LABELS = ("code", "status", "status_code", "response_code", "http_status", "grpc_code", "outcome")


def metric_kind(name: str, labels: dict[str, str]) -> str:
    """The kind of a series by Prometheus and OpenTelemetry naming conventions."""
    return _metric_kind(name, next((labels[k] for k in _STATUS_LABELS if labels.get(k)), ""))


@functools.lru_cache(maxsize=4096)
def _metric_kind(name: str, status: str) -> str:
    if re.match(r"5\d\d$|5xx$", status, re.I) or status.upper() in ("SERVER_ERROR", "UNAVAILABLE", "INTERNAL",
                                                                     "DEADLINE_EXCEEDED"):
        return "errors"
    if _RESTART.search(name):
        return "restart"
    if _CPU.search(name):
        return "cpu"
    if _MEMORY.search(name):
        return "memory"
    if _DISK.search(name):
        return "disk"
    if _ERRORS.search(name):
        return "errors"
    if _LATENCY.search(name) and "cpu" not in name:
        return "latency"
    if _SATURATION.search(name):
        return "saturation"
    if re.search(r"requests?|calls|ops|throughput|_total$|_count$|messages", name, re.I):
        return "traffic"
    return "level"


def bad_direction(name: str, kind: str) -> int:
    """+1 when higher is worse, -1 when lower is worse, 0 when either way only tells of a change."""
    if kind in ("traffic", "level"):
        return 0
    return -1 if _GOOD_WHEN_HIGH.search(name) else 1


def _rests(evidence: Evidence) -> list[tuple]:
    """Each series' labels but its name, sorted: what a series shares with its siblings (``_sum`` and
    ``_count``, used and max)."""
    return [tuple(sorted((k, v) for k, v in s.labels.items() if k != "__name__")) for s in evidence.series]


def _derived(evidence: Evidence, rests: list[tuple]) -> list[tuple[MetricSeries, str, list[float], list[float]]]:
    """Every series as something that can be compared over time: counters as rates, histograms as
    their mean (rate of ``_sum`` over rate of ``_count``); buckets are read through their histogram."""
    out = []
    by_key: dict[tuple, MetricSeries] = {}
    for s, rest in zip(evidence.series, rests):
        by_key[(s.name, rest)] = s
    for s, rest in zip(evidence.series, rests):
        name = s.name
        if name.endswith("_bucket"):
            continue
        if name.endswith("_sum"):
            count = by_key.get((name[:-4] + "_count", rest))
            if count is not None:
                t, v = ratio(rates(s.times, s.values), rates(count.times, count.values))
                out.append((s, name[:-4], t, v))
            continue
        if name.endswith("_total") or name.endswith("_count") and _counts_up(s.values):
            # A histogram's ``_count`` is its throughput; a ``_count`` that goes down as well as up is a gauge
            # that counts something now (``pg_stat_activity_count``: the sessions open), read as it is.
            t, v = rates(s.times, s.values)
            out.append((s, name, t, v))
            continue
        out.append((s, name, s.times, s.values))
    return out


def _counts_up(values: list[float]) -> bool:
    """Whether a series only grows, but for resets to near zero (a counter, as a restarted process starts it
    again)."""
    return all(b >= a or b < 0.1 * a for a, b in zip(values, values[1:]))


_POD_IDENTITY = ("pod", "pod_name", "instance", "id", "container_id", "uid", "pod_ip")


# A label whose value is one backend's address (nginx-vts ``backend``, Envoy's ``upstream_host``): the series of
# one endpoint of a pool, as a pod's series are one replica of a workload.
_ENDPOINT_VALUE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?")


def _pod_key(name: str, labels: Mapping[str, str]) -> tuple[tuple, str] | None:
    """A pod's (or a pool endpoint's) series without what names the pod: the same metric of the same workload
    in another pod, and the pod it is in."""
    pod = labels.get("pod") or labels.get("pod_name")
    if pod:
        return (name, workload_of(pod), tuple(sorted((k, v) for k, v in labels.items()
                                                     if k not in _POD_IDENTITY and k != "__name__"))), pod
    endpoints = [k for k, v in labels.items() if k not in _POD_IDENTITY and _ENDPOINT_VALUE.fullmatch(v)]
    if len(endpoints) != 1:
        return None
    return (name, endpoints[0], tuple(sorted((k, v) for k, v in labels.items()
                                             if k not in _POD_IDENTITY and k not in endpoints and k != "__name__"))), \
        labels[endpoints[0]]


def _replaced(derived: list) -> set[int]:
    """Pod series that stop because another pod of the same workload took over (a rollout, a rescheduled
    pod), and a pool's endpoint series that stop because another endpoint took over: churn, not a process
    that went away. Their successor reports after they stop."""
    last_by_key: dict[tuple, list[tuple[float, str]]] = defaultdict(list)
    keyed = [(series, times, _pod_key(name, series.labels)) for series, name, times, _ in derived]
    for _series, times, found in keyed:
        if found is not None and times:
            last_by_key[found[0]].append((times[-1], found[1]))
    out = set()
    for series, times, found in keyed:
        if found is None or not times:
            continue
        key, pod = found
        if any(last > times[-1] + 60 and other != pod for last, other in last_by_key[key]):
            out.add(id(series))
    return out


def _within_relative(values: list[float]) -> bool:
    """Whether every point lies so close to every other, relative to their size, that a shift between two
    of their medians is under ``MIN_RELATIVE`` of its baseline (both medians lie between the lowest and
    the highest point). The margin keeps rounding on the safe side."""
    if not values:
        return False
    low, high = min(values), max(values)
    floor = low if low > 0 else -high if high < 0 else 0.0
    return high - low < 0.95 * MIN_RELATIVE * floor


# A usage series and its ceiling, by the exporters' naming (``redis_memory_used_bytes`` and
# ``redis_memory_max_bytes``, ``jvm_memory_used_bytes`` and ``jvm_memory_max_bytes``, ``process_open_fds`` and
# ``process_max_fds``, ``hikaricp_connections_active`` and ``hikaricp_connections_max``).
_IN_USE, _CEILING = ("used", "usage", "active", "open", "current", "inuse"), ("max", "limit")
# What is left and its capacity (``kubelet_volume_stats_available_bytes`` and ``..._capacity_bytes``,
# ``..._inodes_free`` and ``..._inodes``, ``node_filesystem_avail_bytes`` and ``..._size_bytes``; "": no word).
_LEFT, _CAPACITY = ("available", "avail", "free"), ("capacity", "size", "")
AT_LIMIT = 0.97  # of its ceiling, a usage series is at it
BELOW_LIMIT = 0.9  # its baseline below this share of the ceiling: reaching it is new


def _ceilings(evidence: Evidence, rests: list[tuple]) -> dict[int, float]:
    """The ceiling of each usage series that has one: a constant sibling series on the same labels whose
    name says max or limit where the usage series says used, active or open. Negative: the capacity of a series
    of what is left (its name says available or free where the sibling's says capacity or size, or nothing)."""
    by_key = {}
    for s, rest in zip(evidence.series, rests):
        if s.values:
            by_key[(s.name, rest)] = s
    out = {}
    for (name, rest), s in by_key.items():
        tokens = name.split("_")
        for i, token in enumerate(tokens):
            for ceiling in _CEILING if token in _IN_USE else _CAPACITY if token in _LEFT else ():
                other = by_key.get(("_".join(tokens[:i] + [ceiling] * bool(ceiling) + tokens[i + 1:]), rest))
                if other is not None and min(other.values) == max(other.values) > 0:
                    out[id(s)] = other.values[0] if token in _IN_USE else -other.values[0]
    return out


def _reached_ceiling(moved: Shift, ceiling: float | None) -> bool:
    """A usage series that rose to its ceiling and stays there: saturated, however noisy its baseline was
    (the robust score measures a shift against the baseline's noise; a ceiling needs no such yardstick). What is
    left of a capacity (a negative ceiling) ran out when it fell to 1 - AT_LIMIT of it, from at least twice that."""
    if ceiling is not None and ceiling < 0:
        return moved.sustained and moved.direction < 0 and moved.level <= (1 - AT_LIMIT) * -ceiling <= moved.baseline/2
    return (ceiling is not None and moved.sustained and moved.direction > 0 and moved.level >= AT_LIMIT * ceiling
            and moved.baseline <= BELOW_LIMIT * ceiling)


def metric_signals(evidence: Evidence) -> list[Signal]:
    signals = []
    end = evidence.window[1] if evidence.window else None
    services: set[str] | None = None
    rests = _rests(evidence)
    derived = _derived(evidence, rests)
    replaced = _replaced(derived)
    ceilings = _ceilings(evidence, rests)
    for series, name, times, values in derived:
        if services is None and "persistentvolumeclaim" in series.labels:
            services = evidence.services()  # a volume's claim is read against the workloads the evidence names
        entity = service_of(series.labels, services or ())
        if not entity:
            node = evidence.node(series.labels)
            if services is None:
                services = evidence.services()
            entity = node if node in services else f"node:{node}" if node else ""
        if not entity:
            continue
        kind = metric_kind(name, series.labels)
        if end is not None and times and end - times[-1] > 600 and len(times) >= 8 and id(series) not in replaced:
            # A series that stopped: the process or its exporter went away.
            signals.append(Signal(entity, "metric", "stopped", times[-1], 0.4, [series.ref], name,
                                  detail={"name": name}))
            continue
        if _within_relative(values):
            continue  # it never moved MIN_RELATIVE from any level it had: no shift of it can count
        moved = shift(times, values)
        if moved is None or not moved.sustained or moved.relative < MIN_RELATIVE:
            continue
        at_ceiling = _reached_ceiling(moved, ceilings.get(id(series)))
        if moved.score < MIN_SCORE and not at_ceiling:
            continue
        bad = bad_direction(name, kind)
        if bad and moved.direction != bad:
            continue  # better than its baseline (or a symptom's echo: less traffic) is not a fault
        fault = bad != 0 or kind == "level"
        strength = min(1.0, 0.3 + 0.1 * math.log2(1 + moved.score) + (0.2 if moved.relative > 1 else 0))
        if kind == "traffic":
            strength *= 0.5
        if at_ceiling:
            strength = max(strength, 0.8)
        signals.append(Signal(entity, "metric", kind, moved.onset, strength, [series.ref], name, fault=fault,
                              detail={"shift": moved, "name": name, "labels": series.labels,
                                      **({"ceiling": abs(ceilings[id(series)])} if at_ceiling else {})}))
    return signals


# --------------------------------------------------------------------------- logs

# A routine line that announces a change: a deploy, a rollout, a new version, a configuration or flag update.
CHANGE_LINE = re.compile(r"(?<![A-Za-z0-9_])(?:deploy(?:ed|ing)|roll(?:ed|ing)? ?out|rollout (?:started|finished|complete)|"
                         r"released|upgraded|new (?:version|revision)|config(?:uration)? (?:reload(?:ed)?|changed?|"
                         r"updated?|applied|push)|applied|reloaded|flag|toggled?|enabled|disabled|migrat(?:ed|ion)|"
                         r"started \S+ v?\d)(?![A-Za-z0-9_])", re.I)
# A server saying its client gave up on the call (gRPC's CANCELLED "by the client", nginx's 499 "client closed
# request", "client disconnected"): the caller's deadline or its user's patience, which the caller's own lines
# tell; not a fault of the server that logs it.
CLIENT_GAVE_UP = re.compile(r"(?:cancel(?:l)?ed|closed|aborted|reset) by (?:the )?(?:client|caller|downstream)|"
                            r"client (?:closed|cancel(?:l)?ed|disconnected|aborted|went away|has gone away|gave up)|"
                            r"客户端(?:已)?(?:取消|断开|关闭)", re.I)


# Found per digit shape (``_duration_ms``): the pattern must treat every ASCII digit alike.
_DURATION = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?(ms|msec|milliseconds|s|sec|seconds|µs|us)\b", re.I)


def log_signals(evidence: Evidence, templates: dict[tuple[str, int], Template]) -> list[Signal]:
    signals = []
    spans: dict[str, tuple[int, int, str] | None] = {}  # where a digit shape states a duration
    for (service, _tid), template in templates.items():
        window = evidence.log_windows.get(service)
        if window is None:
            continue
        low, high = window
        records = ordered = template.records  # ``mine`` keeps them in time order
        times = [r.ts for r in ordered]
        worst = template.level  # the most severe of its records' levels (``mine``)
        faulted = False
        if at_least(worst, "WARN") and not CLIENT_GAVE_UP.search(template.text):
            change = rate_change(times, low, high)
            still = ongoing(times[-1], change, high)
            # A rate that jumped, or an error shape never seen in a baseline of clean logs (a new template).
            new_error = change is not None and change[3] >= 2 and at_least(worst, "ERROR") and unseen_before(change, times, low)
            if change and (change[0] >= LOG_LLR or new_error) and still and (change[3] >= 2 or worst == "FATAL"):
                llr, at, before, after = change
                first = next(r for r in ordered if r.ts >= at)
                if worst == "WARN":  # warnings alone never make a root: they only add to other signals
                    strength = min(0.4, 0.25 + 0.03 * math.log2(1 + llr))
                else:
                    strength = min(1.0, 0.55 + 0.05 * math.log2(1 + llr) + (0.1 if before == 0 else 0))
                signals.append(Signal(service, "log", "log", at, strength, [first.ref], template.text,
                                      detail={"level": worst, "before": before, "after": after, "new": before == 0,
                                              "template": template, "first": first}))
                faulted = True
        # A line that announces a change; not an error that says "disabled", nor a warning that is itself the
        # failure ("WRONGPASS … user is disabled" repeating since the onset).
        if len(records) <= 3 and times[0] - low >= MIN_BASELINE_S and not at_least(worst, "ERROR") and not faulted \
                and CHANGE_LINE.search(template.text):
            first = ordered[0]
            signals.append(Signal(service, "change", "log", first.ts, 0.0, [first.ref], template.text, fault=False,
                                  detail={"what": first.message}))
        durations = [(r.ts, _duration_ms(r.message, spans, shape)) for r, shape in zip(ordered, template.shapes)] \
            if len(records) >= 10 else []
        durations = [(t, v) for t, v in durations if v is not None]
        if len(durations) >= 10:
            moved = shift([t for t, _ in durations], [v for _, v in durations])
            if moved and moved.sustained and moved.direction > 0 and moved.score >= MIN_SCORE and moved.relative >= 1.0:
                at = moved.onset
                first = next(r for r in ordered if r.ts >= at)
                signals.append(Signal(service, "log", "latency", at, 0.55, [first.ref], template.text,
                                      detail={"shift": moved, "template": template, "first": first}))
    return signals


def _duration_ms(message: str, spans: dict[str, tuple[int, int, str] | None], shape: str | None = None) -> float | None:
    """The first duration a line states, in ms. ``_DURATION`` treats all ASCII digits alike, so it matches
    a line where it matches the line's digit shape (``zeroed``, or ``shape`` when known): found once per
    shape in ``spans``."""
    shape = zeroed(message) if shape is None else shape
    if shape in spans:
        span = spans[shape]
    else:
        match = _DURATION.search(shape)
        span = spans[shape] = (match.start(1), match.end(1), match.group(2).lower()) if match else None
    if span is None:
        return None
    value, unit = float(message[span[0]:span[1]]), span[2]
    return value * _TO_MS.get(unit, 1)


_TO_MS = {"s": 1000, "sec": 1000, "seconds": 1000, "µs": 0.001, "us": 0.001}


# --------------------------------------------------------------------------- Kubernetes, alerts, changes, traces

KUBE_FAULTS = re.compile(r"OOMKilled|Evicted|FailedScheduling|Unschedulable|ImagePullBackOff|ErrImagePull|"
                         r"InvalidImageName|CreateContainerConfigError|CreateContainerError|CrashLoopBackOff|BackOff|"
                         r"Unhealthy|Error|Failed\w*|NodeNotReady|\w+Pressure|Killing|ContainerCannotRun|"
                         r"DeadlineExceeded|BackoffLimitExceeded", re.I)


def kube_signals(evidence: Evidence) -> list[Signal]:
    signals = []
    for fact in evidence.kube:
        if fact.reason == "Restarted":
            signals.append(Signal(fact.service, "kube", "restart", fact.ts, 0.3, [fact.ref], fact.reason,
                                  fault=False))
            continue
        if not KUBE_FAULTS.fullmatch(fact.reason) and not (fact.warning and KUBE_FAULTS.search(fact.reason)):
            continue
        strength = 0.5 if fact.reason in ("BackOff", "Unhealthy", "CrashLoopBackOff", "Killing") else 0.75
        signals.append(Signal(fact.service, "kube", fact.reason, fact.ts, strength, [fact.ref],
                              f"{fact.reason} {fact.message}", detail={"last": fact.last}))
    return signals


def alert_signals(evidence: Evidence) -> list[Signal]:
    return [Signal(a.service, "alert", "alert", a.since, 0.3, [a.ref], a.name, fault=False)
            for a in evidence.alerts if a.service and a.state == "firing"]


def change_signals(evidence: Evidence) -> list[Signal]:
    return [Signal(c.service, "change", c.kind or "change", c.ts, 0.0, [c.ref], f"{c.kind} {c.what}", fault=False,
                   detail={"what": c.what})
            for c in evidence.changes if c.service]


def trace_signals(evidence: Evidence) -> list[Signal]:
    """Per edge: errors and latency after a split against before it, a signal on the callee."""
    by_edge = defaultdict(list)
    for call in evidence.calls:
        by_edge[(call.caller, call.callee)].append(call)
    signals = []
    for (caller, callee), calls in by_edge.items():
        calls.sort(key=lambda c: c.ts)
        errors = [c for c in calls if c.error]
        if errors and len(errors) >= 2:
            first = errors[0]
            healthy_before = [c for c in calls if c.ts < first.ts and not c.error]
            if healthy_before:
                signals.append(Signal(callee, "trace", "errors", first.ts, 0.6, [first.ref],
                                      f"{caller} -> {callee} errors", detail={"caller": caller}))
        if len(calls) >= 10:
            moved = shift([c.ts for c in calls], [c.duration_ms for c in calls])
            if moved and moved.sustained and moved.direction > 0 and moved.score >= MIN_SCORE and moved.relative >= 0.5:
                first = next(c for c in calls if c.ts >= moved.onset)
                signals.append(Signal(callee, "trace", "latency", moved.onset, 0.55, [first.ref],
                                      f"{caller} -> {callee} latency", detail={"caller": caller, "shift": moved}))
    return signals


def all_signals(evidence: Evidence) -> tuple[list[Signal], dict[tuple[str, int], Template]]:
    templates = mine(evidence.logs)
    signals = (metric_signals(evidence) + log_signals(evidence, templates) + kube_signals(evidence)
               + alert_signals(evidence) + change_signals(evidence) + trace_signals(evidence))
    return signals, templates


def log_records_of(templates: dict[tuple[str, int], Template], service: str) -> list[LogRecord]:
    return [r for (s, _), t in templates.items() if s == service for r in t.records]
