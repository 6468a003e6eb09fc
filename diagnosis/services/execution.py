"""Executing a run: claim it under a lease, build its context once, and hand it to its flow's executor.

The flows (chat diagnosis, simple answer, replay, alert analysis) are a table: each names its executor,
whether it uses tools and the session's history, and optionally how its context differs (a replay's
recorded evidence and chosen model). Any unhandled error ends the run FAILED with its code.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone
from redis import exceptions as redis_errors

from diagnosis.agents.runtime import AgentContext
from diagnosis.models import DiagnosisRun
from diagnosis.services import memory, wiring
from diagnosis.services.aiops import aiops_execute
from diagnosis.services.lifecycle import LeaseLost, RunNotClaimed, RunTransitionError, run_claim, run_fail
from diagnosis.services.observer import DbRunObserver, RunLease, run_event_append
from diagnosis.services.reaper import run_reap
from diagnosis.services.replay import replay_context, replay_execute
from diagnosis.services.run_context import RunCannotStart, RunContext, run_budget, run_finish_failed
from diagnosis.services.runs import diagnosis_execute, simple_execute
from diagnosis.tools.registry import ToolBox

logger = logging.getLogger(__name__)
Status = DiagnosisRun.Status


@dataclass(frozen=True)
class FlowExecutor:
    """How one flow executes: its executor, what its context holds, and what it overrides in it."""

    execute: Callable[[RunContext], DiagnosisRun | None]
    tools: bool = True
    history: bool = False  # the session's earlier turns go into the prompts
    prepare: Callable[..., dict] | None = None  # (run, publish) -> run_context_build overrides


FLOWS: dict[str, FlowExecutor] = {
    "diagnosis": FlowExecutor(diagnosis_execute, history=True),
    "simple": FlowExecutor(simple_execute, tools=False),
    "replay": FlowExecutor(replay_execute, history=True, prepare=replay_context),  # recorded evidence, same graph
    "ai_ops": FlowExecutor(aiops_execute),
}


def run_flow(run: DiagnosisRun) -> str:
    """The key of `FLOWS` that executes this run."""
    if run.agent_flow == DiagnosisRun.Flow.AI_OPS:
        return "ai_ops"
    if run.replay_of_id or run.replay_options is not None:  # a purged source must not run live
        return "replay"
    return "simple" if run.strategy == DiagnosisRun.Strategy.SIMPLE else "diagnosis"


def run_context_build(run: DiagnosisRun, observer: DbRunObserver, *, tools: bool = True, history: bool = False,
                      backends=None, model=None, model_names=None, history_text: str | None = None,
                      prompt_version: str | None = None) -> RunContext:
    """The one place a run's collaborators are wired from settings (services/wiring.py); a replay passes
    its backends, model and history instead. The run's observer is its `publish` and records its steps
    and tool calls too, so one buffer holds the run's events and rows and one commit writes them."""
    toolbox = ToolBox(backends=backends or wiring.backends(), recorder=observer,
                      max_calls=settings.DIAGNOSIS_MAX_TOOL_CALLS,
                      max_result_bytes=settings.TOOL_RESULT_MAX_BYTES,
                      ranking_hint=settings.LLM_RANKING_HINT) if tools else None
    budget = run_budget()
    if history and history_text is None:
        history_text = memory.memory_for_prompt(session=run.session, before=run)
    agent = AgentContext(
        model=model or wiring.chat_model(), tools=toolbox, steps=observer, lookup=observer, budget=budget,
        run_id=run.run_id, session_id=observer.session_id, history=history_text or "",
        model_names=wiring.model_names() if model_names is None else model_names,
    )
    return RunContext(run=run, publish=observer, recorder=observer, tools=toolbox, budget=budget, agent=agent,
                      prompt_version=prompt_version)


# Errors of a database or a broker that is away for a while: the connection was refused, lost or reset.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (OperationalError, InterfaceError, ConnectionError,
                                                      redis_errors.ConnectionError, redis_errors.TimeoutError)
DATABASE_UNAVAILABLE = "database_unavailable"


def run_execute(*, run_id: str, task_id: str = "", retried: bool = False) -> DiagnosisRun | None:
    """Execute a PENDING run once, under a lease (services/observer.py). A message for a terminal run does
    nothing; one for a RUNNING run (a redelivery, or a duplicate that lost the claim) waits until that
    run ends or its lease lapses, and then reaps it: it is never acknowledged while the run may be lost.

    A transient error before the claim commits raises RunNotClaimed (the task retries). `retried`: an
    earlier attempt of this message met one; if the run is then past its queue deadline it is FAILED
    `database_unavailable` instead of started late."""
    try:
        run = DiagnosisRun.objects.select_related("session").filter(run_id=run_id).first()
        if run is None:
            logger.warning("run %s does not exist; nothing to execute", run_id)
            return None
        if run.is_terminal:
            return run
        if run.status == Status.RUNNING:
            return run_await_lease(run_id=run_id)
        if retried and run_past_queue_deadline(run):
            return run_fail_unclaimed(run)
        try:
            with transaction.atomic():  # the claim commits with its RUNNING event
                run = run_claim(run_id=run_id, task_id=task_id, run=run)
                lease = RunLease(run.run_id, run.claim_token)
                publish = DbRunObserver(run, lease=lease)
                publish("status", {"status": Status.RUNNING, "runId": run.run_id})
                publish.commit(fence=False)  # the claim's UPDATE holds the row
        except RunTransitionError:
            return run_await_lease(run_id=run_id)  # another delivery claimed it first
    except TRANSIENT_ERRORS as exc:
        raise RunNotClaimed.of(run_id, exc) from exc
    try:
        with lease:  # the ticker renews the lease while model and tool calls are in flight
            try:
                flow = FLOWS[run_flow(run)]
                try:
                    overrides = flow.prepare(run, publish) if flow.prepare else {}
                except RunCannotStart as exc:
                    return run_finish_failed(run, publish, code=exc.code, message=exc.message)
                rc = run_context_build(run, publish, tools=flow.tools, history=flow.history, **overrides)
                return flow.execute(rc)
            except Exception as exc:  # the last line of defence: never leave a run RUNNING
                logger.exception("run %s failed unexpectedly", run.run_id)
                return run_finish_failed(run, publish, code=getattr(exc, "code", "unhandled_error"),
                                         message=f"{type(exc).__name__}: {exc}")
    except LeaseLost as exc:
        # Reaped (or claimed again) while this worker still ran it: its writes were refused; stop quietly.
        logger.warning("run %s: %s; this worker's execution stops here", run_id, exc)
        return DiagnosisRun.objects.filter(run_id=run_id).first()


def run_past_queue_deadline(run: DiagnosisRun) -> bool:
    return (timezone.now() - run.created_at).total_seconds() > settings.RUN_QUEUE_DEADLINE_SECONDS


def run_fail_unclaimed(run: DiagnosisRun) -> DiagnosisRun:
    """A PENDING run whose claim failed on a transient error until past its queue deadline: FAILED, saying why."""
    message = (f"the database was unavailable when a worker tried to start the run, until past its queue deadline "
               f"of {settings.RUN_QUEUE_DEADLINE_SECONDS}s")
    try:
        failed = run_fail(run_id=run.run_id, error_code=DATABASE_UNAVAILABLE, error_message=message)
    except RunTransitionError:
        return DiagnosisRun.objects.filter(run_id=run.run_id).first()  # claimed or ended meanwhile
    run_event_append(run_pk=failed.pk, kind="status", data={"status": Status.FAILED, "errorCode": DATABASE_UNAVAILABLE,
                                                            "errorMessage": message})
    logger.warning("run %s failed: %s", run.run_id, DATABASE_UNAVAILABLE)
    return failed


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
