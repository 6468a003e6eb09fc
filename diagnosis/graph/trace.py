"""The compact orchestration trace stored on a run: the route taken, never prompts or raw outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from diagnosis.contracts import TRACE_VERSION, ReasonCode

from .state import NodeName, StateKey

TRACE_END = "END"
MAX_TRACE_TRANSITIONS = 64
_MAX_TEXT = 64


def _text(value: Any) -> str:
    return str(value)[:_MAX_TEXT]


def _attempt(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _ended(event: Mapping[str, Any]) -> bool:
    """Whether the node of this event routes to END: fallback always, composer when it completed."""
    node = event.get("node")
    return node == NodeName.FALLBACK or (
        node == NodeName.COMPOSER and event.get("reason_code") == ReasonCode.COMPLETED
    )


def build_orchestration_trace(
    events: Sequence[Mapping[str, Any]] | None,
    final_state: Mapping[str, Any] | None = None,
    *,
    interrupted_at: str | None = None,
    ended: bool | None = None,
) -> dict[str, Any] | None:
    """The ``stategraph-v1`` trace of a run from its orchestration events; None without events.

    For a failed run pass the partial state and, when known, the node that raised
    (``interrupted_at``): the trace then ends there with ``<node>_interrupted``. ``ended=True`` says the
    graph reached END (any topology); left None, the diagnosis topology's ending nodes decide.
    """
    events = [event for event in (events or ()) if isinstance(event, Mapping)]
    if not events:
        return None
    final_state = final_state or {}

    transitions = []
    for current, following in zip(events, events[1:]):
        transitions.append(_transition(current, following.get("node")))
    last = events[-1]
    last_node = _text(last.get("node"))

    if interrupted_at is None and (ended if ended is not None else _ended(last)):
        transitions.append(_transition(last, TRACE_END))
        final_node, termination = last_node, f"{last_node}_completed"
    elif interrupted_at is not None:
        transitions.append(_transition(last, interrupted_at))
        final_node = _text(interrupted_at)
        termination = f"{final_node}_interrupted"
    else:
        final_node, termination = last_node, f"{last_node}_interrupted"

    evidence_retries = final_state.get(StateKey.EVIDENCE_RETRY_COUNT)
    if not isinstance(evidence_retries, int) or isinstance(evidence_retries, bool):
        evidence_retries = sum(1 for event in events if event.get("node") == NodeName.EVIDENCE_RETRY)
    return {
        "version": TRACE_VERSION,
        "transitions": transitions[:MAX_TRACE_TRANSITIONS],
        "final_node": final_node,
        "termination_reason": termination,
        "degraded": final_state.get(StateKey.DEGRADED) is True,
        "evidence_retry_count": evidence_retries,
    }


def _transition(event: Mapping[str, Any], to: Any) -> dict[str, Any]:
    return {
        "from": _text(event.get("node")),
        "to": _text(to),
        "reason_code": _text(event.get("reason_code")),
        "attempt": _attempt(event.get("attempt")),
    }
