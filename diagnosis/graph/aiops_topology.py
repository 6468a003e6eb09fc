"""The alert-analysis topology: a supervisor loop of seven injectable node ports on the same engine.

    intake -> supervisor -(EXECUTE)-> task executor -> task gatekeeper -> supervisor ...
              supervisor -(FINISH | stop)-> reporter -> report check -> END
              reporter / report check -(fallback)-> fallback -> END

Each port is wrapped here, as in the diagnosis topology and with the same machinery (``ports.py``):
the wrapper owns the round count (one per
supervisor decision, at most ``max_rounds``), the technical-retry counters of the supervisor and the
reporter (one retry each), ``degraded``, the next route and one bounded orchestration event
``{node, outcome, reason_code, attempt}`` per node run. Ports only return their status and outputs.
The engine's recursion limit is the worst case of these bounds, so a run can never loop further.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from .engine import END, CompiledGraph, StateGraph, append
from .aiops_state import PORT_OUTPUT_KEYS, AiOpsKey, AiOpsNode, AiOpsReason, Decision  # noqa: F401  (re-exported)
from .ports import (
    Port, PortContractError, append_event, call_port, degrade, event_outcome, executor_route, normalise_status,
    require_callable, technical_route, unbound_port,
)
from .state import MAX_ORCHESTRATION_EVENTS, EventOutcome, NodeStatus

S = NodeStatus

DEFAULT_MAX_ROUNDS = 4
# Every step of the worst case must fit in the stored events: 4 steps a round plus 6 (see aiops_recursion_limit).
MAX_ROUNDS_LIMIT = (MAX_ORCHESTRATION_EVENTS - 6) // 4


K = AiOpsKey
N = AiOpsNode


class Route:
    """Route keys; the first of each mapping is the node's main route (the drawing's spine)."""

    FINISH = "FINISH"
    STOP = "stop"
    PLAN = "PLAN"
    EXECUTE = "EXECUTE"
    TECHNICAL_RETRY = "technical_retry"
    EXECUTED = "executed"
    NEXT_ROUND = "next_round"
    COMPLETED = "COMPLETED"
    CHECKED = "checked"
    FALLBACK = "fallback"


SUPERVISOR_ROUTES = {
    Route.FINISH: N.REPORTER, Route.STOP: N.REPORTER, Route.EXECUTE: N.EXECUTOR,
    Route.PLAN: N.SUPERVISOR, Route.TECHNICAL_RETRY: N.SUPERVISOR,
}
EXECUTOR_ROUTES = {Route.EXECUTED: N.GATEKEEPER, Route.NEXT_ROUND: N.SUPERVISOR}
REPORTER_ROUTES = {Route.COMPLETED: N.REPORT_CHECK, Route.TECHNICAL_RETRY: N.REPORTER, Route.FALLBACK: N.FALLBACK}
REPORT_CHECK_ROUTES = {Route.CHECKED: END, Route.FALLBACK: N.FALLBACK}


R = AiOpsReason


AiOpsPortContractError = PortContractError  # one contract error for both topologies' ports


@dataclass(frozen=True)
class AiOpsNodes:
    """The seven node ports; each is ``(state, config) -> dict | None``, synchronous."""

    intake: Port
    supervisor: Port
    executor: Port
    gatekeeper: Port
    reporter: Port
    report_check: Port
    fallback: Port


def aiops_recursion_limit(max_rounds: int) -> int:
    """The worst case: intake, 4 steps a round (a supervisor retry, the decision, the task and its
    gatekeeper), the closing supervisor step, two reporter attempts, the report check and the fallback."""
    return 1 + 4 * max_rounds + 1 + 2 + 1 + 1


# --------------------------------------------------------------------------- routing decisions


_status = normalise_status


def _technical(status: str | None, retry_count: int, give_up: str) -> tuple[str, str]:
    return technical_route(status, retry_count, retry=Route.TECHNICAL_RETRY, give_up=give_up, reasons=R)


def decide_supervisor(status: Any, retry_count: int, decision: Any) -> tuple[str, str]:
    """A model decision routes to itself (PLAN), the executor or the reporter; STOP and a failure that
    is not retried (or was already) go to the reporter, which reports what was verified so far."""
    status = _status(status)
    if status != S.COMPLETED:
        return _technical(status, retry_count, Route.STOP)
    choice = decision.get("decision") if isinstance(decision, Mapping) else None
    if choice == Decision.FINISH:
        return Route.FINISH, "finish"
    if choice == Decision.EXECUTE:
        return Route.EXECUTE, "execute"
    if choice == Decision.PLAN:
        return Route.PLAN, "plan"
    if choice == Decision.STOP:
        reason = decision.get("reason") if isinstance(decision.get("reason"), str) else ""
        return Route.STOP, reason[:64] or R.UNKNOWN_STATUS
    return Route.STOP, R.UNKNOWN_STATUS


def decide_executor(status: Any) -> tuple[str, str]:
    """Claims reported -> the task gatekeeper; any failure -> the next round (never retried)."""
    return executor_route(status, done=(Route.EXECUTED, R.EXECUTED), give_up=Route.NEXT_ROUND, reasons=R)


def decide_reporter(status: Any, retry_count: int) -> tuple[str, str]:
    status = _status(status)
    if status == S.COMPLETED:
        return Route.COMPLETED, R.REPORT_WRITTEN
    return _technical(status, retry_count, Route.FALLBACK)


def decide_report_check(report_status: Any, answer: Any) -> tuple[str, str]:
    if report_status == Route.CHECKED and isinstance(answer, str) and answer.strip():
        return Route.CHECKED, R.REPORT_CHECKED
    return Route.FALLBACK, R.NO_VERIFIED_STATEMENT


# --------------------------------------------------------------------------- node wrappers


def _call_port(node: str, port: Port, state: Mapping[str, Any], config) -> dict[str, Any]:
    return call_port(node, port, state, config, allowed=PORT_OUTPUT_KEYS[node],
                     owned_by_topology="rounds, retry counters, routes, events and degraded")


def _record(update: dict, state: Mapping[str, Any], node: str, outcome: Any, route: str | None, reason: str,
            attempt: int) -> dict:
    detail = update.pop(K.EVENT_DETAIL, None)
    update[K.EVENT_DETAIL] = None
    if route is not None:
        update[K.ROUTE] = route
    event = {"node": node, "outcome": str(outcome), "reason_code": reason, "attempt": attempt}
    if isinstance(detail, Mapping):
        event.update({k: v for k, v in list(detail.items())[:8] if k not in event})
    return append_event(update, state, event)


def _intake(port: Port):
    def intake(state, config):
        update = _call_port(N.INTAKE, port, state, config)
        source = update.get(K.ALERTS_SOURCE)
        reason = R.ALERTS_GIVEN if source != "query_alerts" else R.QUERY_ALERTS
        status = (update.get(K.INTAKE) or {}).get("status") or EventOutcome.MISSING
        return _record(update, state, N.INTAKE, status if reason == R.QUERY_ALERTS else "request", None, reason, 1)

    return intake


def _supervisor(port: Port, max_rounds: int):
    def supervisor(state, config):
        retries = state.get(K.SUPERVISOR_RETRY_COUNT) or 0
        rounds = state.get(K.ROUND) or 0
        retrying = state.get(K.ROUTE) == Route.TECHNICAL_RETRY and retries > 0
        this_round = rounds if retrying else rounds + 1
        if this_round > max_rounds:
            update = {K.SUPERVISOR_STATUS: S.COMPLETED, K.TERMINATION: R.MAX_ROUNDS,
                      K.DECISION: {"decision": Decision.STOP, "reason": R.MAX_ROUNDS}}
            return _record(update, state, N.SUPERVISOR, Decision.STOP, Route.STOP, R.MAX_ROUNDS, 1)
        view = MappingProxyType({**state, K.ROUND: this_round})
        update = _call_port(N.SUPERVISOR, port, view, config)
        status = update.get(K.SUPERVISOR_STATUS)
        decision = update.get(K.DECISION)
        route, reason = decide_supervisor(status, retries, decision)
        update[K.SUPERVISOR_STATUS] = status
        update[K.SUPERVISOR_RETRY_COUNT] = retries + 1 if route == Route.TECHNICAL_RETRY else 0
        stopped_by_rule = _status(status) == S.COMPLETED and route == Route.STOP
        update[K.ROUND] = rounds if stopped_by_rule else this_round
        if route == Route.STOP and not update.get(K.TERMINATION):
            update[K.TERMINATION] = reason if stopped_by_rule else "planner_failed"
        elif route == Route.FINISH:
            update[K.TERMINATION] = "finished"
        fault = update.pop(K.FAULT, None)
        if route == Route.STOP and not stopped_by_rule:  # only a failure that ends the loop marks the run
            update[K.FAULT] = fault if isinstance(fault, str) and fault else f"{N.SUPERVISOR}:{reason}"
        if route in (Route.PLAN, Route.EXECUTE, Route.FINISH):
            update[K.DECISIONS] = [{"round": this_round, "decision": route, "task_id": None,
                                    **{k: v for k, v in (decision or {}).items() if k in ("rationale", "task_id")}}]
        outcome = route if route in (Route.PLAN, Route.EXECUTE, Route.FINISH) else (
            Decision.STOP if stopped_by_rule else event_outcome(status))
        return _record(update, state, N.SUPERVISOR, outcome, route, reason, retries + 1)

    return supervisor


def _executor(port: Port):
    def executor(state, config):
        update = _call_port(N.EXECUTOR, port, state, config)
        status = update.get(K.EXECUTOR_STATUS)
        route, reason = decide_executor(status)
        update[K.EXECUTOR_STATUS] = status
        return _record(update, state, N.EXECUTOR, event_outcome(status), route, reason, 1)

    return executor


def _gatekeeper(port: Port):
    def gatekeeper(state, config):
        update = _call_port(N.GATEKEEPER, port, state, config)
        update[K.TASK_OUTPUT] = None
        verdict = (update.get(K.EVENT_DETAIL) or {}).get("verdict") or EventOutcome.MISSING
        return _record(update, state, N.GATEKEEPER, verdict, None, R.GATEKEEPER_CHECKED, 1)

    return gatekeeper


def _reporter(port: Port):
    def reporter(state, config):
        retries = state.get(K.REPORTER_RETRY_COUNT) or 0
        update = _call_port(N.REPORTER, port, state, config)
        status = update.get(K.REPORTER_STATUS)
        route, reason = decide_reporter(status, retries)
        update[K.REPORTER_STATUS] = status
        update[K.REPORTER_RETRY_COUNT] = retries + 1 if route == Route.TECHNICAL_RETRY else retries
        if route == Route.FALLBACK:
            update[K.FALLBACK_REASON] = update.get(K.REPORTER_FAULT) or f"{N.REPORTER}:{reason}"
        return _record(update, state, N.REPORTER, event_outcome(status), route, reason, retries + 1)

    return reporter


def _report_check(port: Port):
    def report_check(state, config):
        update = _call_port(N.REPORT_CHECK, port, state, config)
        route, reason = decide_report_check(update.get(K.REPORT_STATUS), update.get(K.FINAL_ANSWER))
        if route == Route.FALLBACK:
            update[K.FALLBACK_REASON] = f"{N.REPORT_CHECK}:{reason}"
            update.pop(K.FINAL_ANSWER, None)
        outcome = (update.get(K.EVENT_DETAIL) or {}).get("outcome") or route
        return _record(update, state, N.REPORT_CHECK, outcome, route, reason, 1)

    return report_check


FALLBACK_SAFETY_REPORT = (
    "**The alert analysis could not be completed (degraded report).** No verified root cause is reported; "
    "check the run trace for what was gathered."
)


def _fallback(port: Port):
    def fallback(state, config):
        update = degrade(_call_port(N.FALLBACK, port, state, config), safety_answer=FALLBACK_SAFETY_REPORT)
        return _record(update, state, N.FALLBACK, EventOutcome.COMPLETED, None, R.FALLBACK_COMPLETED, 1)

    return fallback


def _route(state: Mapping[str, Any]) -> Any:
    return state.get(K.ROUTE)


# --------------------------------------------------------------------------- the graph


def initial_aiops_state() -> dict[str, Any]:
    return {K.ROUND: 0, K.SUPERVISOR_RETRY_COUNT: 0, K.REPORTER_RETRY_COUNT: 0, K.TASKS: [], K.RESULTS: [],
            K.DECISIONS: [], K.DEGRADED: False, K.ORCHESTRATION_EVENTS: []}


def build_aiops_topology(nodes: AiOpsNodes, *, max_rounds: int = DEFAULT_MAX_ROUNDS) -> StateGraph:
    require_callable((item.name, getattr(nodes, item.name)) for item in fields(AiOpsNodes))
    graph = StateGraph(state_keys=K.ALL, reducers={K.ORCHESTRATION_EVENTS: append, K.RESULTS: append,
                                                   K.DECISIONS: append})
    graph.add_node(N.INTAKE, _intake(nodes.intake))
    graph.add_node(N.SUPERVISOR, _supervisor(nodes.supervisor, max_rounds))
    graph.add_node(N.EXECUTOR, _executor(nodes.executor))
    graph.add_node(N.GATEKEEPER, _gatekeeper(nodes.gatekeeper))
    graph.add_node(N.REPORTER, _reporter(nodes.reporter))
    graph.add_node(N.REPORT_CHECK, _report_check(nodes.report_check))
    graph.add_node(N.FALLBACK, _fallback(nodes.fallback))

    graph.set_entry(N.INTAKE)
    graph.add_edge(N.INTAKE, N.SUPERVISOR)
    graph.add_conditional_edges(N.SUPERVISOR, _route, SUPERVISOR_ROUTES)
    graph.add_conditional_edges(N.EXECUTOR, _route, EXECUTOR_ROUTES)
    graph.add_edge(N.GATEKEEPER, N.SUPERVISOR)
    graph.add_conditional_edges(N.REPORTER, _route, REPORTER_ROUTES)
    graph.add_conditional_edges(N.REPORT_CHECK, _route, REPORT_CHECK_ROUTES)
    graph.add_edge(N.FALLBACK, END)
    return graph


def clamp_rounds(max_rounds: Any) -> int:
    try:
        return min(MAX_ROUNDS_LIMIT, max(1, int(max_rounds)))
    except (TypeError, ValueError):
        return DEFAULT_MAX_ROUNDS


def build_aiops_graph(nodes: AiOpsNodes, *, max_rounds: int = DEFAULT_MAX_ROUNDS) -> CompiledGraph:
    """The compiled alert-analysis graph; its recursion limit is the worst case of ``max_rounds``."""
    max_rounds = clamp_rounds(max_rounds)
    return build_aiops_topology(nodes, max_rounds=max_rounds).compile(
        recursion_limit=aiops_recursion_limit(max_rounds))


def describe_aiops_topology() -> dict[str, Any]:
    """The compiled alert-analysis graph as plain data (``CompiledGraph.describe()``), for drawing it."""
    ports = AiOpsNodes(**{item.name: unbound_port(item.name) for item in fields(AiOpsNodes)})
    return {**build_aiops_graph(ports).describe(), "title": "Alert-analysis topology"}
