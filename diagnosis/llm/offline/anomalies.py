"""Metric anomalies and the per-service reading of a profile."""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from typing import Callable

from diagnosis.llm.offline.leads import SLOW_ABSOLUTE_S, duration_s, leads_in
from diagnosis.llm.offline.lexicon import (
    CAUSES,
    CAUSE_BY_KEY,
    CHANGE_PATTERNS,
    DEPENDENCY_CONTEXT,
    GENERIC_HYPHENATED,
    HEALTHY_LINE,
    RATIO_METRIC,
    SATURABLE_METRIC,
    _is_id_like,
    _template,
)
from diagnosis.llm.offline.observed import (
    LogLine,
    Pattern,
    Profile,
    Series,
)


# --------------------------------------------------------------------------- metric anomalies


def _analyse_series(series: Series) -> Series:
    """Baseline (median of the first third), noise, direction of a significant move, onset, severity."""
    values = [v for _, v in series.points]
    head = values[: max(1, len(values) // 3)]
    base = statistics.median(head)
    spread = statistics.pstdev(head) if len(head) > 1 else 0.0
    noise = max(spread, 0.02 * abs(base), 1e-9)
    peak, trough, last = max(values), min(values), values[-1]
    up, down = peak - base, base - trough
    rel_up = up / abs(base) if base else (math.inf if up > 0 else 0.0)
    rel_down = down / abs(base) if base else 0.0
    z_up, z_down = up / noise, down / noise
    is_up = up > 0 and ((z_up >= 6 and rel_up >= 0.25) or (z_up >= 4 and rel_up >= 1.0))
    is_down = down > 0 and ((z_down >= 6 and rel_down >= 0.25) or (z_down >= 4 and rel_down >= 0.6))
    series.baseline, series.noise, series.peak, series.trough, series.last = base, noise, peak, trough, last
    saturated = False
    if RATIO_METRIC.search(series.name) and SATURABLE_METRIC.search(series.name):
        scale = 100.0 if series.name.lower().endswith("_percent") else 1.0
        saturated = peak / scale >= 0.95 and base / scale < 0.85
    if saturated:
        series.direction = "saturated"
    elif is_up and (not is_down or z_up >= z_down):
        series.direction = "up"
    elif is_down:
        series.direction = "down"
    elif spread == 0 and last != base and values.count(last) >= 2:
        series.direction = "changed"  # a flat series that stepped to a new level: a deploy, a config value
    if series.direction in ("up", "saturated"):
        series.onset = _onset(series.points, lambda v: v - base, max(3 * noise, 0.2 * up))
        series.severity = min(z_up, 60) / 10 + min(rel_up, 10) + (3 if saturated else 0)
    elif series.direction == "down":
        series.onset = _onset(series.points, lambda v: base - v, max(3 * noise, 0.2 * down))
        series.severity = min(z_down, 60) / 10 + min(rel_down, 10)
    elif series.direction == "changed":
        series.onset = next((t for t, v in series.points if v != base), None)
        series.severity = 0.5
    return series


def _onset(points: list[tuple[float, float]], deviation: Callable[[float], float], threshold: float) -> float | None:
    return next((t for t, v in points if deviation(v) > threshold), None)


# --------------------------------------------------------------------------- per-service reading

# Durations that are not work taking long: start-up banners ("Started App in 4.5 seconds"), retry back-offs,
# schedules and expiries ("retrying in 5s", "next run in 10 minutes", "token expires in 300 s").
NOT_A_WAIT = re.compile(r"\bstart(?:ed|ing|up)\b|\binitiali[sz]ed\b|启动|\bretr(?:y|ying|ies)\b|back-?off|\bsleep|"
                        r"\binterval\b|\bevery\b|\bnext (?:run|attempt|check)\b|\bexpires? in\b|\bttl\b|重试",
                        re.IGNORECASE)


def _analyse_profile(profile: Profile, slow_threshold_s: float = SLOW_ABSOLUTE_S) -> None:
    groups: dict[tuple[str, str], list[LogLine]] = {}
    dns = CAUSE_BY_KEY["dns_failure"]
    for line in sorted(profile.lines, key=lambda l: (l.ts or 0, l.index)):
        groups.setdefault((line.level, _template(line.message)), []).append(line)
        if any(p.search(line.message) for p in CHANGE_PATTERNS):
            profile.changes.append(line)
        took = duration_s(line.message)
        slow = took is not None and took >= slow_threshold_s and not NOT_A_WAIT.search(line.message)
        if slow:
            profile.slow_lines.append(line)
        if line.level in ("ERROR", "FATAL", "WARN") or slow:
            refs = [lead.service for lead in leads_in(line.message, profile.service, dns_failure=dns.matches_text(line.message))]
            for ref in dict.fromkeys(refs + _dependencies(line.message, profile.service)):
                profile.dependencies[ref] += 1
                profile.dependency_lines.setdefault(ref, line)
    for (level, template), lines in groups.items():
        causes = tuple(c.key for c in CAUSES if c.matches_text(lines[0].message))
        profile.patterns.append(Pattern(profile.service, level, template, lines, causes))
    info_credit: Counter = Counter()
    for pattern in profile.patterns:
        for key in pattern.causes:
            if pattern.level in ("ERROR", "FATAL", "WARN"):
                weight = 2.0 if pattern.level in ("ERROR", "FATAL") else 1.5
                profile.causes[key] += weight + 0.25 * min(pattern.count, 8)
            elif info_credit[key] < 1.0 and not HEALTHY_LINE.search(pattern.first.message):
                # Context lines count a little, however many there are; "replica lag 0 s, healthy" not at all.
                info_credit[key] += 0.5
                profile.causes[key] += 0.5
    for series in profile.series:
        for cause in CAUSES:
            if cause.matches_series(series.name, series.direction):
                profile.causes[cause.key] += 2.0 + (1.0 if series.direction == "saturated" else 0.0)
    for alert in profile.firing:
        for cause in CAUSES:
            if cause.matches_text(alert.text):
                profile.causes[cause.key] += 1.0
    # Routine warnings (a replayed idempotency key) do not date an incident; errors and cued warnings do.
    starts = [p.first.ts for p in profile.problem_patterns
              if p.first.ts is not None and (p.level != "WARN" or p.causes)]
    starts += [s.onset for s in profile.anomalies if s.onset is not None]
    if profile.slow and profile.slow_lines[0].ts is not None:
        starts.append(profile.slow_lines[0].ts)
        if profile.dependencies:
            # Requests that wait on a dependency they name: slowness that comes from downstream.
            profile.causes["slow_downstream_dependency"] += 1.0
    profile.onset = min(starts) if starts else None


def _dependencies(message: str, own: str) -> list[str]:
    refs = []
    for pattern in DEPENDENCY_CONTEXT:
        for match in pattern.finditer(message):
            name = match.group("s").lower()
            if name != own.lower() and not name.startswith(own.lower() + "-") and not _is_id_like(name) \
                    and name not in GENERIC_HYPHENATED and name not in refs:
                refs.append(name)
    return refs


