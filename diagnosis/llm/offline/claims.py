"""Claims with exact excerpts, and the follow-up queries the first findings call for."""

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
    KNOWLEDGE_TOP_K,
    LOG_LIMIT,
    MAX_CLAIMS,
    MAX_FOLLOW_UP_SERVICES,
    REMEDIATION_HEADING,
    SERVICE_IN_TEXT,
    SERVICE_SUFFIX,
    SYMPTOM_METRIC,
    _canonical,
    _is_id_like,
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
    RootCause,
    RunbookAdvice,
    RunbookMismatch,
)
from diagnosis.llm.offline.observations import (
    KnowledgeChunk,
    Observations,
    Pattern,
    Profile,
    Series,
    _cause_rank,
)
from diagnosis.llm.offline.hypotheses import (
    Diagnosis,
    _alert_priority,
    _named_symptoms,
    alerting_services,
)


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


def build_claims(obs: Observations, found: Diagnosis, book: ClaimBook, language: str = "en") -> str:
    """Claims for a diagnosis, most important first; returns the summary."""
    if found.nothing_wrong:
        return _healthy_claims(obs, found, book)
    if found.undetermined:
        _healthy_claims(obs, found, book, conclude=False)
        return (f"The question states a symptom of {', '.join(found.symptoms)}, but the telemetry of this run shows no "
                "anomaly that explains it: undetermined.")
    if found.root is None:
        for service in found.symptoms or obs.queried:
            _service_claims(obs.profiles.get(service), book)
        return "No service named in the question returned telemetry; nothing could be diagnosed."
    _root_claim(obs, found, book)
    # Only what this investigation looked at: the default demo world (or a real Alertmanager) also
    # returns the alerts of unrelated services.
    order = [s for s in dict.fromkeys([found.root, *found.symptoms, *obs.queried]) if obs.has(s)]
    for service in order:
        _service_claims(obs.profiles.get(service), book)
    if found.trigger is not None:
        t = found.trigger
        book.add(Change(t.service, t.timestamp, f"\"{_short(t.message, 160)}\"."), [t.binding()], reuse=False)
    alert_claims(obs, [found.root, *found.symptoms, *order], book)
    _runbook_claims(obs, found, book, language)
    cause = found.cause.label_en if found.cause else "unclassified failure"
    affected = [s for s in found.symptoms if s != found.root]
    return (f"Root cause: {found.root} — {cause}" + (f"; it explains the failures of {', '.join(affected)}" if affected else "")
            + ".")


def alert_claims(obs: Observations, services: list, book: ClaimBook) -> None:
    """The firing and pending alerts of these services (not every alert the backend knows)."""
    for alert in sorted(obs.alerts, key=_alert_priority):
        if alert.service in services and alert.state in ("firing", "pending"):
            book.add(AlertFiring(alert.name, alert.state, alert.service, f" since {alert.active_at}: {alert.summary}"),
                     [alert.binding()], reuse=False)


def _root_claim(obs: Observations, found: Diagnosis, book: ClaimBook) -> None:
    cause = found.cause
    profile = obs.profiles.get(found.root or "", Profile(found.root or ""))
    bindings: list[dict[str, str] | None] = []
    if found.fallback_line is not None:
        bindings.append(found.fallback_line.binding())
    if cause is not None:
        cues = profile.cue_lines(cause)
        bindings.append(cues[0].binding() if cues else None)
        series = profile.cause_series(cause)
        bindings.append(series[0].binding() if series else None)
        bindings += [line.binding() for line in cues[1:]]
    if found.neighbour_series is not None:
        bindings.append(found.neighbour_series.binding())
    if found.node_series is not None:
        bindings.append(found.node_series.binding())
    if found.trigger is not None:
        bindings.append(found.trigger.binding())
    affected = [s for s in found.symptoms if s != found.root]
    for service in affected:
        caller = obs.profiles.get(service)
        if caller is None:
            continue
        if found.root in caller.dependency_lines:
            bindings.append(caller.dependency_lines[found.root].binding())
        elif cause is not None and caller.cue_line(cause) is not None:
            bindings.append(caller.cue_line(cause).binding())
        if found.via == "neighbour":
            starving = [s for s in caller.anomalies if cause and cause.matches_series(s.name, s.direction)]
            bindings.append(starving[0].binding() if starving else None)
    # The hop in between: a queried service whose errors name the root (the lead that was followed).
    hops = [p.dependency_lines[found.root] for p in obs.profiles.values()
            if p.service not in affected and found.root in p.dependency_lines]
    bindings += [line.binding() for line in hops[:1]]
    impact = _impact_series(obs, affected or [found.root or ""])
    bindings.append(impact.binding() if impact else None)
    bindings = [b for b in bindings if b]
    if len(bindings) < 2:  # make sure the claim cites what the service itself showed
        bindings += [s.binding() for s in profile.anomalies[:2]] + [p.first.binding() for p in _top_patterns(profile)]
    alerts = [a for a in sorted(obs.alerts, key=_alert_priority) if a.service in (found.root, *affected)]
    if alerts:
        bindings.append(alerts[0].binding())
    label = cause.label_en if cause else "unclassified failure"
    book.add(RootCause(found.root or "", cause.key if cause else "unclassified", label, ", ".join(affected),
                       _short(found.trigger.message, 140) if found.trigger is not None else "",
                       _short(found.fallback_line.message, 160) if found.fallback_line is not None else ""), bindings[:8])


def _impact_series(obs: Observations, services: list[str]) -> Series | None:
    for service in services:
        profile = obs.profiles.get(service)
        if profile is None:
            continue
        symptom = [s for s in profile.anomalies if SYMPTOM_METRIC.search(s.name)] or profile.anomalies
        if symptom:
            return symptom[0]
    return None


def _top_patterns(profile: Profile) -> list[Pattern]:
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


def _service_claims(profile: Profile | None, book: ClaimBook) -> None:
    """The service's most significant metric moves and its dominant error and warning shapes."""
    if profile is None:
        return
    for series in profile.anomalies[:3]:
        book.add(_series_finding(series), [series.binding()], reuse=False)
    for series in profile.series:
        if series.direction == "changed":
            book.add(_series_finding(series), [series.binding()], reuse=False)
    for pattern in _top_patterns(profile):
        book.add(_pattern_finding(pattern), [pattern.first.binding()], reuse=False)


def _healthy_claims(obs: Observations, found: Diagnosis, book: ClaimBook, conclude: bool = True) -> str:
    services = [s for s in found.symptoms if s in obs.profiles]
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


def _runbook_claims(obs: Observations, found: Diagnosis, book: ClaimBook, language: str) -> None:
    cause = found.cause
    if cause is None:
        return
    services = [s for s in {found.root, *found.symptoms} if s]
    # A runbook is about this incident when a section of it seen in this run names the cause; its
    # remediation section then applies even if that section does not name it again.
    about_cause = {c.path for c in obs.knowledge if cause.matches_text(f"{c.title}\n{c.content}")}
    about_root = {c.path for c in obs.knowledge if found.root and found.root in f"{c.title}\n{c.content}"}
    scored: list[tuple[float, KnowledgeChunk, str]] = []
    for chunk in obs.knowledge:
        counts = _chunk_causes(chunk)
        if chunk.path not in about_cause:
            continue  # a runbook that never mentions this kind of failure has no advice for it
        for position, (heading, line) in enumerate(chunk.lines()):
            score = (3 if REMEDIATION_HEADING.search(heading) else 0) + (2 if cause.matches_text(line) else 0)
            if found.root in line:
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
    _runbook_mismatch(obs, found, book)


def _runbook_mismatch(obs: Observations, found: Diagnosis, book: ClaimBook) -> None:
    """A runbook that blames another cause whose own metric is flat here: say so, with both citations."""
    cause = found.cause
    services = [s for s in dict.fromkeys([found.root, *found.symptoms]) if s in obs.profiles]
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


# --------------------------------------------------------------------------- follow-up queries


def follow_up_calls(obs: Observations, named: list[str], offered: set[str], question: str,
                    frontier: list[str] | None = None) -> list[tuple[str, dict]]:
    """Where the first results point: a dependency named in errors, the node of a CPU-starved service,
    the database of a service with database-side symptoms, the services of firing alerts.

    With a ``frontier`` (the services the previous round queried), only the next hop: the leads named by
    those of them that show trouble themselves (a multi-hop cause)."""
    wanted: list[tuple[str, dict]] = []
    queried = {s.lower() for s in obs.queried}
    services: list[str] = []

    def want_service(name: str) -> None:
        if name and name.lower() not in queried and name not in services:
            services.append(name)

    if frontier is not None:
        for service in frontier:
            profile = obs.profiles.get(service)
            if profile is not None and profile.has_signal:
                for dep, _n in profile.dependencies.most_common(1):
                    want_service(dep)
        hop = [(tool, {"service": s, "limit": LOG_LIMIT} if tool == "query_logs" else {"service": s})
               for s in services[:1] for tool in ("query_logs", "query_metrics")]
        return [(tool, args) for tool, args in hop if tool in offered and _canonical(tool, args) not in obs.calls]

    symptoms = _named_symptoms(obs, named)
    if not named and not symptoms:
        # No service in the question: follow the one alert it most likely means, not every alert firing.
        for service in alerting_services(obs, question)[:1]:
            want_service(service)
    # Leads: the dependencies the symptoms' error (or slow) lines name.
    for service in symptoms:
        profile = obs.profiles.get(service)
        if profile is None:
            continue
        for dep, _n in profile.dependencies.most_common(2):
            want_service(dep)
        noisy = CAUSE_BY_KEY["noisy_neighbour_cpu"]
        if any(noisy.matches_series(s.name, s.direction) for s in profile.anomalies):
            for node in dict.fromkeys(s.labels.get("node") for s in profile.series if s.labels.get("node")):
                if node.lower() not in queried:
                    wanted.append(("query_logs", {"service": node, "limit": LOG_LIMIT}))
                    wanted.append(("query_metrics", {"query": f'{{node="{node}"}}'}))
        cause = profile.dominant_cause()
        if cause is not None and cause.remote and not profile.dependencies:
            for candidate in _runbook_dependencies(obs, service, cause):
                want_service(candidate)
            if cause.key in ("db_replication_lag", "slow_downstream_dependency") and not services:
                # Naming convention as a last resort: the service's own database.
                stem = re.sub(r"-(?:service|svc|api)$", "", service)
                if stem != service:
                    want_service(f"{stem}-db")
    for service in services[:MAX_FOLLOW_UP_SERVICES]:
        wanted.append(("query_logs", {"service": service, "limit": LOG_LIMIT}))
        wanted.append(("query_metrics", {"service": service}))
    causes = [obs.profiles[s].dominant_cause() for s in symptoms if s in obs.profiles]
    cause = next((c for c in causes if c is not None), None)
    lookups = sum(1 for call in obs.calls if call.startswith("lookup_knowledge:"))
    if cause is not None and lookups < 2:
        # Ask for what to do, in the reader's language: remediation sections are what the answer needs.
        action = "处置 处理 建议" if question_language(question) == "zh" else "remediation fix"
        terms = " ".join(dict.fromkeys([*(services[:1] or symptoms[:1]), cause.search, action]))
        wanted.append(("lookup_knowledge", {"query": terms, "top_k": KNOWLEDGE_TOP_K + 2}))
    return [(tool, args) for tool, args in wanted if tool in offered and _canonical(tool, args) not in obs.calls]


def _runbook_dependencies(obs: Observations, service: str, cause: Cause) -> list[str]:
    """Services a runbook names on a line about the same kind of failure (where to look next)."""
    found: list[str] = []
    for chunk in obs.knowledge:
        for _heading, line in chunk.lines():
            if not cause.matches_text(line):
                continue
            for match in SERVICE_IN_TEXT.finditer(line):
                name = match.group(1).lower()
                if name != service.lower() and SERVICE_SUFFIX.search(name) and not _is_id_like(name) and name not in found:
                    found.append(name)
    return found


