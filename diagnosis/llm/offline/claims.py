"""Claims with exact excerpts: what a service showed, what shows it healthy, its alerts and runbook advice.

The root-cause claim is the localiser's (``localised.root_claim``); these are the claims around it."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

from diagnosis.llm.offline.lexicon import (
    CAUSES,
    CAUSES_HEADING,
    CAUSE_BY_KEY,
    CONDITIONAL_ADVICE,
    Cause,
    HEALTHY_LINE,
    MAX_CLAIMS,
    REMEDIATION_HEADING,
    SYMPTOM_METRIC,
    _iso,
    _number,
    _short,
    _suspicious,
    question_language,
)
from diagnosis.llm.offline.findings import (
    AlertFiring,
    Change,
    Finding,
    HealthyMetrics,
    LogPattern,
    MetricMove,
    NothingWrong,
    QuietLogs,
    RunbookAdvice,
    RunbookMismatch,
)
from diagnosis.llm.offline.observations import Observations
from diagnosis.llm.offline.observed import KnowledgeChunk, Pattern, Profile, Series, _cause_rank


# --------------------------------------------------------------------------- claims


class ClaimBook:
    """Numbered claims with de-duplicated citations."""

    def __init__(self, start: int = 1):
        self.claims: list[dict[str, Any]] = []
        self.next_id = start
        self.cited: set[tuple[str, str]] = set()

    def add(self, finding: Finding, bindings: Iterable[dict[str, str] | None], *, reuse: bool = True) -> dict | None:
        evidence, seen = [], set()
        for b in bindings:
            if not b or not b.get("evidence_excerpt"):
                continue
            key = (b["source_invocation_id"], b["raw_path"])
            if key in seen or (not reuse and key in self.cited):
                continue
            seen.add(key)
            evidence.append(b)
        if not evidence or len(self.claims) >= MAX_CLAIMS:
            return None
        self.cited |= seen
        claim = {"claim_id": f"c{self.next_id}", "statement": finding.statement(), "evidence": evidence}
        self.next_id += 1
        self.claims.append(claim)
        return claim



def _series_finding(s: Series) -> MetricMove:
    if s.direction == "changed":
        return MetricMove(s.name, s.service, "changed", f"from {_number(s.baseline)} to {_number(s.last)} at {_iso(s.onset)}.")
    if s.direction == "saturated" and s.limit is not None:
        detail = f"reached its limit {s.limit.name}={_number(s.limit.last)} (peak {_number(s.peak)}, baseline {_number(s.baseline)})"
    elif s.direction == "down":
        detail = f"fell from baseline {_number(s.baseline)} to {_number(s.trough)}"
    else:
        detail = f"rose from baseline {_number(s.baseline)} to {_number(s.peak)}"
    return MetricMove(s.name, s.service, s.direction or "up", f"{detail}, starting {_iso(s.onset)}.")


def _pattern_finding(p: Pattern) -> LogPattern:
    return LogPattern(p.service, str(p.count), p.level, f"line{'s' if p.count != 1 else ''} like "
                      f"\"{_short(p.first.message, 140)}\", first at {p.first.timestamp or '?'}.")


def alert_claims(obs: Observations, services: list, book: ClaimBook) -> None:
    """The firing and pending alerts of these services (not every alert the backend knows)."""
    for alert in sorted(obs.alerts, key=lambda a: a.priority):
        if alert.service in services and alert.state in ("firing", "pending"):
            book.add(AlertFiring(alert.name, alert.state, alert.service, f" since {alert.active_at}: {alert.summary}"),
                     [alert.binding()], reuse=False)


def top_patterns(profile: Profile) -> list[Pattern]:
    """The dominant ERROR and WARN shapes, plus the first one naming the service's main cause."""
    chosen: list[Pattern] = []
    for levels in (("ERROR", "FATAL"), ("WARN",)):
        group = [p for p in profile.patterns if p.level in levels]
        if group:
            chosen.append(max(group, key=lambda p: (p.count, -(p.first.ts or 0))))
    cause = profile.dominant_cause()
    if cause is not None:
        cued = [p for p in profile.problem_patterns if cause.key in p.causes and p not in chosen]
        if cued:
            chosen.append(min(cued, key=lambda p: p.first.ts or 0))
    return chosen


def service_claims(profile: Profile | None, book: ClaimBook) -> None:
    """The service's most significant metric moves and its dominant error and warning shapes."""
    if profile is None:
        return
    for series in profile.anomalies[:3]:
        book.add(_series_finding(series), [series.binding()], reuse=False)
    for series in profile.series:
        if series.direction == "changed":
            book.add(_series_finding(series), [series.binding()], reuse=False)
    for pattern in top_patterns(profile):
        book.add(_pattern_finding(pattern), [pattern.first.binding()], reuse=False)


def healthy_claims(obs: Observations, symptoms: list[str], book: ClaimBook, conclude: bool = True) -> str:
    """What shows these services healthy: metrics near baseline, quiet logs, a change nothing followed;
    with ``conclude``, the no-anomaly finding first."""
    services = [s for s in symptoms if s in obs.profiles]
    first: list[dict[str, str]] = []
    for service in services:
        profile = obs.profiles[service]
        ordered = sorted(profile.series, key=lambda s: (0 if SYMPTOM_METRIC.search(s.name) else 1, s.index))[:3]
        if ordered:
            book.add(HealthyMetrics(service, ", ".join(s.name for s in ordered)),
                     [s.binding() for s in ordered])
            first.append(ordered[0].binding())
        if profile.lines:
            info = [l for l in profile.lines if l.level not in ("ERROR", "FATAL", "WARN")]
            healthy = [l for l in info if HEALTHY_LINE.search(l.message)] or info
            warnings = sum(1 for l in profile.lines if l.level == "WARN")
            if healthy:
                line = healthy[-1]
                quiet = "no ERROR or WARN lines" if not warnings else "no ERROR lines"
                routine = f" ({warnings} routine WARN line{'s' if warnings != 1 else ''})" if warnings else ""
                book.add(QuietLogs(service, quiet, str(len(profile.lines)),
                                   f"{routine}; for example \"{_short(line.message, 100)}\"."), [line.binding()])
                first.append(line.binding())
        for change in profile.changes[-1:]:
            book.add(Change(service, change.timestamp, f"\"{_short(change.message, 140)}\" (no anomaly followed it)."),
                     [change.binding()])
    if first and conclude:
        book.claims.insert(0, {
            "claim_id": "c0", "evidence": first[:2],
            "statement": NothingWrong(", ".join(services)).statement(),
        })
        for i, claim in enumerate(book.claims, start=1):
            claim["claim_id"] = f"c{i}"
        book.next_id = len(book.claims) + 1
    return f"No anomaly found for {', '.join(services)}: nothing wrong was found (metrics at baseline, no error lines, no firing alert)."


def _chunk_causes(chunk: KnowledgeChunk) -> Counter:
    counts: Counter = Counter()
    for _heading, line in chunk.lines():
        for cause in CAUSES:
            if cause.matches_text(line):
                counts[cause.key] += 1
    return counts


def runbook_claims(obs: Observations, root: str, symptoms: list[str], cause: Cause | None, book: ClaimBook,
                   language: str) -> None:
    """The remediation lines of the runbooks about this kind of fault, and a runbook that blames another."""
    if cause is None:
        return
    services = [s for s in {root, *symptoms} if s]
    # A runbook is about this incident when a section of it seen in this run names the cause; its
    # remediation section then applies even if that section does not name it again.
    about_cause = {c.path for c in obs.knowledge if cause.matches_text(f"{c.title}\n{c.content}")}
    about_root = {c.path for c in obs.knowledge if root and root in f"{c.title}\n{c.content}"}
    scored: list[tuple[float, KnowledgeChunk, str]] = []
    for chunk in obs.knowledge:
        counts = _chunk_causes(chunk)
        if chunk.path not in about_cause:
            continue  # a runbook that never mentions this kind of failure has no advice for it
        for position, (heading, line) in enumerate(chunk.lines()):
            score = (3 if REMEDIATION_HEADING.search(heading) else 0) + (2 if cause.matches_text(line) else 0)
            if root in line:
                score += 1
            elif any(s in line for s in services):
                score -= 2  # advice about the service that only shows the symptom
            score -= 0.05 * position  # runbooks list the first thing to do first
            score += 1 + (1 if chunk.path in about_root else 0)
            score += 1 if question_language(line) == language else 0  # advice the reader can read as is
            if counts and not counts.get(cause.key):
                score -= 3  # a section about another kind of failure
            condition = CONDITIONAL_ADVICE.match(line)
            if condition and not cause.matches_text(condition.group(1)):
                score -= 3  # "If X: do Y" for an X that is not what happened here
            if REMEDIATION_HEADING.search(heading) and not _suspicious(line):
                scored.append((score, chunk, line))
    used: Counter = Counter()
    for score, chunk, line in sorted(scored, key=lambda x: (-x[0], x[1].invocation_id, x[1].index)):
        key = f"{chunk.invocation_id}#{chunk.index}"
        if score < 4 or used[key] >= 2 or sum(used.values()) >= 3:
            continue
        used[key] += 1
        book.add(RunbookAdvice(chunk.title, _short(line, 200)), [chunk.binding(line)])
    _runbook_mismatch(obs, [root, *symptoms], cause, book)


STEP_HEADING = re.compile(r"step|procedure|how|runbook|操作|步骤|流程|处置", re.IGNORECASE)
MAX_PROCEDURE_STEPS = 3


def procedure_claims(obs: Observations, subject: list[str], book: ClaimBook, language: str) -> str | None:
    """A how-to question's answer: the steps of the runbook that best fits it, quoted line by line. The best
    fit is the first retrieved runbook (retrieval ranks by the question) that names an asked service (the first
    one when none is asked about); its lines under a steps heading come first, in their order. Returns the
    runbook's title, or None when no retrieved runbook fits."""
    runbooks = [c for c in obs.knowledge if c.source_type != "case"] or list(obs.knowledge)
    if not runbooks:
        return None
    chunk = next((c for c in runbooks if any(s and s in f"{c.title}\n{c.content}" for s in subject)),
                 None if subject else runbooks[0])
    if chunk is None:  # the asked service's runbook was not retrieved: another service's steps are no answer
        return None
    lines = list(chunk.lines())
    steps = [line for heading, line in lines if STEP_HEADING.search(heading)] or [line for _h, line in lines]
    for line in [line for line in steps if not _suspicious(line)][:MAX_PROCEDURE_STEPS]:
        book.add(RunbookAdvice(chunk.title, _short(line, 200)), [chunk.binding(line)])
    return chunk.title


def _runbook_mismatch(obs: Observations, involved: list[str], cause: Cause, book: ClaimBook) -> None:
    """A runbook that blames another cause whose own metric is flat here: say so, with both citations."""
    services = [s for s in dict.fromkeys(involved) if s in obs.profiles]
    documents: dict[str, Counter] = {}
    for chunk in obs.knowledge:
        documents.setdefault(chunk.path, Counter()).update(_chunk_causes(chunk))
    for chunk in obs.knowledge:
        counts = documents[chunk.path]
        if not counts or counts.get(cause.key):
            continue  # the runbook also knows the cause found here: no contradiction
        other = CAUSE_BY_KEY[max(counts, key=lambda k: (counts[k], -_cause_rank(k)))]
        flat = [s for svc in services for s in obs.profiles[svc].series if other.watches(s.name) and s.direction is None]
        line = next((l for h, l in chunk.lines()
                     if other.matches_text(l) and CAUSES_HEADING.search(h) and not _suspicious(l)), None)
        if flat and line:
            s = flat[0]
            book.add(RunbookMismatch(chunk.title, other.key, s.name, s.service, f" ({_short(s.description, 120)})."),
                     [chunk.binding(line), s.binding()])
            return
