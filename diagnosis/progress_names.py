"""The progress stream carries only names from closed sets: every event is checked here before it is
stored, pushed or read back.

Framework-free. Node names, tool names, statuses and replay modes must be members of their closed sets;
the other short fields (outcomes, reason and error codes, task ids, verdicts) must be plain codes
(``CODE_RE``). A value that is neither is *rejected*: the event carries null in its place, and the
caller records a ``violation`` event (kind, field, reason; never the value) in the run's event log.
The value itself stays only in the audit rows (e.g. the BLOCKED tool invocation keeps the name the
model invented).
"""

from __future__ import annotations

import re
from typing import Any

from diagnosis.graph.aiops_state import AiOpsNode
from diagnosis.graph.state import NodeName, NodeStatus
from diagnosis.tools.recorded import LIVE_FALLBACK, NOT_IN_RECORDING, RECORDED
from diagnosis.tools.registry import ALLOWED_TOOLS, BLOCKED, ERROR, SUCCESS

EVENT_KINDS = frozenset({"step", "tool", "node", "status", "report", "violation"})
NODE_NAMES = frozenset(NodeName.ALL) | frozenset(AiOpsNode.ALL)
TOOL_NAMES = frozenset(ALLOWED_TOOLS)
STATUSES = frozenset({"PENDING", "RUNNING", "SUCCESS", "FAILED", "COMPLETED", SUCCESS, ERROR, BLOCKED}) | NodeStatus.ALL
REPLAY_MODES = frozenset({RECORDED, NOT_IN_RECORDING, LIVE_FALLBACK})
NAME_FIELDS: dict[str, frozenset[str]] = {
    "node": NODE_NAMES, "toolName": TOOL_NAMES, "status": STATUSES, "replayMode": REPLAY_MODES,
}
CODE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}$")
CODE_FIELDS = frozenset({
    "outcome", "reason_code", "error", "errorCode", "task_id", "verdict", "gatekeeper_reason", "task_status",
    "alertsSource", "invocationId", "invocation_id", "runId", "decision",
})


def checked_event(kind: str, data: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """(the event's data with every out-of-set name replaced by null, the violations found)."""
    violations: list[dict[str, str]] = []
    if kind not in EVENT_KINDS:
        return {}, [{"kind": "unknown", "field": "event", "reason": "kind_not_in_closed_set"}]
    clean: dict[str, Any] = {}
    for key, value in data.items():
        allowed = NAME_FIELDS.get(key)
        if allowed is not None and value is not None:
            if not (isinstance(value, str) and value in allowed):
                violations.append({"kind": kind, "field": key, "reason": "not_in_closed_set"})
                value = None
        elif key in CODE_FIELDS and value is not None:
            if not (isinstance(value, str) and CODE_RE.match(value)):
                violations.append({"kind": kind, "field": key, "reason": "not_a_code"})
                value = None
        clean[key] = value
    return clean, violations


def violation_event(violation: dict[str, str]) -> dict[str, str]:
    """The data of a ``violation`` event: what was rejected where, never the rejected value."""
    return {"kind": violation["kind"], "field": violation["field"], "reason": violation["reason"]}
