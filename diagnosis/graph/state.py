"""Names shared by the diagnosis graph and its node adapters: state keys, nodes, statuses, verdicts.

Plain classes of ``str`` constants, so values compare, hash and serialise as the strings they are.
"""

from __future__ import annotations

from typing import Any


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


class Verdict:
    PASS = "PASS"
    LOW_CONFID = "LOW_CONFID"
    REJECT = "REJECT"

    ALL = frozenset({PASS, LOW_CONFID, REJECT})
    RANK = {REJECT: 0, LOW_CONFID: 1, PASS: 2}


_BY_RANK = (Verdict.REJECT, Verdict.LOW_CONFID, Verdict.PASS)


def known_verdict(value: Any) -> str | None:
    """The verdict if ``value`` is one, else None (never raises on odd input)."""
    return value if isinstance(value, str) and value in Verdict.ALL else None


def min_verdict(*verdicts: Any) -> str:
    """The weakest of the verdicts (REJECT < LOW_CONFID < PASS); anything unknown counts as REJECT."""
    rank = 2
    for verdict in verdicts:
        rank = min(rank, Verdict.RANK.get(known_verdict(verdict), 0))
    return _BY_RANK[rank] if verdicts else Verdict.REJECT


def effective_verdict(model_verdict: Any, ceiling: Any) -> str | None:
    """min(model verdict, gatekeeper ceiling); None when the model gave no readable verdict.

    A missing or unknown ceiling caps at REJECT: without a gatekeeper verdict nothing is verified.
    """
    if known_verdict(model_verdict) is None:
        return None
    return min_verdict(model_verdict, ceiling)


class PlannerMode:
    NORMAL = "NORMAL"
    EVIDENCE_GAP_ONLY = "EVIDENCE_GAP_ONLY"


class StateKey:
    DIAGNOSIS_CONTEXT = "diagnosis_context"  # {query, original_query}
    PLANNER_MODE = "planner_mode"
    PLANNER_STATUS = "planner_status"
    PLANNER_PLAN = "planner_plan"
    EXECUTOR_STATUS = "executor_status"
    EXECUTOR_OUTPUT = "executor_output"  # executor_evidence_v2
    GATEKEEPER_RESULT = "gatekeeper_result"  # {verdict, verified_binding_count, ...audit}
    VERDICT_CEILING = "verdict_ceiling"  # the gatekeeper verdict, set by the topology
    VERIFIED_EXECUTOR_OUTPUT = "verified_executor_output"
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


class ReasonCode:
    """Why a node's run led where it did; stored per event and per trace transition.

    completed              node finished normally and moved on (composer: to END)
    invalid_output         INVALID_OUTPUT: retried (planner/verifier/composer) or, for the executor, fallback
    retryable_failed       RETRYABLE_FAILED with the technical retry still available: the node runs again
    retry_exhausted        a technical failure after the one retry was used: fallback
    non_retryable_failed   NON_RETRYABLE_FAILED: fallback
    tool_blocked           executor called a tool outside the allow-list: fallback
    failed                 executor FAILED: fallback
    missing_status         the node returned no status (or no gatekeeper verdict): fallback
    unknown_status         a status (or gatekeeper verdict) this node's table does not know: fallback
    gatekeeper_pass        gatekeeper PASS: verified_input
    gatekeeper_low_confid  gatekeeper LOW_CONFID with >= 1 verified binding: verified_input
    no_verified_binding    gatekeeper LOW_CONFID with zero verified bindings: fallback
    gatekeeper_reject      gatekeeper REJECT: fallback
    verdict_pass           verifier effective verdict PASS: composer
    verdict_reject         verifier effective verdict REJECT: composer (which makes no root-cause claim)
    evidence_gap           verifier LOW_CONFID with every evidence-retry guard met: evidence_retry
    evidence_retry_exhausted  LOW_CONFID, but the one evidence retry was already used: composer
    ceiling_below_pass     LOW_CONFID, but the gatekeeper ceiling no longer allows PASS: composer
    no_critical_gap        LOW_CONFID, but the verifier named no critical evidence gap: composer
    unknown_verdict        verifier COMPLETED without a readable verdict: fallback
    evidence_gap_only      evidence_retry prepared the EVIDENCE_GAP_ONLY planner phase: planner
    fallback_completed     fallback wrote the safe answer: END
    """

    COMPLETED = "completed"
    INVALID_OUTPUT = "invalid_output"
    RETRYABLE_FAILED = "retryable_failed"
    RETRY_EXHAUSTED = "retry_exhausted"
    NON_RETRYABLE_FAILED = "non_retryable_failed"
    TOOL_BLOCKED = "tool_blocked"
    FAILED = "failed"
    MISSING_STATUS = "missing_status"
    UNKNOWN_STATUS = "unknown_status"
    GATEKEEPER_PASS = "gatekeeper_pass"
    GATEKEEPER_LOW_CONFID = "gatekeeper_low_confid"
    NO_VERIFIED_BINDING = "no_verified_binding"
    GATEKEEPER_REJECT = "gatekeeper_reject"
    VERDICT_PASS = "verdict_pass"
    VERDICT_REJECT = "verdict_reject"
    EVIDENCE_GAP = "evidence_gap"
    EVIDENCE_RETRY_EXHAUSTED = "evidence_retry_exhausted"
    CEILING_BELOW_PASS = "ceiling_below_pass"
    NO_CRITICAL_GAP = "no_critical_gap"
    UNKNOWN_VERDICT = "unknown_verdict"
    EVIDENCE_GAP_ONLY = "evidence_gap_only"
    FALLBACK_COMPLETED = "fallback_completed"


class EventOutcome:
    """``outcome`` of an event when the node's own status/verdict is not a known value."""

    MISSING = "MISSING"
    UNKNOWN = "UNKNOWN"
    COMPLETED = NodeStatus.COMPLETED


MAX_TECHNICAL_RETRIES = 1
MAX_EVIDENCE_RETRIES = 1
DIAGNOSIS_RECURSION_LIMIT = 32
MAX_ORCHESTRATION_EVENTS = 64
