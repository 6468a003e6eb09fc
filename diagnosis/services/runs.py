"""Executing a run: claim it, drive the diagnosis graph (or the simple chat), map and save the result.

Persistence order (seed 001 decision 6): the graph returns a non-empty answer -> the trace and the
evaluation are built -> SUCCESS is saved with the answer, trace, duration and counts. Any
unhandled error ends FAILED with its code, its message and only the partial trace that exists.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from diagnosis.agents.catalog import catalog_version, prompt, prompt_audit
from diagnosis.agents.nodes import DiagnosisAgents
from diagnosis.agents.results import map_run_result
from diagnosis.agents.runtime import AgentContext, RunBudget
from diagnosis.graph.engine import GraphRunError, RunConfig
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import DIAGNOSIS_RECURSION_LIMIT, build_diagnosis_graph, initial_diagnosis_state
from diagnosis.graph.trace import build_orchestration_trace
from diagnosis.llm.base import ModelError
from diagnosis.models import DiagnosisRun
from diagnosis.services import memory, wiring
from diagnosis.services.lifecycle import RunTransitionError, run_claim, run_fail, run_heartbeat, run_succeed
from diagnosis.services.progress import ProgressPublisher
from diagnosis.services.reaper import run_reap
from diagnosis.services.recording import RunRecorder
from diagnosis.tools.registry import ToolBox

logger = logging.getLogger(__name__)
Status = DiagnosisRun.Status


def _heartbeat_fresh(run: DiagnosisRun) -> bool:
    lease = timedelta(seconds=settings.RUN_LEASE_SECONDS)
    return run.heartbeat_at is not None and timezone.now() - run.heartbeat_at < lease


def run_execute(*, run_id: str, task_id: str = "") -> DiagnosisRun | None:
    """Execute a PENDING run once. A redelivered message for a run that is terminal, or RUNNING
    with a fresh heartbeat, does nothing; one whose heartbeat went stale is recorded worker_lost."""
    run = DiagnosisRun.objects.select_related("session").filter(run_id=run_id).first()
    if run is None:
        logger.warning("run %s does not exist; nothing to execute", run_id)
        return None
    if run.is_terminal or (run.status == Status.RUNNING and _heartbeat_fresh(run)):
        return run
    if run.status == Status.RUNNING:
        return run_fail_worker_lost(run=run)
    try:
        run = run_claim(run_id=run_id, task_id=task_id)
    except RunTransitionError:
        return None  # another worker claimed it first
    publish = ProgressPublisher(run.pk)
    publish("status", {"status": Status.RUNNING, "runId": run.run_id})
    try:
        if run.agent_flow == DiagnosisRun.Flow.AI_OPS:
            from diagnosis.services.aiops import aiops_execute  # it reuses this module's helpers: import late

            return aiops_execute(run, publish)
        if run.replay_of_id or run.replay_options is not None:  # a purged source must not run live
            from diagnosis.services.replay import replay_execute  # a replay: recorded evidence, same graph

            return replay_execute(run, publish)
        if run.strategy == DiagnosisRun.Strategy.SIMPLE:
            return _execute_simple(run, publish)
        return _execute_diagnosis(run, publish)
    except Exception as exc:  # the last line of defence: never leave a run RUNNING
        logger.exception("run %s failed unexpectedly", run.run_id)
        return _finish_failed(run, publish, code=getattr(exc, "code", "unhandled_error"), message=f"{type(exc).__name__}: {exc}")


def run_fail_worker_lost(*, run: DiagnosisRun) -> DiagnosisRun | None:
    # The reaper's path: the partial trace and counts are kept, and a heartbeat that lands meanwhile wins.
    return run_reap(run_id=run.run_id)


def _finish_failed(run, publish, *, code: str, message: str, **results) -> DiagnosisRun | None:
    try:
        failed = run_fail(run_id=run.run_id, error_code=code, error_message=message, **results)
    except RunTransitionError:
        logger.error("run %s could not be recorded FAILED (%s): it is no longer RUNNING", run.run_id, code)
        return None
    publish("status", {"status": Status.FAILED, "errorCode": code, "errorMessage": message[:500]})
    return failed


def _budget() -> RunBudget:
    return RunBudget(max_model_calls=settings.DIAGNOSIS_MAX_MODEL_CALLS, max_tokens=settings.DIAGNOSIS_MAX_TOKENS,
                     max_seconds=settings.DIAGNOSIS_MAX_SECONDS)


def _execute_diagnosis(run: DiagnosisRun, publish, *, recorder=None, backends=None, model=None, model_names=None,
                       history=None) -> DiagnosisRun | None:
    # The keyword arguments are a replay's (diagnosis.services.replay): recorded evidence, a chosen model.
    recorder = recorder or RunRecorder(run, publish=publish)
    tools = ToolBox(backends=backends or wiring.backends(), recorder=recorder, max_calls=settings.DIAGNOSIS_MAX_TOOL_CALLS,
                    max_result_bytes=settings.TOOL_RESULT_MAX_BYTES)
    budget = _budget()
    ctx = AgentContext(
        model=model or wiring.chat_model(), tools=tools, steps=recorder, lookup=recorder, budget=budget,
        run_id=run.run_id, session_id=recorder.session_id,
        history=memory.memory_for_prompt(session=run.session, before=run) if history is None else history,
        model_names=wiring.model_names() if model_names is None else model_names,
    )
    graph = build_diagnosis_graph(DiagnosisAgents(ctx).nodes())
    state = initial_diagnosis_state(run.question)
    config = RunConfig.for_run(run_id=run.run_id, session_id=recorder.session_id, recursion_limit=DIAGNOSIS_RECURSION_LIMIT)
    seen_events = 0
    try:
        for node, _update, state in graph.stream(state, config):
            run_heartbeat(run_id=run.run_id)
            events = state.get(K.ORCHESTRATION_EVENTS) or ()
            for event in events[seen_events:]:
                publish("node", dict(event))
            seen_events = len(events)
    except GraphRunError as exc:
        partial = exc.partial_state or {}
        events = list(partial.get(K.ORCHESTRATION_EVENTS) or ())
        return _finish_failed(
            run, publish, code=exc.code, message=str(exc),
            orchestration_trace=build_orchestration_trace(events, partial, interrupted_at=exc.node) if events else None,
            **_counts(recorder, budget, ctx),
        )
    mapped = map_run_result(state=state, outcomes=tools.outcomes, budget=budget.to_dict(tools), prompt_audit=prompt_audit())
    if not mapped["answer"].strip():
        return _finish_failed(run, publish, code="missing_answer", message="the graph ended without an answer",
                              orchestration_trace=mapped["orchestration_trace"], self_evaluation=mapped["self_evaluation"],
                              **_counts(recorder, budget, ctx))
    answer = mapped.pop("answer")
    done = run_succeed(run_id=run.run_id, answer=answer, **mapped, **_counts(recorder, budget, ctx))
    publish("status", {"status": Status.SUCCESS, "degraded": done.degraded, "verdict": done.effective_verdict or None})
    memory.memory_append(session=run.session, run=done)
    return done


def _counts(recorder: RunRecorder, budget: RunBudget, ctx: AgentContext) -> dict:
    return {
        "step_count": recorder.step_count, "tool_count": recorder.tool_count,
        "prompt_tokens": budget.prompt_tokens, "completion_tokens": budget.completion_tokens,
        "model_name": ", ".join(sorted(ctx.models_used))[:128], "prompt_version": catalog_version(),
    }


def _execute_simple(run: DiagnosisRun, publish) -> DiagnosisRun | None:
    """SIMPLE: one model call with history; persisted with its agent_step, no orchestration trace."""
    recorder = RunRecorder(run, publish=publish)
    budget = _budget()
    ctx = AgentContext(
        model=wiring.chat_model(), tools=None, steps=recorder, lookup=recorder, budget=budget,
        run_id=run.run_id, session_id=recorder.session_id, model_names=wiring.model_names(),
    )
    history = memory.memory_messages(session=run.session, before=run)
    messages = [{"role": "system", "content": prompt("simple").text}, *history, {"role": "user", "content": run.question}]
    try:
        reply = ctx.call_model(node="simple", role="simple", attempt=1, system="", user=None, messages=messages,
                               json_output=False, structured_input={"question": run.question, "history": history})
    except ModelError as exc:
        return _finish_failed(run, publish, code=exc.code, message=exc.message, **_counts(recorder, budget, ctx))
    answer = (reply.content or "").strip()
    if not answer:
        return _finish_failed(run, publish, code="missing_answer", message="the model returned an empty answer",
                              **_counts(recorder, budget, ctx))
    done = run_succeed(run_id=run.run_id, answer=answer, orchestration_trace=None,
                       self_evaluation={"rule_evaluation": {"budget": budget.to_dict()}, "prompt_audit": prompt_audit()},
                       **_counts(recorder, budget, ctx))
    publish("status", {"status": Status.SUCCESS, "degraded": False, "verdict": None})
    memory.memory_append(session=run.session, run=done)
    return done
