"""Errors while a rollout replaces pods: churn, not an incident.

A rollout stops old pods while new ones start: the kubelet kills the old containers and reports the new
ones not ready until they warm up, callers that were talking to an old pod get a refused connection or a
reset, a proxy logs "upstream prematurely closed connection", and then all is quiet again. A log template,
or a Kubernetes event of the kinds every restart shows (``Unhealthy``, ``Killing``, ``BackOff``), whose
reports all fall in the minutes after a rollout of their own service or of a service it calls, and that
stopped long before now, is how the rollout looked, not a fault, unless the service deviates otherwise too
(its error rate, a crash that goes on): a bad release keeps failing after its rollout, and stays a fault."""

from __future__ import annotations

from diagnosis.localisation.graph import DependencyGraph
from diagnosis.localisation.records import Evidence
from diagnosis.localisation.signals import Signal

DEPLOY_KINDS = ("rollout", "helm", "argocd")
RESTART_REASONS = ("Unhealthy", "Killing", "BackOff")  # what every replaced or starting pod may report
DEPLOY_S = 600.0  # a rollout replaces its pods within minutes: reports later than this are not its churn
EARLY_S = 60.0  # a report this much before the rollout's record is still its own (clocks, a first pod stopped)
QUIET_S = 600.0  # and the reports stopped at least this long before now (or twice their own span)


def _span(signal: Signal) -> tuple[float, float] | None:
    """When a log template's lines or a restart event's reports began and ended."""
    if signal.source == "log" and signal.kind == "log" and signal.detail.get("template") is not None:
        records = signal.detail["template"].records
        return (records[0].ts, records[-1].ts) if records else None
    if signal.source == "kube" and signal.kind in RESTART_REASONS and signal.onset is not None:
        return signal.onset, signal.detail.get("last") or signal.onset
    return None


def without_rollout_churn(signals: list[Signal], evidence: Evidence, graph: DependencyGraph) -> list[Signal]:
    """The signals without those that are a rollout's churn (see the module's docstring)."""
    rollouts = [(s.entity, s.onset) for s in signals
                if s.source == "change" and s.kind in DEPLOY_KINDS and s.onset is not None]
    if evidence.window is None or not rollouts:
        return signals
    churn: set[int] = set()
    for signal in signals:
        span = _span(signal) if signal.fault else None
        if span is None:
            continue
        first, last = span
        if evidence.window[1] - last < max(QUIET_S, 2 * (last - first)):
            continue  # still failing, or not quiet for long
        calls = {edge.callee for edge in graph.dependencies(signal.entity)}
        if any((service == signal.entity or service in calls) and at - EARLY_S <= first and last <= at + DEPLOY_S
               for service, at in rollouts):
            churn.add(id(signal))
    # A service that still deviates otherwise (its error rate, a crash that goes on) keeps all its signals.
    failing = {s.entity for s in signals if s.fault and id(s) not in churn}
    return [s for s in signals if id(s) not in churn or s.entity in failing]
