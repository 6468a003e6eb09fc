"""Names shared by the diagnosis graph and its node adapters: state keys, nodes, statuses, and the
state schema (`DiagnosisState`).

Plain classes of ``str`` constants, so values compare, hash and serialise as the strings they are.
"""

from __future__ import annotations

from typing import Any, TypedDict

# The verdict and the routing reason codes are cross-layer contracts: declared once, in diagnosis.contracts.
from diagnosis.contracts import ReasonCode, Verdict, effective_verdict, known_verdict, min_verdict  # noqa: F401


class NodeName:
    PLANNER = "planner"
    EXECUTOR = "executor"
    GATEKEEPER = "gatekeeper"
    VERIFIED_INPUT = "verified_input"
    VERIFIER = "verifier"
    EVIDENCE_RETRY = "evidence_retry"
    COMPOSER = "composer"
    FALLBACK = "fallback"

    ALL = (PLANNER, EXECUTOR, GATEKEEPER, VERIFIED_INPUT, VERIFIER, EVIDENCE_RETRY, COMPOSER, FALLBACK)


class NodeStatus:
    """What a planner, executor, verifier or composer port reports in its ``<node>_status`` key."""

    COMPLETED = "COMPLETED"
    INVALID_OUTPUT = "INVALID_OUTPUT"
    RETRYABLE_FAILED = "RETRYABLE_FAILED"
    NON_RETRYABLE_FAILED = "NON_RETRYABLE_FAILED"
    TOOL_BLOCKED = "TOOL_BLOCKED"
    FAILED = "FAILED"

    ALL = frozenset({COMPLETED, INVALID_OUTPUT, RETRYABLE_FAILED, NON_RETRYABLE_FAILED, TOOL_BLOCKED, FAILED})
    # Failures worth one technical retry (planner, verifier, composer only).
    TECHNICAL = frozenset({INVALID_OUTPUT, RETRYABLE_FAILED})


class PlannerMode:
    NORMAL = "NORMAL"
    EVIDENCE_GAP_ONLY = "EVIDENCE_GAP_ONLY"


class StateKey:
    DIAGNOSIS_CONTEXT = "diagnosis_context"  # {query, original_query}
    PLANNER_MODE = "planner_mode"
    PLANNER_STATUS = "planner_status"
    PLANNER_PLAN = "planner_plan"
    EXECUTOR_STATUS = "executor_status"
    EXECUTOR_OUTPUT = "executor_output"  # contracts.ExecutorEvidence.to_dict() (or {"error": ...})
    GATEKEEPER_RESULT = "gatekeeper_result"  # {verdict, verified_binding_count, ...audit}
    VERDICT_CEILING = "verdict_ceiling"  # the gatekeeper verdict, set by the topology
    VERIFIED_EXECUTOR_OUTPUT = "verified_executor_output"  # contracts.ExecutorEvidence.to_dict(), verified only
    VERIFIED_EVIDENCE = "verified_evidence"
    VERIFIER_STATUS = "verifier_status"
    VERIFIER_OUTPUT = "verifier_output"  # {verdict, score, claim_checks, fact_checks, critical_evidence_gaps, rationale}
    EFFECTIVE_VERDICT = "effective_verdict"  # min(verifier verdict, ceiling), set by the topology
    RETRY_CONTEXT = "retry_context"  # {critical_evidence_gaps, previous_verdict} for EVIDENCE_GAP_ONLY
    COMPOSER_STATUS = "composer_status"
    COMPOSER_OUTPUT = "composer_output"
    FALLBACK_OUTPUT = "fallback_output"
    FINAL_ANSWER = "final_answer"
    DEGRADED = "degraded"
    PLANNER_RETRY_COUNT = "planner_retry_count"
    VERIFIER_RETRY_COUNT = "verifier_retry_count"
    COMPOSER_RETRY_COUNT = "composer_retry_count"
    EVIDENCE_RETRY_COUNT = "evidence_retry_count"
    ORCHESTRATION_EVENTS = "orchestration_events"  # append reducer; plain dicts {node, outcome, reason_code, attempt}

    ALL = frozenset(
        {
            DIAGNOSIS_CONTEXT, PLANNER_MODE, PLANNER_STATUS, PLANNER_PLAN, EXECUTOR_STATUS, EXECUTOR_OUTPUT,
            GATEKEEPER_RESULT, VERDICT_CEILING, VERIFIED_EXECUTOR_OUTPUT, VERIFIED_EVIDENCE, VERIFIER_STATUS,
            VERIFIER_OUTPUT, EFFECTIVE_VERDICT, RETRY_CONTEXT, COMPOSER_STATUS, COMPOSER_OUTPUT,
            FALLBACK_OUTPUT, FINAL_ANSWER, DEGRADED, PLANNER_RETRY_COUNT, VERIFIER_RETRY_COUNT,
            COMPOSER_RETRY_COUNT, EVIDENCE_RETRY_COUNT, ORCHESTRATION_EVENTS,
        }
    )


class DiagnosisState(TypedDict, total=False):
    """The diagnosis graph's state schema: every key a node or the topology may write (see StateKey)."""

    diagnosis_context: dict[str, Any]  # {query, original_query}
    planner_mode: str  # PlannerMode
    planner_status: str  # NodeStatus
    planner_plan: dict[str, Any]  # planner_plan_v1
    executor_status: str
    executor_output: dict[str, Any]  # contracts.ExecutorEvidence.to_dict(), parsed by its owner at the node
    gatekeeper_result: dict[str, Any]  # contracts.GatekeeperResult.to_dict()
    verdict_ceiling: str  # contracts.Verdict
    verified_executor_output: dict[str, Any]  # contracts.ExecutorEvidence.to_dict()
    verified_evidence: list[dict[str, Any]]
    verifier_status: str
    verifier_output: dict[str, Any]
    effective_verdict: str | None  # contracts.effective_verdict
    retry_context: dict[str, Any]
    composer_status: str
    composer_output: dict[str, Any]
    fallback_output: dict[str, Any]
    final_answer: str
    degraded: bool
    planner_retry_count: int
    verifier_retry_count: int
    composer_retry_count: int
    evidence_retry_count: int
    orchestration_events: list[dict[str, Any]]


assert frozenset(DiagnosisState.__annotations__) == StateKey.ALL, "DiagnosisState and StateKey name the same keys"


# The keys each node port may return. Everything else (counters, events, planner_mode, ceiling,
# effective verdict, degraded) belongs to the topology; a port writing it is a contract error.
PORT_OUTPUT_KEYS: dict[str, frozenset[str]] = {
    NodeName.PLANNER: frozenset({StateKey.PLANNER_STATUS, StateKey.PLANNER_PLAN}),
    NodeName.EXECUTOR: frozenset({StateKey.EXECUTOR_STATUS, StateKey.EXECUTOR_OUTPUT}),
    NodeName.GATEKEEPER: frozenset({StateKey.GATEKEEPER_RESULT}),
    NodeName.VERIFIED_INPUT: frozenset({StateKey.VERIFIED_EXECUTOR_OUTPUT, StateKey.VERIFIED_EVIDENCE}),
    NodeName.VERIFIER: frozenset({StateKey.VERIFIER_STATUS, StateKey.VERIFIER_OUTPUT}),
    NodeName.EVIDENCE_RETRY: frozenset({StateKey.RETRY_CONTEXT}),
    NodeName.COMPOSER: frozenset({StateKey.COMPOSER_STATUS, StateKey.COMPOSER_OUTPUT, StateKey.FINAL_ANSWER}),
    NodeName.FALLBACK: frozenset({StateKey.FALLBACK_OUTPUT, StateKey.FINAL_ANSWER}),
}

# The status key each retried / routed-by-status node reports in.
STATUS_KEYS: dict[str, str] = {
    NodeName.PLANNER: StateKey.PLANNER_STATUS,
    NodeName.EXECUTOR: StateKey.EXECUTOR_STATUS,
    NodeName.VERIFIER: StateKey.VERIFIER_STATUS,
    NodeName.COMPOSER: StateKey.COMPOSER_STATUS,
}

# Technical-retry counters: the number of retries already used (attempt = count + 1).
RETRY_COUNT_KEYS: dict[str, str] = {
    NodeName.PLANNER: StateKey.PLANNER_RETRY_COUNT,
    NodeName.VERIFIER: StateKey.VERIFIER_RETRY_COUNT,
    NodeName.COMPOSER: StateKey.COMPOSER_RETRY_COUNT,
}


class EventOutcome:
    """``outcome`` of an event when the node's own status/verdict is not a known value."""

    MISSING = "MISSING"
    UNKNOWN = "UNKNOWN"
    COMPLETED = NodeStatus.COMPLETED


MAX_TECHNICAL_RETRIES = 1
MAX_EVIDENCE_RETRIES = 1
DIAGNOSIS_RECURSION_LIMIT = 32
MAX_ORCHESTRATION_EVENTS = 64
