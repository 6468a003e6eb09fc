"""The diagnosis: from observations to a root-cause hypothesis, following dependencies and changes."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from diagnosis.llm.offline.leads import TERMINATION
from diagnosis.llm.offline.taxonomy import LAST_ERROR
from diagnosis.llm.offline.lexicon import (
    CAUSES,
    CAUSE_BY_KEY,
    Cause,
    ONSET_TOLERANCE_S,
    SCHEDULED_POD,
    _workload,
)
from diagnosis.llm.offline.observations import (
    Alert,
    LogLine,
    Observations,
    Profile,
    Series,
)


# --------------------------------------------------------------------------- the diagnosis


@dataclass
class Diagnosis:
    """What the evidence says: a root cause (service + category) or that nothing is wrong."""

    symptoms: list[str]
    root: str | None = None
    cause: Cause | None = None
    via: str = ""  # how the root was reached: self | dependency | same-cause | neighbour
    trigger: LogLine | None = None
    nothing_wrong: bool = False
    undetermined: bool = False  # the question states a symptom the evidence does not explain
    fallback_line: LogLine | None = None  # the last error before the failure, when no category matched
    neighbour_line: LogLine | None = None
    neighbour_series: Series | None = None
    node_series: Series | None = None


def _named_symptoms(obs: Observations, named: list[str]) -> list[str]:
    """The services the question is about: those it names, else those queried after the alerts."""
    lowered = {p.lower(): p for p in obs.profiles}
    symptoms = [lowered[n.lower()] for n in named if n.lower() in lowered]
    if symptoms or named:
        return symptoms
    return [s for s in obs.queried if obs.has(s)]


def alerting_services(obs: Observations, question: str) -> list[str]:
    """Firing services: those whose name shares a word with the question first, then those the runbooks
    retrieved for the question name (a Chinese question names no ASCII service), then by severity and age."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", question or "")}
    retrieved = " ".join(f"{c.title} {c.content}" for c in obs.knowledge)
    ranked = sorted((a for a in obs.alerts if a.state == "firing" and a.service),
                    key=lambda a: (-len(words & set(a.service.lower().split("-"))), -retrieved.count(a.service),
                                   _alert_priority(a)))
    return list(dict.fromkeys(a.service for a in ranked))


def _alert_priority(alert: Alert) -> tuple:
    severity = {"critical": 0, "page": 0, "error": 1, "warning": 2}.get(alert.labels.get("severity", "").lower(), 3)
    return (0 if alert.state == "firing" else 1, severity, alert.active_at)


def diagnose(obs: Observations, named: list[str]) -> Diagnosis:
    symptoms = _named_symptoms(obs, named)
    diagnosis = Diagnosis(symptoms=symptoms)
    if not symptoms:
        return diagnosis
    scope = set(symptoms) | set(obs.queried)
    if not any(obs.profiles[s].has_signal for s in scope if s in obs.profiles):
        # A question that states a symptom (slow, failing, restarting) never gets "healthy": what the
        # analyser cannot see is undetermined, with next steps.
        diagnosis.undetermined = obs.symptom.stated
        diagnosis.nothing_wrong = not obs.symptom.stated
        return diagnosis
    votes: Counter = Counter()
    reasons: dict[str, tuple[str, Diagnosis]] = {}
    for symptom in symptoms:
        if not obs.profiles[symptom].has_signal:
            continue
        found = _trace_root(obs, symptom, symptoms, depth=0)
        votes[found.root] += 1
        reasons.setdefault(found.root, (symptom, found))
    if not votes:  # the named services are quiet but something they were queried with is not
        noisy = [s for s in scope if s in obs.profiles and obs.profiles[s].has_signal]
        found = _trace_root(obs, noisy[0], symptoms, depth=0)
        votes[found.root] += 1
        reasons[found.root] = (noisy[0], found)
    root = max(votes, key=lambda r: (votes[r], -(obs.profiles[r].onset or 0) if r in obs.profiles else 0))
    found = reasons[root][1]
    found.symptoms = symptoms
    if found.cause is None:
        found.cause = _root_cause_category(obs, found, reasons[root][0])
    if found.cause is None:
        found.fallback_line = last_error(obs, found)
        found.cause = LAST_ERROR if found.fallback_line is not None else None
    found.trigger = _trigger(obs, found)
    return found


def last_error(obs: Observations, found: Diagnosis) -> LogLine | None:
    """The generic fallback: the last ERROR/FATAL line of the root before it terminated, else before the
    symptoms began. An exit notice ("exiting with code 1") is the termination, not its cause."""
    profile = obs.profiles.get(found.root or "")
    if profile is None:
        return None
    errors = sorted((l for l in profile.lines if l.level in ("ERROR", "FATAL") and l.ts is not None),
                    key=lambda l: (l.ts, l.tool != "query_logs", l.index))
    if not errors:
        return None
    ends = [l.ts for l in profile.lines if l.ts is not None and TERMINATION.search(l.message)]
    if ends:
        reference = max(ends)
    else:
        starts = [obs.profiles[s].onset for s in (found.root, *found.symptoms) if s in obs.profiles and obs.profiles[s].onset]
        reference = (min(starts) if starts else errors[-1].ts) + ONSET_TOLERANCE_S
    before = [l for l in errors if l.ts <= reference] or errors[:1]
    causes = [l for l in before if not TERMINATION.search(l.message)]
    return (causes or before)[-1]


def _trace_root(obs: Observations, service: str, symptoms: list[str], depth: int) -> Diagnosis:
    profile = obs.profiles[service]
    cause = profile.dominant_cause()
    neighbour = _noisy_neighbour(obs, profile)
    if neighbour is not None:
        return neighbour
    onset = profile.onset
    for dep, _count in profile.dependencies.most_common():
        if not obs.has(dep) or depth >= 2:
            continue
        other = obs.profiles[dep]
        if (other.has_signal or _changed_before(other, onset)) and _not_later(other.onset, onset):
            deeper = _trace_root(obs, dep, symptoms, depth + 1)
            if deeper.root != dep or deeper.via != "self":
                return deeper
            return Diagnosis(symptoms, root=dep, via="dependency")
    if cause is not None:
        # A service the caller did not name but that shows the same trouble first: the caller's
        # errors are the echo (stale reads from a lagging replica, a full shared cache).
        echoed = [other for other in obs.profiles.values()
                  if other.service != service and other.service not in symptoms and obs.has(other.service)
                  and service not in other.dependencies  # a caller that names this service reports it, not causes it
                  and _own_cause_score(other, cause) > 0 and _not_later(other.onset, onset)]
        if echoed:
            first = min(echoed, key=lambda p: p.onset if p.onset is not None else math.inf)
            return Diagnosis(symptoms, root=first.service, via="same-cause")
    return Diagnosis(symptoms, root=service, via="self")


def _changed_before(profile: Profile, onset: float | None, window_s: float = 1800) -> bool:
    """A quiet dependency that shipped a change (a rollout, a config value) shortly before its caller broke."""
    if onset is None:
        return False
    times = [c.ts for c in profile.changes if c.ts is not None]
    times += [s.onset for s in profile.series if s.direction == "changed" and s.onset is not None]
    return any(onset - window_s <= t <= onset + 60 for t in times)


def _own_cause_score(profile: Profile, cause: Cause) -> float:
    score = sum(1.0 for p in profile.problem_patterns if cause.key in p.causes)
    return score + sum(1.0 for s in profile.anomalies if cause.matches_series(s.name, s.direction))


def _not_later(candidate: float | None, reference: float | None) -> bool:
    return candidate is None or reference is None or candidate <= reference + ONSET_TOLERANCE_S


def _noisy_neighbour(obs: Observations, profile: Profile) -> Diagnosis | None:
    """A service starved of CPU on a saturated node: the workload that took the node's CPU is the cause."""
    noisy = CAUSE_BY_KEY["noisy_neighbour_cpu"]
    starving = [s for s in profile.anomalies if noisy.matches_series(s.name, s.direction)]
    if not starving:
        return None
    for node in dict.fromkeys(s.labels.get("node") for s in profile.series if s.labels.get("node")):
        on_node = [s for s in obs.series if s.labels.get("node") == node or s.service == node]
        node_hot = [s for s in on_node if s.service == node and s.anomalous and s.direction in ("up", "saturated")]
        users = [s for s in on_node if s.service not in (profile.service, node) and "cpu" in s.name
                 and s.direction in ("up", "saturated")]
        scheduled = []
        for line in obs.profiles.get(node, Profile(node)).lines:
            match = SCHEDULED_POD.search(line.message)
            if match and match.group(2).rstrip(".,;") == node and noisy.matches_text(line.message):
                workload = _workload(match.group(1))
                if workload != profile.service:
                    scheduled.append((workload, line))
        if not (node_hot or users or scheduled):
            continue
        candidates = [s.service for s in sorted(users, key=lambda s: -s.severity)] + [w for w, _ in scheduled]
        root = candidates[0] if candidates else node
        return Diagnosis(
            [], root=root, cause=noisy, via="neighbour",
            neighbour_line=next((line for w, line in scheduled if w == root), scheduled[0][1] if scheduled else None),
            neighbour_series=next((s for s in users if s.service == root), None),
            node_series=max(node_hot, key=lambda s: s.severity) if node_hot else None,
        )
    return None


def _root_cause_category(obs: Observations, found: Diagnosis, symptom: str) -> Cause | None:
    profile = obs.profiles.get(found.root or "")
    if profile is not None and profile.dominant_cause() is not None:
        return profile.dominant_cause()
    caller = obs.profiles.get(symptom)
    if caller is not None and found.root in caller.dependency_lines:
        line = caller.dependency_lines[found.root]
        keys = [c for c in CAUSES if c.matches_text(line.message)]
        if keys:
            return keys[0]
    return caller.dominant_cause() if caller is not None else None


def _trigger(obs: Observations, found: Diagnosis) -> LogLine | None:
    """The latest change (deploy, config push, migration, batch start) shortly before the trouble began."""
    if found.via == "neighbour" and found.neighbour_line is not None:
        return found.neighbour_line
    profile = obs.profiles.get(found.root or "")
    if profile is None:
        return None
    starts = [obs.profiles[s].onset for s in found.symptoms if s in obs.profiles and obs.profiles[s].onset]
    onset = profile.onset or (min(starts) if starts else None)
    before = [c for c in profile.changes if c.ts is not None and (onset is None or c.ts <= onset + 60)]
    if not before:
        return None
    # Prefer a change that also names the cause (a config push disabling the cache, an index drop).
    if found.cause is not None:
        named = [c for c in before if found.cause.matches_text(c.message)]
        if named:
            return named[-1]
    return before[-1]


