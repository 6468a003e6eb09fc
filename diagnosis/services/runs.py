"""Executing a run: claim it, drive the diagnosis graph (or the simple chat), map and save the result.

Persistence order (seed 001 decision 6): the graph returns a non-empty answer -> the trace and the
evaluation are built -> SUCCESS is saved with the answer, trace, duration and counts. Any
unhandled error ends FAILED with its code, its message and only the partial trace that exists.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import transaction

from diagnosis.agents.catalog import catalog_version, prompt, prompt_audit, prompt_echoed
from diagnosis.agents.nodes import DiagnosisAgents
from diagnosis.agents.results import map_run_result
from diagnosis.agents.runtime import AgentContext, RunBudget, question_language, simple_fallback_answer
from diagnosis.answer_render import render_simple_answer
from diagnosis.graph.engine import GraphRunError, RunConfig
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import DIAGNOSIS_RECURSION_LIMIT, build_diagnosis_graph, initial_diagnosis_state
from diagnosis.graph.trace import build_orchestration_trace
from diagnosis.llm.base import ModelError
from diagnosis.models import DiagnosisRun
from diagnosis.services import memory, wiring
from diagnosis.services.lease import RunLease
from diagnosis.services.lifecycle import LeaseLost, RunTransitionError, run_claim, run_fail, run_heartbeat, run_succeed
from diagnosis.services.progress import ProgressPublisher
from diagnosis.services.reaper import run_reap
from diagnosis.services.recording import RunRecorder
from diagnosis.tools.registry import ToolBox

logger = logging.getLogger(__name__)
Status = DiagnosisRun.Status


def run_execute(*, run_id: str, task_id: str = "") -> DiagnosisRun | None:
    """Execute a PENDING run once, under a lease (services/lease.py). A message for a terminal run does
    nothing; one for a RUNNING run (a redelivery, or a duplicate that lost the claim) waits until that
    run ends or its lease lapses, and then reaps it: it is never acknowledged while the run may be lost."""
    run = DiagnosisRun.objects.select_related("session").filter(run_id=run_id).first()
    if run is None:
        logger.warning("run %s does not exist; nothing to execute", run_id)
        return None
    if run.is_terminal:
        return run
    if run.status == Status.RUNNING:
        return run_await_lease(run_id=run_id)
    try:
        run = run_claim(run_id=run_id, task_id=task_id)
    except RunTransitionError:
        return run_await_lease(run_id=run_id)  # another delivery claimed it first
    lease = RunLease(run.run_id, run.claim_token)
    publish = ProgressPublisher(run.pk, lease=lease)
    try:
        with lease:  # the ticker renews the lease while model and tool calls are in flight
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
                return _finish_failed(run, publish, code=getattr(exc, "code", "unhandled_error"),
                                      message=f"{type(exc).__name__}: {exc}")
    except LeaseLost as exc:
        # Reaped (or claimed again) while this worker still ran it: its writes were refused; stop quietly.
        logger.warning("run %s: %s; this worker's execution stops here", run_id, exc)
        return DiagnosisRun.objects.filter(run_id=run_id).first()


def run_await_lease(*, run_id: str, poll_seconds: float = 1.0) -> DiagnosisRun | None:
    """Wait while another worker holds the run: return once it is terminal, or reap it once its heartbeat
    is older than the lease. Bounded by the task's soft time limit; the reaper timer covers what is left."""
    give_up = time.monotonic() + max(1.0, settings.CELERY_TASK_SOFT_TIME_LIMIT - 5)
    while True:
        run = DiagnosisRun.objects.filter(run_id=run_id).first()
        if run is None or run.is_terminal:
            return run
        if run.status == Status.RUNNING:
            reaped = run_reap(run_id=run_id)
            if reaped is not None:
                return reaped
        if time.monotonic() >= give_up:
            return run
        time.sleep(poll_seconds)


def run_fail_worker_lost(*, run: DiagnosisRun) -> DiagnosisRun | None:
    # The reaper's path: the partial trace and counts are kept, and a heartbeat that lands meanwhile wins.
    return run_reap(run_id=run.run_id)


def _lease_of(publish) -> RunLease | None:
    return getattr(publish, "lease", None)


def _finish_failed(run, publish, *, code: str, message: str, **results) -> DiagnosisRun | None:
    """FAILED with the terminal status event, in one transaction fenced by the worker's claim."""
    lease = _lease_of(publish)
    try:
        with transaction.atomic():
            publish("status", {"status": Status.FAILED, "errorCode": code, "errorMessage": message[:500]})
            return run_fail(run_id=run.run_id, error_code=code, error_message=message,
                            token=lease.token if lease else None, **results)
    except RunTransitionError:
        logger.error("run %s could not be recorded FAILED (%s): it is no longer RUNNING", run.run_id, code)
        return None


def _finish_succeeded(run, publish, *, answer: str, status_event: dict, **results) -> DiagnosisRun:
    """SUCCESS with the terminal status event, in one transaction fenced by the worker's claim: a reaped
    worker saves neither."""
    lease = _lease_of(publish)
    with transaction.atomic():
        publish("status", {"status": Status.SUCCESS, **status_event})
        return run_succeed(run_id=run.run_id, answer=answer, token=lease.token if lease else None, **results)


def _heartbeat(publish, run: DiagnosisRun) -> None:
    lease = _lease_of(publish)
    if lease is not None:
        lease.fence()
    else:
        run_heartbeat(run_id=run.run_id)


def _budget() -> RunBudget:
    return RunBudget(max_model_calls=settings.DIAGNOSIS_MAX_MODEL_CALLS, max_tokens=settings.DIAGNOSIS_MAX_TOKENS,
                     max_seconds=settings.DIAGNOSIS_MAX_SECONDS)


def _execute_diagnosis(run: DiagnosisRun, publish, *, recorder=None, backends=None, model=None, model_names=None,
                       history=None) -> DiagnosisRun | None:
    # The keyword arguments are a replay's (diagnosis.services.replay): recorded evidence, a chosen model.
    recorder = recorder or RunRecorder(run, publish=publish, lease=_lease_of(publish))
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
            _heartbeat(publish, run)
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
    done = _finish_succeeded(run, publish, answer=answer, **mapped, **_counts(recorder, budget, ctx),
                             status_event={"degraded": bool(mapped.get("degraded")),
                                           "verdict": mapped.get("effective_verdict") or None})
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
    recorder = RunRecorder(run, publish=publish, lease=_lease_of(publish))
    budget = _budget()
    ctx = AgentContext(
        model=wiring.chat_model(), tools=None, steps=recorder, lookup=recorder, budget=budget,
        run_id=run.run_id, session_id=recorder.session_id, model_names=wiring.model_names(),
    )
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
    done = _finish_succeeded(run, publish, answer=answer, orchestration_trace=None, degraded=bool(reason),
                             self_evaluation={"rule_evaluation": rules, "prompt_audit": prompt_audit(),
                                              "simple_audit": {"evidence_checked": False, "removed": removed}},
                             status_event={"degraded": bool(reason), "verdict": None}, **_counts(recorder, budget, ctx))
    memory.memory_append(session=run.session, run=done)
    return done
