"""The node-port machinery both topologies share (diagnosis and alert analysis).

A port is an injectable ``(state, config) -> dict | None`` function. Each topology wraps its ports so
that a port only returns its status and outputs: the wrapper calls it through `call_port` (which holds
it to the keys it owns), reads its status with `normalise_status`, decides a technical retry with
`technical_route` and records one bounded orchestration event with `append_event`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .engine import GraphError, GraphValidationError, RunConfig
from .state import MAX_ORCHESTRATION_EVENTS, MAX_TECHNICAL_RETRIES, EventOutcome, NodeStatus, StateKey

S = NodeStatus
Port = Callable[[Mapping[str, Any], RunConfig], "Mapping[str, Any] | None"]

# Both topologies store these under the same keys (AiOpsKey reuses them).
ORCHESTRATION_EVENTS = StateKey.ORCHESTRATION_EVENTS
FINAL_ANSWER = StateKey.FINAL_ANSWER
DEGRADED = StateKey.DEGRADED


class PortContractError(GraphError):
    """A node port returned something other than a dict of the keys it owns (or None)."""

    code = "graph_port_contract"


def require_callable(ports: Iterable[tuple[str, Any]]) -> None:
    """Every (name, port) pair is callable, or a GraphValidationError naming the first that is not."""
    for name, port in ports:
        if not callable(port):
            raise GraphValidationError([f"Node port {name!r} must be callable (state, config) -> dict | None"])


def call_port(node: str, port: Port, state: Mapping[str, Any], config: RunConfig, *, allowed: frozenset,
              owned_by_topology: str) -> dict[str, Any]:
    """The port's update as a fresh dict; a PortContractError when it is not a mapping or writes a key
    outside `allowed` (`owned_by_topology` names what the wrapper owns, for the error)."""
    result = port(state, config)
    if result is None:
        return {}
    if not isinstance(result, Mapping):
        raise PortContractError(
            f"Node port {node!r} returned {type(result).__name__}; return a dict of {sorted(allowed)} or None")
    if not result.keys() <= allowed:
        raise PortContractError(
            f"Node port {node!r} wrote {sorted(set(result) - allowed)}; a port returns only {sorted(allowed)} "
            f"({owned_by_topology} belong to the topology)")
    return dict(result)


def normalise_status(status: Any) -> str | None:
    """A known node status as is, None when missing, ``unknown`` for anything else."""
    if status is None:
        return None
    if isinstance(status, str) and status in S.ALL:
        return status
    return EventOutcome.UNKNOWN


def event_outcome(status: Any) -> str:
    """The event outcome of a port's status: the status, or ``missing`` when there was none."""
    status = normalise_status(status)
    return EventOutcome.MISSING if status is None else status


def technical_route(status: str | None, retry_count: int, *, retry: str, give_up: str, reasons) -> tuple[str, str]:
    """The (route, reason) of a status that is not COMPLETED: one technical retry of a retryable or
    invalid output, otherwise `give_up`. `reasons` is the topology's reason-code table."""
    if status is None:
        return give_up, reasons.MISSING_STATUS
    if status in S.TECHNICAL:
        if retry_count < MAX_TECHNICAL_RETRIES:
            return retry, reasons.INVALID_OUTPUT if status == S.INVALID_OUTPUT else reasons.RETRYABLE_FAILED
        return give_up, reasons.RETRY_EXHAUSTED
    if status == S.NON_RETRYABLE_FAILED:
        return give_up, reasons.NON_RETRYABLE_FAILED
    return give_up, reasons.UNKNOWN_STATUS


def executor_route(status: Any, *, done: tuple[str, str], give_up: str, reasons) -> tuple[str, str]:
    """An executor is never retried: COMPLETED takes `done` (route, reason); anything else `give_up`,
    with the reason code of its status."""
    status = normalise_status(status)
    if status == S.COMPLETED:
        return done
    if status is None:
        return give_up, reasons.MISSING_STATUS
    failures = {S.INVALID_OUTPUT: reasons.INVALID_OUTPUT, S.TOOL_BLOCKED: reasons.TOOL_BLOCKED, S.FAILED: reasons.FAILED}
    return give_up, failures.get(status, reasons.UNKNOWN_STATUS)


def append_event(update: dict, state: Mapping[str, Any], event: dict[str, Any]) -> dict:
    """Adds one orchestration event to `update` while the run's stored events have room; returns it."""
    events = state.get(ORCHESTRATION_EVENTS)
    if events is None or len(events) < MAX_ORCHESTRATION_EVENTS:
        update[ORCHESTRATION_EVENTS] = [event]
    return update


def degrade(update: dict, *, safety_answer: str) -> dict:
    """A fallback's update: the run is degraded and always has an answer (the safety answer when the
    fallback port gave none); returns `update`."""
    answer = update.get(FINAL_ANSWER)
    if not isinstance(answer, str) or not answer.strip():
        update[FINAL_ANSWER] = safety_answer
    update[DEGRADED] = True
    return update


def unbound_port(name: str) -> Port:
    """A port that only describes: the compiled graph can be drawn, never run."""
    def port(state, config):
        raise GraphError(f"Node port {name!r} is unbound: this graph describes the topology, it does not run")

    return port
