"""The chat flows' executors: the diagnosis graph and the simple answer, each given its `RunContext`.

Persistence order (seed 001 decision 6): the graph returns a non-empty answer -> the trace and the
evaluation are built -> SUCCESS is saved with the answer, trace, duration and counts. Any
unhandled error ends FAILED with its code, its message and only the partial trace that exists.
"""

from __future__ import annotations

from diagnosis.agents.catalog import prompt, prompt_audit, prompt_echoed
from diagnosis.agents.nodes import DiagnosisAgents
from diagnosis.agents.results import map_run_result
from diagnosis.agents.runtime import question_language, simple_fallback_answer
from diagnosis.answer_render import render_simple_answer
from diagnosis.contracts import RunResult
from diagnosis.graph.engine import GraphRunError, RunConfig
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import DIAGNOSIS_RECURSION_LIMIT, build_diagnosis_graph, initial_diagnosis_state
from diagnosis.graph.trace import build_orchestration_trace
from diagnosis.llm.base import ModelError
from diagnosis.models import DiagnosisRun
from diagnosis.services import memory
from diagnosis.services.run_context import RunContext


def diagnosis_execute(rc: RunContext) -> DiagnosisRun | None:
    """DIAGNOSIS: stream the diagnosis graph, publishing its node events, and save the mapped result."""
    run, publish = rc.run, rc.publish
    graph = build_diagnosis_graph(DiagnosisAgents(rc.agent).nodes())
    state = initial_diagnosis_state(run.question)
    config = RunConfig.for_run(run_id=run.run_id, session_id=rc.recorder.session_id,
                               recursion_limit=DIAGNOSIS_RECURSION_LIMIT)
    seen_events = 0
    try:
        for node, _update, state in graph.stream(state, config):
            rc.heartbeat()
            events = state.get(K.ORCHESTRATION_EVENTS) or ()
            for event in events[seen_events:]:
                publish("node", dict(event))
            seen_events = len(events)
    except GraphRunError as exc:
        partial = exc.partial_state or {}
        events = list(partial.get(K.ORCHESTRATION_EVENTS) or ())
        trace = build_orchestration_trace(events, partial, interrupted_at=exc.node) if events else None
        return rc.fail(code=exc.code, message=str(exc), partial=RunResult(orchestration_trace=trace))
    result = map_run_result(state=state, outcomes=rc.tools.outcomes, budget=rc.budget.to_dict(rc.tools),
                            prompt_audit=prompt_audit())
    if not result.answer.strip():
        return rc.fail(code="missing_answer", message="the graph ended without an answer",
                       partial=RunResult(orchestration_trace=result.orchestration_trace,
                                         self_evaluation=result.self_evaluation))
    return rc.succeed(result)  # with the turn in the session's memory


def simple_execute(rc: RunContext) -> DiagnosisRun | None:
    """SIMPLE: one model call with history; persisted with its agent_step, no orchestration trace."""
    run, ctx, budget = rc.run, rc.agent, rc.budget
    history = memory.memory_messages(session=run.session, before=run)
    messages = [{"role": "system", "content": prompt("simple").text}, *history, {"role": "user", "content": run.question}]
    reason = ""
    try:
        reply = ctx.call_model(node="simple", role="simple", attempt=1, system="", user=None, messages=messages,
                               json_output=False, structured_input={"question": run.question, "history": history})
        answer = (reply.content or "").strip()
        reason = "" if answer else "model_empty_output"
    except ModelError as exc:
        answer, reason = "", exc.code
    removed: list = []
    if reason:  # a failed or empty model reply: the safe answer, recorded as degraded, never FAILED
        reason = "budget_exhausted" if budget.exceeded else reason
        answer = simple_fallback_answer(question=run.question, reason=reason)
    else:
        # Ungated text: labelled as not checked against evidence, no citation-like token (SPEC R1).
        answer, removed = render_simple_answer(answer, language=question_language(run.question),
                                               prompt_echoed=prompt_echoed)
    rules = {"budget": budget.to_dict(), "fallback_used": bool(reason), "fallback_reason": reason or None}
    return rc.succeed(RunResult(answer=answer, degraded=bool(reason), self_evaluation={
        "rule_evaluation": rules, "prompt_audit": prompt_audit(),
        "simple_audit": {"evidence_checked": False, "removed": removed}}))
