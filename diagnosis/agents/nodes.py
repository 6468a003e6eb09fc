"""The eight node adapters plugged into `build_diagnosis_graph`.

Planner, executor, verifier and composer call the model; gatekeeper, verified_input,
evidence_retry and fallback are deterministic. Every expected failure becomes a status:
adapters never raise for a model fault, a bad output or a failing tool.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from diagnosis import i18n
from diagnosis.agents.catalog import load_catalog, prompt, prompt_echoed
from diagnosis.agents.runtime import AgentContext, question_language
from diagnosis.agents.tool_loop import run_tool_loop
from diagnosis.answer_render import ANSWER_PLAN_VERSION, render_answer, validate_answer_plan
from diagnosis.contracts import EvidenceShapeError, ExecutorEvidence
from diagnosis.gatekeeper import project_verified_input, verify_bindings
from diagnosis.graph.state import NodeName as N
from diagnosis.graph.state import NodeStatus as S
from diagnosis.graph.state import PlannerMode
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import DiagnosisNodes
from diagnosis.llm.base import ModelError, ModelInvalidOutputError
from diagnosis.localisation.taxonomy import CAUSE_KINDS
from diagnosis.structured_diagnosis import no_records, record_services, records_resolver
from diagnosis.tools.registry import EVIDENCE_TOOLS

MAX_PLAN_STEPS = 12
STATUS_BY_KIND = {"retryable": S.RETRYABLE_FAILED, "non_retryable": S.NON_RETRYABLE_FAILED, "invalid_output": S.INVALID_OUTPUT}


def _status_for(exc: ModelError) -> str:
    return STATUS_BY_KIND.get(exc.kind, S.NON_RETRYABLE_FAILED)


def _query(state: Mapping[str, Any]) -> str:
    return (state.get(K.DIAGNOSIS_CONTEXT) or {}).get("query", "")


def _attempt(state: Mapping[str, Any], key: str) -> int:
    return int(state.get(key) or 0) + 1


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _invalid(message: str, field: str | None = None) -> ModelInvalidOutputError:
    return ModelInvalidOutputError(message, field=field)


# --------------------------------------------------------------------------- output validation


def validate_plan(plan: Any) -> dict:
    if not isinstance(plan, dict) or not isinstance(plan.get("steps"), list):
        raise _invalid("planner output must be an object with a 'steps' list", "steps")
    steps = []
    for i, step in enumerate(plan["steps"][:MAX_PLAN_STEPS]):
        if not isinstance(step, dict) or not isinstance(step.get("tool"), str):
            raise _invalid(f"steps[{i}] must be an object with a 'tool' name", f"steps[{i}].tool")
        arguments = step.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise _invalid(f"steps[{i}].arguments must be an object", f"steps[{i}].arguments")
        steps.append({"tool": step["tool"], "arguments": arguments, "purpose": str(step.get("purpose", ""))[:300]})
    return {
        "version": "planner_plan_v1", "goal": str(plan.get("goal", ""))[:500],
        "services": [s for s in _list(plan.get("services")) if isinstance(s, str)][:10],
        "language": plan.get("language") if plan.get("language") in ("en", "zh") else None,
        "steps": steps,
    }


def validate_evidence(output: Any) -> dict:
    """The executor's answer, parsed once by its owner (`contracts.ExecutorEvidence.parse`), as the state carries it."""
    try:
        return ExecutorEvidence.parse(output).to_dict()
    except EvidenceShapeError as exc:
        raise _invalid(str(exc), exc.field) from None


def validate_verifier(output: Any) -> dict:
    if not isinstance(output, dict) or output.get("verdict") not in ("PASS", "LOW_CONFID", "REJECT"):
        raise _invalid("verifier output needs a verdict of PASS, LOW_CONFID or REJECT", "verdict")
    for key in ("claim_checks", "fact_checks", "critical_evidence_gaps"):
        if not isinstance(output.get(key, []), list):
            raise _invalid(f"verifier '{key}' must be a list", key)
    score = output.get("score")
    if score is not None and not isinstance(score, (int, float)):
        raise _invalid("verifier 'score' must be a number", "score")
    gaps = [g for g in output.get("critical_evidence_gaps", []) if isinstance(g, dict) and g.get("gap")]
    return {
        "verdict": output["verdict"], "score": float(score) if score is not None else None,
        "claim_checks": output.get("claim_checks", [])[:50], "fact_checks": output.get("fact_checks", [])[:50],
        "critical_evidence_gaps": gaps[:5], "rationale": str(output.get("rationale", ""))[:2000],
    }


def validate_composition(output: Any) -> dict:
    """The composer's ``answer_plan_v1`` (which verified claims go where, next steps); never Markdown."""
    try:
        return validate_answer_plan(output)
    except ValueError as exc:
        raise _invalid(str(exc), "version") from None


def compose_answer(*, plan: Mapping[str, Any], verified_output: Mapping[str, Any] | None, verdict: str | None,
                   language: str, verifier: Mapping[str, Any] | None = None, offline: bool = False,
                   failed_tools=(), lookup=None, run_id: str = "") -> dict:
    """Render the answer on the server from the verified claims the plan names (SPEC R1)."""
    claims = [c for c in (verified_output or {}).get("claims") or [] if isinstance(c, Mapping)]
    unsupported = {str(c.get("claim_id")) for c in (verifier or {}).get("claim_checks") or []
                   if isinstance(c, Mapping) and c.get("supported") is False}
    # A verified statement that repeats a system prompt is not shown either.
    unsupported |= {str(c.get("claim_id")) for c in claims if prompt_echoed(str(c.get("statement", "")))}
    records_of = records_resolver(lookup, claims, run_id=run_id) if lookup is not None else no_records
    rendered = render_answer(plan=plan, claims=claims, verdict=verdict, language=language, exclude=unsupported,
                             offline=offline, prompt_echoed=prompt_echoed, failed_tools=failed_tools,
                             records_of=records_of)
    return {
        "answer_plan": dict(plan), "answer_markdown": rendered.markdown, "suggestions": rendered.suggestions,
        "cited_invocation_ids": rendered.cited_invocation_ids, "render": rendered.audit(),
        "knowledge_only_root": rendered.knowledge_only_root,
    }


def merge_snapshot(previous: dict | None, current: dict) -> dict:
    """EVIDENCE_GAP_ONLY re-emits the full snapshot: keep earlier claims the executor left out."""
    if not previous:
        return current
    ids = {c.get("claim_id") for c in current["claims"]}
    carried = [c for c in previous.get("claims", []) if c.get("claim_id") not in ids]
    return {**current, "claims": carried + current["claims"]}


def _verified_only_input(state, evidence) -> dict:
    """What the verifier and the composer start from (SPEC §5): the question's context and language,
    and only the verified claims and evidence; no raw executor output, no tool trace."""
    return {
        "diagnosis_context": dict(state.get(K.DIAGNOSIS_CONTEXT) or {}),
        "language": question_language(_query(state)),
        "verified_executor_output": state.get(K.VERIFIED_EXECUTOR_OUTPUT),
        "verified_evidence": evidence,
    }


# --------------------------------------------------------------------------- adapters


class DiagnosisAgents:
    """Node adapters bound to one run's `AgentContext`."""

    def __init__(self, ctx: AgentContext):
        self.ctx = ctx

    def nodes(self) -> DiagnosisNodes:
        return DiagnosisNodes(
            planner=self.planner, executor=self.executor, gatekeeper=self.gatekeeper,
            verified_input=self.verified_input, verifier=self.verifier, evidence_retry=self.evidence_retry,
            composer=self.composer, fallback=self.fallback,
        )

    def _answer_of(self, role: str, state, retry_count_key: str, payload: dict, validate):
        """One model call of a node whose answer is a JSON object (its role names the node and the
        prompt), validated; a ModelError when the call fails or the answer does not validate."""
        reply = self.ctx.call_model(
            node=role, role=role, attempt=_attempt(state, retry_count_key),
            system=prompt(role).text, user=payload, structured_input=payload,
        )
        return validate(reply.parse_json())

    # -- planner ---------------------------------------------------------------------------------
    def planner(self, state, config):
        mode = state.get(K.PLANNER_MODE) or PlannerMode.NORMAL
        question = _query(state)
        payload = {
            "question": question, "mode": mode, "language": question_language(question),
            "history": self.ctx.history, "retry_context": state.get(K.RETRY_CONTEXT),
            "allowed_tools": sorted(EVIDENCE_TOOLS),
        }
        try:
            plan = self._answer_of(N.PLANNER, state, K.PLANNER_RETRY_COUNT, payload, validate_plan)
        except ModelError as exc:
            return {K.PLANNER_STATUS: _status_for(exc), K.PLANNER_PLAN: {"error": exc.to_dict()}}
        return {K.PLANNER_STATUS: S.COMPLETED, K.PLANNER_PLAN: {**plan, "mode": mode}}

    # -- executor --------------------------------------------------------------------------------
    def executor(self, state, config):
        ctx = self.ctx
        mode = state.get(K.PLANNER_MODE) or PlannerMode.NORMAL
        previous = state.get(K.EXECUTOR_OUTPUT) if mode == PlannerMode.EVIDENCE_GAP_ONLY else None
        question = _query(state)
        payload = {
            "question": question, "mode": mode, "language": question_language(question), "history": ctx.history,
            "plan": state.get(K.PLANNER_PLAN), "previous_snapshot": previous,
            "tool_budget": ctx.tools.remaining,
        }
        messages = [
            {"role": "system", "content": prompt("executor").text},
            {"role": "user", "content": json.dumps(payload, ensure_ascii=False, default=str)},
        ]
        attempt = int(state.get(K.EVIDENCE_RETRY_COUNT) or 0) + 1
        try:
            loop = run_tool_loop(
                ctx, node=N.EXECUTOR, role="executor", attempt=attempt, messages=messages,
                tool_budget=ctx.tools.max_calls, unfinished="the executor never produced its final evidence report",
                structured_input=lambda results, _calls: {**payload, "tool_results": results,
                                                          "tool_budget": ctx.tools.remaining},
            )
            if loop.error is not None:
                raise loop.error
            if loop.reply is None:
                return {K.EXECUTOR_STATUS: S.TOOL_BLOCKED, K.EXECUTOR_OUTPUT: {"error": loop.blocked_error()}}
            output = merge_snapshot(previous, validate_evidence(loop.reply.parse_json()))
            return {K.EXECUTOR_STATUS: S.COMPLETED, K.EXECUTOR_OUTPUT: output}
        except ModelError as exc:
            status = S.INVALID_OUTPUT if exc.kind == "invalid_output" else S.FAILED
            return {K.EXECUTOR_STATUS: status, K.EXECUTOR_OUTPUT: {"error": exc.to_dict()}}

    # -- gatekeeper and verified input -----------------------------------------------------------
    def gatekeeper(self, state, config):
        result = verify_bindings(
            executor_output=state.get(K.EXECUTOR_OUTPUT), run_id=self.ctx.run_id, lookup=self.ctx.lookup,
            echo_sources=run_inputs(_query(state), self.ctx.tools.outcomes), statement_echoes=prompt_echoed,
        )
        return {K.GATEKEEPER_RESULT: result.to_dict()}

    def verified_input(self, state, config):
        verified_output, verified_evidence = project_verified_input(
            executor_output=state.get(K.EXECUTOR_OUTPUT), gatekeeper_result=state.get(K.GATEKEEPER_RESULT),
        )
        return {K.VERIFIED_EXECUTOR_OUTPUT: verified_output, K.VERIFIED_EVIDENCE: verified_evidence}

    # -- verifier --------------------------------------------------------------------------------
    def verifier(self, state, config):
        gatekeeper = state.get(K.GATEKEEPER_RESULT) or {}
        payload = {
            **_verified_only_input(state, state.get(K.VERIFIED_EVIDENCE)),
            "gatekeeper_audit": {k: gatekeeper.get(k) for k in (
                "verdict", "verified_binding_count", "total_binding_count", "verified_claim_count",
                "total_claim_count", "citation_validity")},
            "verdict_ceiling": state.get(K.VERDICT_CEILING),
            "retry_context": state.get(K.RETRY_CONTEXT),
        }
        try:
            output = self._answer_of(N.VERIFIER, state, K.VERIFIER_RETRY_COUNT, payload, validate_verifier)
        except ModelError as exc:
            return {K.VERIFIER_STATUS: _status_for(exc), K.VERIFIER_OUTPUT: {"error": exc.to_dict()}}
        return {K.VERIFIER_STATUS: S.COMPLETED, K.VERIFIER_OUTPUT: output}

    def evidence_retry(self, state, config):
        gaps = (state.get(K.VERIFIER_OUTPUT) or {}).get("critical_evidence_gaps") or []
        return {K.RETRY_CONTEXT: {
            "critical_evidence_gaps": list(gaps),
            "previous_verdict": (state.get(K.VERIFIER_OUTPUT) or {}).get("verdict"),
        }}

    # -- composer --------------------------------------------------------------------------------
    def composer(self, state, config):
        evidence = list(state.get(K.VERIFIED_EVIDENCE) or [])
        verifier = state.get(K.VERIFIER_OUTPUT) or {}
        question = _query(state)
        payload = {
            **_verified_only_input(state, evidence),
            "effective_verdict": state.get(K.EFFECTIVE_VERDICT),
            "verifier": {k: verifier.get(k) for k in ("verdict", "score", "claim_checks", "critical_evidence_gaps", "rationale")},
            # The only ids the composer may choose for the structured diagnosis (validated on return).
            "cause_kinds": [{"id": kind.id, "label": kind.label_en} for kind in CAUSE_KINDS],
            "claim_services": self._claim_services(state),
        }
        try:
            plan = self._answer_of(N.COMPOSER, state, K.COMPOSER_RETRY_COUNT, payload, validate_composition)
        except ModelError as exc:
            return {K.COMPOSER_STATUS: _status_for(exc), K.COMPOSER_OUTPUT: {"error": exc.to_dict()}}
        verdict = state.get(K.EFFECTIVE_VERDICT)
        output = compose_answer(
            plan=plan, verified_output=state.get(K.VERIFIED_EXECUTOR_OUTPUT), verdict=verdict,
            language=question_language(question), verifier=verifier, offline=self._offline(),
            failed_tools=[o.tool_name for o in self.ctx.tools.outcomes if o.status == "ERROR"],
            lookup=self.ctx.lookup, run_id=self.ctx.run_id,
        )
        # A root cause resting only on runbooks or past cases is capped at LOW_CONFID by `map_run_result`.
        return {K.COMPOSER_STATUS: S.COMPLETED, K.COMPOSER_OUTPUT: output, K.FINAL_ANSWER: output["answer_markdown"]}

    def _claim_services(self, state) -> dict[str, list[str]]:
        """Per verified claim, the services its cited records name (the root-cause service is one of these)."""
        claims = [c for c in (state.get(K.VERIFIED_EXECUTOR_OUTPUT) or {}).get("claims") or [] if isinstance(c, Mapping)]
        records_of = records_resolver(self.ctx.lookup, claims, run_id=self.ctx.run_id)
        return {str(c.get("claim_id")): record_services(records_of(c)) for c in claims}

    def _offline(self) -> bool:
        return any(str(name).startswith("offline-analyser") for name in self.ctx.models_used)

    # -- fallback --------------------------------------------------------------------------------
    def fallback(self, state, config):
        # A spent run budget (wall time, model calls, tokens) is the reason, whichever node it stopped.
        reason = "budget_exhausted" if self.ctx.budget.exceeded else _fallback_reason(state)
        output = compose_fallback(
            question=_query(state), verified_output=state.get(K.VERIFIED_EXECUTOR_OUTPUT),
            runbooks=self._runbooks_seen(), reason=reason,
        )
        return {K.FALLBACK_OUTPUT: {**output, "reason": reason}, K.FINAL_ANSWER: output["answer_markdown"]}

    def _runbooks_seen(self) -> list[dict]:
        seen, runbooks = set(), []
        for outcome in self.ctx.tools.outcomes:
            if outcome.tool_name != "lookup_knowledge" or outcome.status != "SUCCESS":
                continue
            for item in (outcome.result or {}).get("results", []):
                key = item.get("path") or item.get("title")
                if key and key not in seen:
                    seen.add(key)
                    runbooks.append({"title": str(item.get("title", ""))[:120], "path": str(item.get("path", ""))[:200],
                                     "invocation_id": outcome.invocation_id})
        return runbooks[:5]


def run_inputs(question: str, outcomes) -> list[str]:
    """What an excerpt may not merely repeat: the question, every tool argument of this run, the prompts."""
    texts = [question]
    for outcome in outcomes:
        arguments = outcome.arguments if isinstance(outcome.arguments, dict) else {}
        texts += [v for v in arguments.values() if isinstance(v, str)]
    texts += [p.text for p in load_catalog().values()]
    return texts


def _fallback_reason(state: Mapping[str, Any]) -> str:
    events = state.get(K.ORCHESTRATION_EVENTS) or ()
    if not events:
        return "no_events"
    last = events[-1]
    return f"{last.get('node')}:{last.get('reason_code')}"


def compose_fallback(*, question: str, verified_output: Mapping[str, Any] | None, runbooks: list[dict],
                     reason: str) -> dict:
    """The deterministic safe answer, rendered like every answer: verified claims only, no verdict,
    the next steps in the labelled suggestions section."""
    language = question_language(question)
    head = [
        i18n.text("**The diagnosis could not be completed (degraded answer).**", language),
        "",
        i18n.text("No verified root cause is reported (reason: `{reason}`).", language, context="chat answer",
                  reason=_safe_reason(reason)),
        "",
    ]
    steps = [
        i18n.text("Check the error logs and key metrics (latency, error rate, saturation) of the services involved.",
                  language),
        i18n.text("Review the queries in the run trace and ask again naming the service if needed.", language),
    ]
    if runbooks:
        steps.insert(0, i18n.text("Read the runbooks this run retrieved (listed in the run trace).", language))
    rendered = render_answer(plan={"version": ANSWER_PLAN_VERSION}, claims=(verified_output or {}).get("claims") or [],
                             verdict=None, language=language, suggestions=steps, quotes_only=True)
    return {"answer_markdown": "\n".join(head) + rendered.markdown, "suggestions": rendered.suggestions,
            "cited_invocation_ids": rendered.cited_invocation_ids, "render": rendered.audit()}


def _safe_reason(reason: str) -> str:
    return re.sub(r"[^a-z0-9_:.\-]", "", str(reason).lower())[:80]
