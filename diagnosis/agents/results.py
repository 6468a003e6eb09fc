"""The one result mapper: a final (or partial) graph state -> what a run stores (SPEC §7)."""

from __future__ import annotations

import json
from typing import Any, Mapping

from diagnosis.structured_diagnosis import empty_diagnosis
from diagnosis.contracts import RunResult, Verdict, known_verdict
from diagnosis.graph.state import NodeName as N
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.trace import build_orchestration_trace
from diagnosis.model_text import cap_strings
from diagnosis.redaction import redact_value
from diagnosis.tools.registry import SUCCESS


def rule_evaluation(state: Mapping[str, Any], outcomes: list, budget: dict) -> dict[str, Any]:
    gk = state.get(K.GATEKEEPER_RESULT) or {}
    events = state.get(K.ORCHESTRATION_EVENTS) or ()
    by_status: dict[str, int] = {}
    for outcome in outcomes:
        by_status[outcome.status] = by_status.get(outcome.status, 0) + 1
    total = len(outcomes)
    return {
        "citation_validity_rate": gk.get("citation_validity", 0.0),
        "claims_verified": gk.get("verified_claim_count", 0),
        "claims_total": gk.get("total_claim_count", 0),
        "bindings_verified": gk.get("verified_binding_count", 0),
        "bindings_total": gk.get("total_binding_count", 0),
        "tool_calls": total,
        "tool_calls_by_status": by_status,
        "tool_success_rate": round(by_status.get(SUCCESS, 0) / total, 4) if total else None,
        "fallback_used": any(e.get("node") == N.FALLBACK for e in events),
        "evidence_retry_used": int(state.get(K.EVIDENCE_RETRY_COUNT) or 0) > 0,
        "budget": budget,
    }


def served_render(state: Mapping[str, Any]) -> dict[str, Any]:
    """The render audit of the answer actually served: the fallback's when the run degraded, else the composer's."""
    source = state.get(K.FALLBACK_OUTPUT) if state.get(K.DEGRADED) else state.get(K.COMPOSER_OUTPUT)
    render = (source or {}).get("render") if isinstance(source, Mapping) else None
    return render if isinstance(render, Mapping) else {}


def structured_diagnosis_of(state: Mapping[str, Any]) -> dict[str, Any]:
    """The served answer's structured diagnosis (rootCause, nothingWrong, undetermined, symptoms)."""
    diagnosis = served_render(state).get("diagnosis")
    return dict(diagnosis) if isinstance(diagnosis, Mapping) else empty_diagnosis()


def served_verdict(state: Mapping[str, Any]) -> str | None:
    """The verdict of the answer served (SPEC §7, R3): null when the verifier did not run or the degraded
    fallback answer is served; LOW_CONFID at most when the root cause rests only on runbooks or cases."""
    if state.get(K.VERIFIER_STATUS) is None or state.get(K.DEGRADED):
        return None
    verdict = state.get(K.EFFECTIVE_VERDICT)
    if verdict == Verdict.PASS and served_render(state).get("knowledge_only_root"):
        return Verdict.LOW_CONFID
    if verdict == Verdict.PASS and (served_render(state).get("diagnosis") or {}).get("undetermined"):
        return Verdict.LOW_CONFID  # a problem whose cause was not established is never a PASS
    return verdict


def verifier_evaluation(state: Mapping[str, Any], prompt_audit: dict, *, served: str | None) -> dict[str, Any]:
    """`self_evaluation.verifier_evaluation`; `served` is the run's verdict (`served_verdict`), computed once by
    `map_run_result` and stored here as in the run's column."""
    verifier = state.get(K.VERIFIER_OUTPUT) or {}
    ran = state.get(K.VERIFIER_STATUS) is not None
    composer = state.get(K.COMPOSER_OUTPUT) or {}
    return {
        "statuses": {
            "planner": state.get(K.PLANNER_STATUS), "executor": state.get(K.EXECUTOR_STATUS),
            "verifier": state.get(K.VERIFIER_STATUS), "composer": state.get(K.COMPOSER_STATUS),
        },
        # Never a fabricated verdict: when the verifier did not run, these stay null.
        "model_verdict": verifier.get("verdict") if ran else None,
        # The verdict the graph reached; the run's own verdict is null when a degraded answer is served.
        "verifierVerdict": state.get(K.EFFECTIVE_VERDICT) if ran else None,
        "effective_verdict": served,
        "verdict_ceiling": state.get(K.VERDICT_CEILING),
        "score": verifier.get("score") if ran else None,
        "claim_checks": verifier.get("claim_checks", []) if ran else [],
        "fact_checks": verifier.get("fact_checks", []) if ran else [],
        "critical_evidence_gaps": verifier.get("critical_evidence_gaps", []) if ran else [],
        "rationale": verifier.get("rationale") if ran else None,
        "gatekeeper_audit": state.get(K.GATEKEEPER_RESULT),
        "verified_executor_output": state.get(K.VERIFIED_EXECUTOR_OUTPUT),
        "verified_evidence": state.get(K.VERIFIED_EVIDENCE),
        "composer_audit": {
            "status": state.get(K.COMPOSER_STATUS),
            "cited_invocation_ids": composer.get("cited_invocation_ids", []),
            "answer_plan": composer.get("answer_plan"),
            "render": composer.get("render"),
        },
        "answer_render": served_render(state),
        "prompt_audit": prompt_audit,
    }


AUDIT_STRING_MAX_CHARS = 4000
SELF_EVALUATION_MAX_BYTES = 512_000


def bounded_audit(value: Any) -> Any:
    """Every string capped with a cut marker; the whole kept under SELF_EVALUATION_MAX_BYTES."""
    for chars, items in ((AUDIT_STRING_MAX_CHARS, 200), (500, 50), (120, 20)):
        capped = cap_strings(value, chars, max_items=items)
        if len(json.dumps(capped, ensure_ascii=False, default=str).encode()) <= SELF_EVALUATION_MAX_BYTES:
            return capped
    return {"truncated": True, "note": f"the audit exceeded {SELF_EVALUATION_MAX_BYTES} bytes even when cut"}


def map_run_result(*, state: Mapping[str, Any], outcomes: list, budget: dict, prompt_audit: dict) -> RunResult:
    """answer, degraded, effective verdict, self_evaluation and orchestration_trace of one run."""
    events = list(state.get(K.ORCHESTRATION_EVENTS) or ())
    served = known_verdict(served_verdict(state))  # once: the column and the stored evaluation hold the same value
    return RunResult(
        answer=state.get(K.FINAL_ANSWER) or "",
        degraded=bool(state.get(K.DEGRADED)),
        effective_verdict=served,
        diagnosis=redact_value(structured_diagnosis_of(state)),
        # Model-written text (claim statements, rationales) is stored here: mask any secret in it (F-37).
        self_evaluation=bounded_audit(redact_value({
            "rule_evaluation": rule_evaluation(state, outcomes, budget),
            "verifier_evaluation": verifier_evaluation(state, prompt_audit, served=served),
        })),
        orchestration_trace=bounded_audit(redact_value(build_orchestration_trace(events, state))) if events else None,
    )
