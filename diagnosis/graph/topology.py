"""The diagnosis topology: eight injectable node ports wired by the routing table of SPEC §3.

Each port is wrapped here (with the shared machinery of ``ports.py``), so real ports only return
their status and outputs; the wrapper owns
the retry counters, ``planner_mode``, the verdict ceiling, ``degraded`` and one bounded
orchestration event ``{node, outcome, reason_code, attempt}`` per node run. Reason codes are
listed and explained on ``state.ReasonCode``. Anything unknown or missing fails closed to fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from .engine import END, CompiledGraph, GraphValidationError, StateGraph, append
from .ports import (  # noqa: F401  (Port and PortContractError re-exported: the diagnosis ports' contract)
    Port, PortContractError, append_event, call_port, degrade, event_outcome, executor_route, normalise_status,
    require_callable, technical_route, unbound_port,
)
from .state import (
    DiagnosisState,
    DIAGNOSIS_RECURSION_LIMIT,
    MAX_EVIDENCE_RETRIES,
    MAX_ORCHESTRATION_EVENTS,
    PORT_OUTPUT_KEYS,
    RETRY_COUNT_KEYS,
    EventOutcome,
    NodeName,
    NodeStatus,
    PlannerMode,
    ReasonCode,
    StateKey,
    Verdict,
    effective_verdict,
    known_verdict,
)

K = StateKey
N = NodeName
S = NodeStatus
R = ReasonCode

assert MAX_ORCHESTRATION_EVENTS >= DIAGNOSIS_RECURSION_LIMIT, "every step of a run must fit in its events"

# Used only when a fallback port returns no usable answer: a run must never end without one.
FALLBACK_SAFETY_ANSWER = (
    "The diagnosis could not be completed safely, so no verified root cause is reported. "
    "Check the run trace for what was gathered and retry, or follow the service runbook."
)

class Route:
    """Route keys returned by the routers; they label the conditional edges in the rendering.

    The first route of each routing table is the node's main route: the console draws the chain of
    first routes from START to END down the middle (traces/route_layout.py).
    """

    COMPLETED = "COMPLETED"
    TECHNICAL_RETRY = "technical_retry"
    FALLBACK = "fallback"
    GATEKEEPER_PASS = "PASS"
    LOW_CONFID_WITH_BINDING = "LOW_CONFID_with_binding"
    VERDICT = "verdict"
    EVIDENCE_GAP = "evidence_gap"


PLANNER_ROUTES = {Route.COMPLETED: N.EXECUTOR, Route.TECHNICAL_RETRY: N.PLANNER, Route.FALLBACK: N.FALLBACK}
EXECUTOR_ROUTES = {Route.COMPLETED: N.GATEKEEPER, Route.FALLBACK: N.FALLBACK}
GATEKEEPER_ROUTES = {
    Route.GATEKEEPER_PASS: N.VERIFIED_INPUT,
    Route.LOW_CONFID_WITH_BINDING: N.VERIFIED_INPUT,
    Route.FALLBACK: N.FALLBACK,
}
VERIFIER_ROUTES = {
    Route.VERDICT: N.COMPOSER,
    Route.EVIDENCE_GAP: N.EVIDENCE_RETRY,
    Route.TECHNICAL_RETRY: N.VERIFIER,
    Route.FALLBACK: N.FALLBACK,
}
COMPOSER_ROUTES = {Route.COMPLETED: END, Route.TECHNICAL_RETRY: N.COMPOSER, Route.FALLBACK: N.FALLBACK}


@dataclass(frozen=True)
class DiagnosisNodes:
    """The eight node ports; each is ``(state, config) -> dict | None``, synchronous."""

    planner: Port
    executor: Port
    gatekeeper: Port
    verified_input: Port
    verifier: Port
    evidence_retry: Port
    composer: Port
    fallback: Port

    @classmethod
    def from_mapping(cls, ports: Mapping[str, Port]) -> DiagnosisNodes:
        missing = [name for name in N.ALL if name not in ports]
        extra = sorted(set(ports) - set(N.ALL))
        if missing or extra:
            problems = [f"Node port {name!r} missing; pass it in DiagnosisNodes" for name in missing]
            problems += [f"Node port {name!r} is not a diagnosis node; expected one of {list(N.ALL)}" for name in extra]
            raise GraphValidationError(problems)
        return cls(**{name: ports[name] for name in N.ALL})


# --------------------------------------------------------------------------- routing decisions
# Each decision returns (route key, reason code). Routers and node wrappers share them, so the
# event a wrapper records always names the route the engine then takes.


def _technical(status: str | None, retry_count: int) -> tuple[str, str]:
    return technical_route(status, retry_count, retry=Route.TECHNICAL_RETRY, give_up=Route.FALLBACK, reasons=R)


def decide_planner(status: Any, retry_count: int) -> tuple[str, str]:
    """COMPLETED -> executor; one technical retry; otherwise fallback."""
    status = normalise_status(status)
    if status == S.COMPLETED:
        return Route.COMPLETED, R.COMPLETED
    return _technical(status, retry_count)


def decide_executor(status: Any) -> tuple[str, str]:
    """COMPLETED -> gatekeeper; everything else -> fallback, never retried."""
    return executor_route(status, done=(Route.COMPLETED, R.COMPLETED), give_up=Route.FALLBACK, reasons=R)


def verified_binding_count(result: Any) -> int:
    """The gatekeeper's verified binding count; anything but a non-negative int counts as 0."""
    count = result.get("verified_binding_count") if isinstance(result, Mapping) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return 0
    return count


def decide_gatekeeper(result: Any) -> tuple[str, str]:
    """PASS, or LOW_CONFID with >= 1 verified binding -> verified_input; anything else -> fallback."""
    verdict = result.get("verdict") if isinstance(result, Mapping) else None
    if verdict is None:
        return Route.FALLBACK, R.MISSING_STATUS
    verdict = known_verdict(verdict)
    if verdict == Verdict.PASS:
        return Route.GATEKEEPER_PASS, R.GATEKEEPER_PASS
    if verdict == Verdict.LOW_CONFID:
        if verified_binding_count(result) >= 1:
            return Route.LOW_CONFID_WITH_BINDING, R.GATEKEEPER_LOW_CONFID
        return Route.FALLBACK, R.NO_VERIFIED_BINDING
    if verdict == Verdict.REJECT:
        return Route.FALLBACK, R.GATEKEEPER_REJECT
    return Route.FALLBACK, R.UNKNOWN_STATUS


def critical_evidence_gaps(verifier_output: Any) -> list:
    """The extractable critical gaps of a verifier output: non-empty strings or dicts with a ``gap``."""
    gaps = verifier_output.get("critical_evidence_gaps") if isinstance(verifier_output, Mapping) else None
    if not isinstance(gaps, (list, tuple)):
        return []
    usable = []
    for gap in gaps:
        if isinstance(gap, str) and gap.strip():
            usable.append(gap)
        elif isinstance(gap, Mapping) and isinstance(gap.get("gap"), str) and gap["gap"].strip():
            usable.append(dict(gap))
    return usable


def decide_verifier(
    status: Any,
    retry_count: int,
    verifier_output: Any,
    verdict_ceiling: Any,
    evidence_retry_count: int,
) -> tuple[str, str]:
    """Effective verdict -> composer, or evidence_retry when LOW_CONFID meets every guard."""
    status = normalise_status(status)
    if status != S.COMPLETED:
        return _technical(status, retry_count)
    model = verifier_output.get("verdict") if isinstance(verifier_output, Mapping) else None
    verdict = effective_verdict(model, verdict_ceiling)
    if verdict is None:
        return Route.FALLBACK, R.UNKNOWN_VERDICT
    if verdict == Verdict.PASS:
        return Route.VERDICT, R.VERDICT_PASS
    if verdict == Verdict.REJECT:
        return Route.VERDICT, R.VERDICT_REJECT
    if evidence_retry_count >= MAX_EVIDENCE_RETRIES:
        return Route.VERDICT, R.EVIDENCE_RETRY_EXHAUSTED
    if known_verdict(verdict_ceiling) != Verdict.PASS:
        return Route.VERDICT, R.CEILING_BELOW_PASS
    if not critical_evidence_gaps(verifier_output):
        return Route.VERDICT, R.NO_CRITICAL_GAP
    return Route.EVIDENCE_GAP, R.EVIDENCE_GAP


def decide_composer(status: Any, retry_count: int) -> tuple[str, str]:
    """COMPLETED -> END; one technical retry; otherwise fallback."""
    status = normalise_status(status)
    if status == S.COMPLETED:
        return Route.COMPLETED, R.COMPLETED
    return _technical(status, retry_count)


# --------------------------------------------------------------------------- routers (engine side)


def route_planner(state: Mapping[str, Any]) -> str:
    return decide_planner(state.get(K.PLANNER_STATUS), state.get(K.PLANNER_RETRY_COUNT) or 0)[0]


def route_executor(state: Mapping[str, Any]) -> str:
    return decide_executor(state.get(K.EXECUTOR_STATUS))[0]


def route_gatekeeper(state: Mapping[str, Any]) -> str:
    return decide_gatekeeper(state.get(K.GATEKEEPER_RESULT))[0]


def route_verifier(state: Mapping[str, Any]) -> str:
    return decide_verifier(
        state.get(K.VERIFIER_STATUS),
        state.get(K.VERIFIER_RETRY_COUNT) or 0,
        state.get(K.VERIFIER_OUTPUT),
        state.get(K.VERDICT_CEILING),
        state.get(K.EVIDENCE_RETRY_COUNT) or 0,
    )[0]


def route_composer(state: Mapping[str, Any]) -> str:
    return decide_composer(state.get(K.COMPOSER_STATUS), state.get(K.COMPOSER_RETRY_COUNT) or 0)[0]


# --------------------------------------------------------------------------- helpers for ports


def current_attempt(state: Mapping[str, Any], node: str) -> int:
    """The attempt a port is running as: 1, or 2 for its technical retry."""
    key = RETRY_COUNT_KEYS.get(node)
    return (state.get(key) or 0) + 1 if key else 1


def last_event(state: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The newest orchestration event (the fallback port reads why it was reached here)."""
    events = state.get(K.ORCHESTRATION_EVENTS)
    return events[-1] if events else None


def initial_diagnosis_state(query: str, *, original_query: str | None = None) -> DiagnosisState:
    """The state a diagnosis run starts from (seed 001 §3): context, NORMAL mode, zero counters."""
    return {
        K.DIAGNOSIS_CONTEXT: {"query": query, "original_query": query if original_query is None else original_query},
        K.PLANNER_MODE: PlannerMode.NORMAL,
        K.PLANNER_RETRY_COUNT: 0,
        K.VERIFIER_RETRY_COUNT: 0,
        K.COMPOSER_RETRY_COUNT: 0,
        K.EVIDENCE_RETRY_COUNT: 0,
        K.DEGRADED: False,
        K.ORCHESTRATION_EVENTS: [],
    }


# --------------------------------------------------------------------------- node wrappers


def _call_port(node: str, port: Port, state: Mapping[str, Any], config) -> dict[str, Any]:
    return call_port(node, port, state, config, allowed=PORT_OUTPUT_KEYS[node],
                     owned_by_topology="counters, events, planner_mode, ceiling and degraded")


def _enter(state: Mapping[str, Any], node: str) -> tuple[Mapping[str, Any], int]:
    """The state the port sees and the retries used, counting this run if it is the technical retry."""
    count_key = RETRY_COUNT_KEYS[node]
    count = state.get(count_key) or 0
    events = state.get(K.ORCHESTRATION_EVENTS)
    if events and events[-1]["node"] == node:
        count += 1
        state = MappingProxyType({**state, count_key: count})
    return state, count


def _record(update: dict, state: Mapping[str, Any], node: str, outcome: Any, reason: str, attempt: int) -> dict:
    return append_event(update, state, {"node": node, "outcome": outcome, "reason_code": reason, "attempt": attempt})


def _retried_once(node: str, status_key: str, count_key: str, decide: Callable[[Any, int], tuple[str, str]]):
    """The wrapper of a node that a technical failure runs once more (the planner, the composer)."""
    def wrap(port: Port):
        def run(state, config):
            state, count = _enter(state, node)
            update = _call_port(node, port, state, config)
            status = update.get(status_key)
            update[status_key] = status
            update[count_key] = count
            return _record(update, state, node, event_outcome(status), decide(status, count)[1], count + 1)

        run.__name__ = node
        return run

    return wrap


_planner = _retried_once(N.PLANNER, K.PLANNER_STATUS, K.PLANNER_RETRY_COUNT, decide_planner)


def _executor(port: Port):
    def executor(state, config):
        update = _call_port(N.EXECUTOR, port, state, config)
        status = update.get(K.EXECUTOR_STATUS)
        update[K.EXECUTOR_STATUS] = status
        return _record(update, state, N.EXECUTOR, event_outcome(status), decide_executor(status)[1], 1)

    return executor


def _gatekeeper(port: Port):
    def gatekeeper(state, config):
        update = _call_port(N.GATEKEEPER, port, state, config)
        result = update.get(K.GATEKEEPER_RESULT)
        raw = result.get("verdict") if isinstance(result, Mapping) else None
        verdict = known_verdict(raw)
        update[K.GATEKEEPER_RESULT] = result
        update[K.VERDICT_CEILING] = verdict
        outcome = verdict or (EventOutcome.MISSING if raw is None else EventOutcome.UNKNOWN)
        return _record(update, state, N.GATEKEEPER, outcome, decide_gatekeeper(result)[1], 1)

    return gatekeeper


def _verified_input(port: Port):
    def verified_input(state, config):
        update = _call_port(N.VERIFIED_INPUT, port, state, config)
        return _record(update, state, N.VERIFIED_INPUT, EventOutcome.COMPLETED, R.COMPLETED, 1)

    return verified_input


def _verifier(port: Port):
    def verifier(state, config):
        state, count = _enter(state, N.VERIFIER)
        update = _call_port(N.VERIFIER, port, state, config)
        status = update.get(K.VERIFIER_STATUS)
        output = update.get(K.VERIFIER_OUTPUT)
        ceiling = state.get(K.VERDICT_CEILING)
        reason = decide_verifier(status, count, output, ceiling, state.get(K.EVIDENCE_RETRY_COUNT) or 0)[1]
        completed = normalise_status(status) == S.COMPLETED
        model = output.get("verdict") if completed and isinstance(output, Mapping) else None
        update[K.VERIFIER_STATUS] = status
        update[K.VERIFIER_OUTPUT] = output
        update[K.VERIFIER_RETRY_COUNT] = count
        update[K.EFFECTIVE_VERDICT] = effective_verdict(model, ceiling)
        return _record(update, state, N.VERIFIER, event_outcome(status), reason, count + 1)

    return verifier


def _evidence_retry(port: Port):
    def evidence_retry(state, config):
        update = _call_port(N.EVIDENCE_RETRY, port, state, config)
        if not update.get(K.RETRY_CONTEXT):
            update[K.RETRY_CONTEXT] = {
                "critical_evidence_gaps": critical_evidence_gaps(state.get(K.VERIFIER_OUTPUT)),
                "previous_verdict": state.get(K.EFFECTIVE_VERDICT),
            }
        update[K.PLANNER_MODE] = PlannerMode.EVIDENCE_GAP_ONLY
        update[K.PLANNER_RETRY_COUNT] = 0
        update[K.EVIDENCE_RETRY_COUNT] = (state.get(K.EVIDENCE_RETRY_COUNT) or 0) + 1
        return _record(update, state, N.EVIDENCE_RETRY, EventOutcome.COMPLETED, R.EVIDENCE_GAP_ONLY, 1)

    return evidence_retry


_composer = _retried_once(N.COMPOSER, K.COMPOSER_STATUS, K.COMPOSER_RETRY_COUNT, decide_composer)


def _fallback(port: Port):
    def fallback(state, config):
        update = degrade(_call_port(N.FALLBACK, port, state, config), safety_answer=FALLBACK_SAFETY_ANSWER)
        return _record(update, state, N.FALLBACK, EventOutcome.COMPLETED, R.FALLBACK_COMPLETED, 1)

    return fallback


# Each node's wrapper, in the order the graph declares them.
_WRAPPERS = {
    N.PLANNER: _planner, N.EXECUTOR: _executor, N.GATEKEEPER: _gatekeeper, N.VERIFIED_INPUT: _verified_input,
    N.VERIFIER: _verifier, N.EVIDENCE_RETRY: _evidence_retry, N.COMPOSER: _composer, N.FALLBACK: _fallback,
}


# --------------------------------------------------------------------------- the graph


def build_diagnosis_topology(nodes: DiagnosisNodes | Mapping[str, Port]) -> StateGraph:
    """The uncompiled diagnosis graph (the benchmark rebuilds it on another engine)."""
    if not isinstance(nodes, DiagnosisNodes):
        nodes = DiagnosisNodes.from_mapping(nodes)
    require_callable((item.name, getattr(nodes, item.name)) for item in fields(DiagnosisNodes))

    graph = StateGraph(state_keys=K.ALL, reducers={K.ORCHESTRATION_EVENTS: append})
    for name, wrap in _WRAPPERS.items():
        graph.add_node(name, wrap(getattr(nodes, name)))

    graph.set_entry(N.PLANNER)
    graph.add_conditional_edges(N.PLANNER, route_planner, PLANNER_ROUTES)
    graph.add_conditional_edges(N.EXECUTOR, route_executor, EXECUTOR_ROUTES)
    graph.add_conditional_edges(N.GATEKEEPER, route_gatekeeper, GATEKEEPER_ROUTES)
    graph.add_edge(N.VERIFIED_INPUT, N.VERIFIER)
    graph.add_conditional_edges(N.VERIFIER, route_verifier, VERIFIER_ROUTES)
    graph.add_edge(N.EVIDENCE_RETRY, N.PLANNER)
    graph.add_conditional_edges(N.COMPOSER, route_composer, COMPOSER_ROUTES)
    graph.add_edge(N.FALLBACK, END)
    return graph


def build_diagnosis_graph(nodes: DiagnosisNodes | Mapping[str, Port]) -> CompiledGraph:
    """The compiled diagnosis graph, recursion limit 32."""
    return build_diagnosis_topology(nodes).compile(recursion_limit=DIAGNOSIS_RECURSION_LIMIT)


def describe_diagnosis_topology() -> dict[str, Any]:
    """The compiled diagnosis graph as plain data (``CompiledGraph.describe()``), for drawing it."""
    described = build_diagnosis_graph({name: unbound_port(name) for name in N.ALL}).describe()
    return {**described, "title": "Diagnosis topology"}
