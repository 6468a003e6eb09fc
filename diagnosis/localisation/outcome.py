"""The localisation of one run: a decisive root cause, undetermined (and why), nothing wrong, or no data.

``localise(results, subject)`` reads the run's tool results, computes the signals, builds the graph,
explains candidates away and ranks the roots, then decides honestly:

- ``root_cause`` only when the localisation is decisive: one root ahead of the others (earlier by
  more than the tolerance, or the only one), of a recognised kind, and not pointing at a dependency
  that was never examined or an address nothing resolves;
- ``undetermined`` with the reason and the next checks otherwise;
- ``nothing_wrong`` when nothing deviates beyond baseline noise;
- ``no_data`` when the services asked about returned no telemetry at all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Iterable, Mapping

from diagnosis.localisation.callers_changed import changed_caller, changed_waiter, reroot, rotated_credentials
from diagnosis.localisation.churn import without_rollout_churn
from diagnosis.localisation.collector import collector_paused
from diagnosis.localisation.below import (NextCheck, beyond, errors_point_below, gone_unexplained, limited_by_unnamed,
                                          next_checks, nodes_to_examine, of_its_own, outside_unresolved,
                                          resolver_failed, seen_only_by_callers)
from diagnosis.localisation.graph import Edge, DependencyGraph, build_graph, clients_of, named_in
from diagnosis.localisation.kinds import GENERIC, kind_named, word_votes
from diagnosis.localisation.levels import WARN_OR_WORSE, at_least
from diagnosis.localisation.ranking import (TOLERANCE_S, Candidate, backlog_only, busy_only, cause_kind, candidates_of,
                                           explain, only_waited_for, rank, starved, symptom_only)
from diagnosis.localisation.records import Evidence, Ref, read_evidence
from diagnosis.localisation.log_rates import LOG_LLR, MIN_BASELINE_S, rate_change
from diagnosis.localisation.signals import Signal, all_signals

MIN_ROOT_STRENGTH = 0.45
STEADY_WINDOWS = 3  # a window this many baselines long shows whether error lines keep one pace
KIND_MARGIN = 1.25  # the winning kind's votes over the runner-up's for a decisive kind


@dataclass
class Localisation:
    outcome: str  # root_cause | undetermined | nothing_wrong | no_data
    root: str | None = None
    kind: str | None = None
    onset: float | None = None
    reason: str = ""  # why undetermined: not_separated | kind_ambiguous | dependency_not_examined | dependency_quiet | ...
    candidates: list[Candidate] = field(default_factory=list)
    subject: list[str] = field(default_factory=list)
    without_data: list[str] = field(default_factory=list)
    path: list[Edge] = field(default_factory=list)  # subject -> ... -> root, the edges that link them
    next_checks: list[NextCheck] = field(default_factory=list)
    context: list[Signal] = field(default_factory=list)  # changes and alerts, never a cause by themselves
    graph: DependencyGraph = field(default_factory=DependencyGraph)
    declared: Ref | None = None  # the Service record that declares the root (what links an address to its name)

    def edges_from(self, services: Iterable[str]) -> list[Edge]:
        """The dependencies of these services, in the order given."""
        return [e for s in dict.fromkeys(services) for e in self.graph.dependencies(s)]

    @property
    def decisive(self) -> bool:
        return self.outcome == "root_cause"

    def top(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def evidence_refs(self, limit: int = 4) -> list[Ref]:
        top = self.top()
        if top is None:
            return []
        refs = [r for s in top.evidence() for r in s.refs]
        return list(dict.fromkeys(refs))[:limit]

    def ranking(self, limit: int = 5, refs_per_candidate: int = 4) -> list[dict[str, Any]]:
        """The ranked candidates as plain data, the one shape that leaves the localiser (the diagnosis's
        ``candidates``, the ``rank_root_causes`` tool): roots first, each with the records that show it
        (invocation id, tool and JSON path; never the text, which readers take from the records)."""
        out = []
        for position, candidate in enumerate(self.candidates[:limit], start=1):
            refs = list(dict.fromkeys(r for s in candidate.evidence() for r in s.refs))[:refs_per_candidate]
            out.append({
                "rank": position,
                "service": candidate.service,
                "kind": candidate.kind,
                "onset": candidate.onset,
                "strength": round(candidate.strength, 3),
                "explainedBy": candidate.explained_by,
                "explains": list(candidate.explains),
                "evidence": [{"invocationId": r.invocation_id, "tool": r.tool, "rawPath": r.raw_path} for r in refs],
            })
        return out

    def changes_before(self) -> list[Signal]:
        """Changes on the root in the hour before its onset: "changed at T: what"."""
        if self.root is None or self.onset is None:
            return []
        return [s for s in self.context if s.source == "change" and s.entity == self.root and s.onset is not None
                and self.onset - 3600 <= s.onset <= self.onset + TOLERANCE_S]


def localise(results: Iterable[Mapping[str, Any]], subject: Iterable[str] = ()) -> Localisation:
    with collector_paused():  # see collector.py: the collector alone grows faster than the run
        return localise_evidence(read_evidence(results), subject)


def localise_evidence(evidence: Evidence, subject: Iterable[str] = ()) -> Localisation:
    subject = [s for s in dict.fromkeys(subject) if s]
    signals, templates = all_signals(evidence)
    graph = build_graph(evidence)
    known = evidence.services()
    without = [s for s in subject if s not in known]
    context = [s for s in signals if not s.fault]
    if subject and len(without) == len(subject):
        return Localisation("no_data", subject=subject, without_data=without, context=context, graph=graph,
                            next_checks=[NextCheck("query_logs", {"service": s}, "no telemetry was found") for s in without])
    signals = without_rollout_churn(signals, evidence, graph)
    signals += named_signals(signals, evidence, graph)
    signals += placed_signals(signals, graph)
    candidates = candidates_of(signals)
    for candidate in candidates.values():  # a backlog waits on whoever should drain it: its clients
        if backlog_only(candidate):
            for client, ref in clients_of(candidate.service, evidence):
                graph.add(candidate.service, client, "client", ref)
    explain(candidates, graph)
    ranked = rank(candidates)
    names = known | set(evidence.queried) | set(evidence.addresses) | graph.nodes
    texts = [r.message for r in evidence.logs if r.level in WARN_OR_WORSE] + [s.name for s in evidence.series]
    errors_of = _error_lines(templates)
    for candidate in ranked:
        caller_lines = [ref.excerpt for edge in graph.callers(candidate.service) if edge.via == "log" for ref in edge.refs]
        own_lines = errors_of.get(candidate.service, [])[:6]
        cause_kind(candidate, context, caller_lines, texts, names, own_lines, evidence.external)
    result = Localisation("nothing_wrong", candidates=ranked, subject=subject, without_data=without, context=context,
                          graph=graph)
    # A node is a root only when it explains a workload on it: a busy node alone harms nobody.
    # Nor is a workload that is only busier (`_idle_busy`): it stays in the ranking, after the rest.
    idle_busy = partial(_idle_busy, nodes=graph.nodes)
    ranked.sort(key=idle_busy)
    roots = [c for c in ranked if c.explained_by is None and _strong_enough(c, candidates)
             and (c.service not in graph.nodes or c.explains) and not idle_busy(c)]
    if not roots:
        return _without_root(result, evidence, graph, known, idle_busy)
    top = roots[0]
    if top.service in graph.nodes:
        workload = _pressured_workload(top, candidates, subject)
        if workload is None:
            result.outcome, result.reason = "undetermined", "node_hosts_several"
            return result
        roots[0] = top = _on_its_node(result, workload, top)
    result.root, result.kind, result.onset, result.outcome = top.service, top.kind, top.onset, "root_cause"
    result.path = graph.path(subject, top.service)
    reason = _doubt(top, roots, graph, evidence, candidates, context, subject)
    if reason:
        result.outcome, result.reason = "undetermined", reason
        result.next_checks = next_checks(top, graph, evidence)
    if reason == "dependency_changed":
        _rank_changed_dependencies(result, top, graph, context)
    _to_changed_caller(result, top, reason, candidates, context)
    result.declared = evidence.declarations.get(result.root or "")
    return result


def _to_changed_caller(result: Localisation, top: Candidate, reason: str, candidates: Mapping[str, Candidate],
                       context: list[Signal]) -> None:
    """The root moves to the one caller whose change explains the top (``callers_changed``): credentials it
    rotated that the top refuses, or a quiet dependency it began waiting on right after it changed."""
    rotated = rotated_credentials(top, candidates, context) if reason == "caller_changed" else None
    rotated = rotated or (changed_waiter(top, candidates, context) if reason == "dependency_quiet" else None)
    if rotated is None:
        return
    kind = "change.secret" if reason == "caller_changed" else rotated.kind
    reroot(result.candidates, top, rotated)
    result.root, result.kind, result.onset = rotated.service, kind, rotated.onset
    result.path = result.graph.path(result.subject, rotated.service)
    result.outcome, result.reason, result.next_checks = "root_cause", "", []


def _strong_enough(candidate: Candidate, candidates: Mapping[str, Candidate]) -> bool:
    """Strong enough to be a root: by its own signals, or, faint itself (a few new WARN lines), by a service it
    explains that is: a caller whose errors name it and began no earlier (``ranking.explain``). Its own signal
    must be one of its records, not only what its callers say of it."""
    if candidate.strength >= MIN_ROOT_STRENGTH:
        return True
    own = any(s.source in ("log", "metric", "kube") for s in candidate.faults)
    return own and any(candidates[s].strength >= MIN_ROOT_STRENGTH for s in candidate.explains if s in candidates)


def _error_lines(templates: Mapping[tuple[str, int], Any]) -> dict[str, list[str]]:
    """Each service's error templates' first lines, in template order."""
    lines: dict[str, list[str]] = {}
    for (service, _), template in templates.items():
        if at_least(template.level, "ERROR"):
            lines.setdefault(service, []).append(template.records[0].message)
    return lines


def _without_root(result: Localisation, evidence: Evidence, graph, known: set[str], idle_busy) -> Localisation:
    """No decisive root: candidates that explain each other (a cycle), errors with too little history to judge,
    or errors of the asked services that lead to what no query examined; else nothing wrong."""
    subject = result.subject
    if any(c.strength >= MIN_ROOT_STRENGTH and c.service not in graph.nodes and not idle_busy(c) for c in result.candidates):
        result.outcome, result.reason = "undetermined", "cycle"
    elif _unjudged_errors(evidence, subject):
        result.outcome, result.reason = "undetermined", "no_baseline"
    elif subject:  # "nothing wrong" only where the asked services' errors lead to nothing left unexamined
        reason, checks = errors_point_below(evidence, subject, known)
        if reason:
            result.outcome, result.reason, result.next_checks = "undetermined", reason, checks
    return result


PEER_KINDS = ("network.tls", "network.refused", "network.loss", "network.timeout", "capacity.rate_limit",
              "resource.memory")


def named_signals(signals: list[Signal], evidence: Evidence, graph: DependencyGraph) -> list[Signal]:
    """What callers' errors say about a dependency they name that shows nothing itself: a certificate it
    presents, a port that refuses, a path that drops or a reply that never comes. The dependency gets a
    signal of that kind, citing the caller's line (the evidence names it; it is not observed on it)."""
    faulty = {s.entity for s in signals if s.fault}
    known = evidence.services()
    out = []
    for signal in signals:
        if signal.source != "log" or signal.detail.get("level") not in ("ERROR", "FATAL") or not signal.refs:
            continue
        votes = word_votes(signal.refs[0].excerpt, known)
        kind = max(PEER_KINDS, key=lambda k: votes.get(k, 0))
        if not votes.get(kind):
            continue
        named, _ = named_in(signal.refs[0].excerpt, evidence, known - {signal.entity})
        for service in named[:1]:
            if service not in faulty and service not in graph.nodes:
                out.append(Signal(service, "named", kind, signal.onset, 0.6, list(signal.refs), signal.text,
                                  detail={"caller": signal.entity}))
    return out


def _idle_busy(candidate: Candidate, nodes: set[str]) -> bool:
    """Only busier (its own CPU use rose, below any ceiling), and harming no workload."""
    return busy_only(candidate) and all(e in nodes for e in candidate.explains)


def placed_signals(signals: list[Signal], graph: DependencyGraph) -> list[Signal]:
    """A node short of memory or CPU slows the workloads placed on it, also those that show nothing of their
    own (their callers do). Each such workload gets the node's pressure as a signal, citing the node's series
    (the evidence places it there; it is not observed on it)."""
    faulty = {s.entity for s in signals if s.fault}
    pressure: dict[str, list[Signal]] = {}
    for signal in signals:
        if signal.fault and signal.entity in graph.nodes and signal.source == "metric" \
                and starved(Candidate(signal.entity, [signal], signal.onset, signal.strength)):
            pressure.setdefault(signal.entity, []).append(signal)
    out = []
    for node, shown in pressure.items():
        for edge in graph.dependencies(node):
            if edge.via == "placement" and edge.callee not in faulty and edge.callee not in graph.nodes:
                out += [replace(s, entity=edge.callee, source="placed", strength=0.6 * s.strength,
                                detail={**s.detail, "node": node}) for s in shown]
    return out


def _pressured_workload(node: Candidate, candidates: Mapping[str, Candidate], subject: list[str]) -> Candidate | None:
    """The workload through which a pressured node harms the rest: the one it slows directly, or of several
    the one others are explained by (or the one asked about). None when the evidence cannot tell."""
    direct = [c for c in candidates.values() if c.explained_by == node.service]
    if len(direct) > 1:
        through = {c.explained_by for c in candidates.values()}
        direct = [c for c in direct if c.service in through or c.service in subject]
    return direct[0] if len(direct) == 1 else None


def _on_its_node(result: Localisation, workload: Candidate, node: Candidate) -> Candidate:
    """The workload is the root, of the node-pressure kind, with its node's series as its evidence: what
    callers see is the workload, what is wrong is where it runs. The node leaves the ranking."""
    workload.signals = workload.signals + [s for s in node.faults if s not in workload.signals]
    workload.explained_by, workload.edge = None, None
    workload.explains = [s for s in node.explains if s != workload.service]
    workload.onset = min((t for t in (workload.onset, node.onset) if t is not None), default=None)
    workload.kind = "scheduling.node_pressure"
    workload.kind_votes = Counter({workload.kind: sum(node.kind_votes.values())})
    result.candidates.remove(workload)
    result.candidates[result.candidates.index(node)] = workload
    for candidate in result.candidates:
        if candidate.explained_by == node.service:
            candidate.explained_by = workload.service
    return workload


def _unjudged_errors(evidence: Evidence, subject: list[str]) -> list[str]:
    """Services with error lines but too little log history before them to tell an incident from routine.
    Lines that recur at one pace across a long window are judged by it: their rate never changed in it."""
    times: dict[str, list[float]] = {}
    for record in evidence.logs:
        if at_least(record.level, "ERROR") and (not subject or record.service in subject):
            times.setdefault(record.service, []).append(record.ts)
    return [s for s, ts in times.items() if s not in evidence.log_windows
            or (min(ts) - evidence.log_windows[s][0] < MIN_BASELINE_S and not _steady(sorted(ts), *evidence.log_windows[s]))]


def _steady(times: list[float], low: float, high: float) -> bool:
    """Lines spread over a window of several baselines at one rate: none of its splits raises it."""
    if high - low < STEADY_WINDOWS * MIN_BASELINE_S or times[-1] - times[0] < (high - low) / 2:
        return False
    change = rate_change(times, low, high)
    return change is None or change[0] < LOG_LLR


def _doubt(top: Candidate, roots: list[Candidate], graph, evidence: Evidence, candidates, context: list[Signal],
           subject: list[str] = ()) -> str:
    """Why the top root is not decisive, or "" when it is."""
    if len(roots) > 1:
        second = roots[1]
        close = (second.onset is None or top.onset is None or second.onset - top.onset <= TOLERANCE_S)
        if close and second.strength >= 0.7 * top.strength and len(second.explains) >= len(top.explains):
            return "not_separated"
        if any(r.kind == top.kind and r.onset is not None and top.onset is not None and r.onset < top.onset
               for r in roots[1:]):
            # The same kind of fault began earlier elsewhere, and no edge links the two: either may be the origin.
            return "not_separated"
        if not top.explains and top.service not in subject and any(r.explains for r in roots[1:]):
            # Earlier, but accounting for nothing, while another root accounts for what others show.
            return "not_separated"
        if symptom_only(top) and top.kind in GENERIC and any(
                r.onset is not None and top.onset is not None and r.onset < top.onset and not symptom_only(r)
                for r in roots[1:]):
            # Only slower or failing, as any trouble below it would show, while a fault of its own began
            # earlier elsewhere: a call the evidence does not show may link the two.
            return "not_separated"
    quiet, unexamined = beyond(top, graph, evidence, candidates)
    if unexamined and not of_its_own(top, evidence):
        return "dependency_not_examined"
    if any(graph.unresolved.get(s) for s in [top.service, *quiet]) and not of_its_own(top, evidence):
        return "address_not_resolved"
    if outside_unresolved(top, evidence) and not of_its_own(top, evidence):
        return "address_not_resolved"  # the cluster may declare the outside host its lines name as a Service
    if gone_unexplained(top, evidence):
        return "state_not_examined"
    if seen_only_by_callers(top, evidence):
        return "metrics_not_examined"
    if resolver_failed(top):
        return "resolver_not_examined"
    if only_waited_for(top) and top.service in evidence.metrics_asked and top.kind in GENERIC:
        # Its own series were read and deviate in nothing, and nothing says what it is (a database the callers'
        # statements wait for): that they waited on an address is their view, and the path to it, or the
        # callers themselves, may be what is slow.
        return "dependency_quiet"
    if (top.kind or "").startswith("dependency.") and top.role != top.kind or limited_by_unnamed(top):
        return "dependency_not_identified"  # its errors blame a dependency the evidence does not name
    if nodes_to_examine(top, graph, evidence, quiet):
        return "node_not_examined"
    if _changed_dependencies(top, graph, context):
        return "dependency_changed"
    if changed_caller(top, candidates, context):
        return "caller_changed"
    if not kind_named(top.kind, top.kind_votes):
        return "kind_unknown"
    ranked = sorted(top.kind_votes.items(), key=lambda kv: -kv[1])
    if len(ranked) > 1 and ranked[0][1] < KIND_MARGIN * ranked[1][1]:
        (first, _), (second, _) = ranked[:2]
        # A general kind just behind a specific one is how the specific one shows or shipped (a deploy beside the
        # schema it migrated), and one of the same family tells a specific one apart ("timed out" beside a DNS
        # failure): no rivals. Two specific kinds in a tie (pods Pending, or their node's pressure) are.
        shows = second in GENERIC and first not in GENERIC
        if not shows and (first.split(".")[0] != second.split(".")[0] or not GENERIC & {first, second}):
            return "kind_ambiguous"
    return ""


def _changed_dependencies(top: Candidate, graph, context: list[Signal]) -> dict[str, list[Signal]]:
    """Dependencies of the top that changed in the hour before its onset while the top itself did not change:
    each with its changes."""
    if top.onset is None or any(c.source == "change" and c.entity == top.service for c in context):
        return {}
    out: dict[str, list[Signal]] = {}
    for edge in graph.dependencies(top.service):
        if edge.via == "placement":
            continue
        changes = [c for c in context if c.source == "change" and c.entity == edge.callee and c.onset is not None
                   and top.onset - 3600 <= c.onset <= top.onset + TOLERANCE_S]
        if changes:
            out.setdefault(edge.callee, changes)
    return out


def _rank_changed_dependencies(result: Localisation, top: Candidate, graph, context: list[Signal]) -> None:
    """A dependency that changed before the top broke, and shows nothing itself, is a candidate too: right
    after the top, its changes as its evidence ("changed at T: what")."""
    known = {c.service for c in result.candidates}
    added = [Candidate(name, [replace(c, fault=True) for c in changes], min(c.onset for c in changes), 0.0,
                       explains=[top.service], kind=None)
             for name, changes in _changed_dependencies(top, graph, context).items() if name not in known]
    at = result.candidates.index(top) + 1
    result.candidates[at:at] = added


def describe(localisation: Localisation) -> dict[str, Any]:
    """A plain summary for scoring and debugging."""
    return {
        "outcome": localisation.outcome, "root": localisation.root, "kind": localisation.kind,
        "reason": localisation.reason,
        "candidates": [{"service": c.service, "onset": c.onset, "strength": round(c.strength, 3),
                        "explained_by": c.explained_by, "kind": c.kind,
                        "votes": {k: round(v, 2) for k, v in c.kind_votes.most_common(3)},
                        "signals": [f"{s.source}:{s.kind}:{s.text[:60]}" for s in c.evidence()[:4]]}
                       for c in localisation.candidates[:6]],
    }


__all__ = ["Localisation", "NextCheck", "describe", "localise", "localise_evidence"]
