"""What one executing run works with: its recorder, tools, budget and agent context, and the two ways it ends.

Built once per run by `services/execution.run_context_build`; every flow's executor (diagnosis, simple,
alert analysis, replay) receives a `RunContext` and ends the run through `run_finish_failed` /
`run_finish_succeeded`, each one transaction fenced by the worker's claim.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Callable

from django.conf import settings
from django.db import transaction

from diagnosis.agents.catalog import catalog_version
from diagnosis.agents.runtime import AgentContext, RunBudget
from diagnosis.contracts import RunCounts, RunResult
from diagnosis.models import DiagnosisRun
from diagnosis.ranking_view import ranking_view
from diagnosis.redaction import redact_value
from diagnosis.services import memory
from diagnosis.services.lifecycle import RunTransitionError, run_fail, run_heartbeat, run_succeed
from diagnosis.services.observer import DbRunObserver, RunLease
from diagnosis.tools.registry import ToolBox

logger = logging.getLogger(__name__)
Status = DiagnosisRun.Status


class RunCannotStart(Exception):
    """What a flow's context preparation raises when the run cannot execute at all (e.g. a replay whose
    recorded run is gone): the run ends FAILED with this code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def run_lease_of(publish) -> RunLease | None:
    return getattr(publish, "lease", None)


def _commit(publish) -> None:
    """Inside the result's transaction: the observer's buffered group, unfenced (the result's own
    UPDATE is fenced by the claim token, and a refused result rolls the group back with it)."""
    commit = getattr(publish, "commit", None)
    if commit is not None:
        commit(fence=False)


def run_budget() -> RunBudget:
    """The per-run budget from settings (model calls, tokens, wall time)."""
    return RunBudget(max_model_calls=settings.DIAGNOSIS_MAX_MODEL_CALLS, max_tokens=settings.DIAGNOSIS_MAX_TOKENS,
                     max_seconds=settings.DIAGNOSIS_MAX_SECONDS)


def run_finish_failed(run: DiagnosisRun, publish, *, code: str, message: str, partial: RunResult | None = None,
                      counts: RunCounts | None = None) -> DiagnosisRun | None:
    """FAILED with the terminal status event, in one transaction fenced by the worker's claim; `partial`
    is the audit that really exists."""
    lease = run_lease_of(publish)
    try:
        with transaction.atomic():
            publish("status", {"status": Status.FAILED, "errorCode": code, "errorMessage": message[:500]})
            _commit(publish)
            return run_fail(run_id=run.run_id, error_code=code, error_message=message,
                            token=lease.token if lease else None, partial=partial, counts=counts)
    except RunTransitionError:
        logger.error("run %s could not be recorded FAILED (%s): it is no longer RUNNING", run.run_id, code)
        return None


def run_finish_succeeded(run: DiagnosisRun, publish, *, result: RunResult, status_event: dict,
                         counts: RunCounts | None = None) -> DiagnosisRun:
    """SUCCESS with the terminal status event and the turn in the session's memory, in one transaction
    fenced by the worker's claim: a reaped worker saves none of them. The memory's cache follows the commit."""
    lease = run_lease_of(publish)
    with transaction.atomic():
        publish("status", {"status": Status.SUCCESS, **status_event})
        _commit(publish)
        done = run_succeed(run_id=run.run_id, result=result, counts=counts, token=lease.token if lease else None, run=run)
        turns = memory.memory_record(session=run.session, run=done)
    memory.memory_cache(session=run.session, turns=turns)
    return done


def run_result_ranked(result: RunResult, *, question: str, outcomes) -> RunResult:
    """The result with the localiser's view of the run's recorded tool outputs kept in its diagnosis
    (``candidates``, ``localisation``, ``agreement``: diagnosis.ranking_view), whatever model answered.
    A run with no structured diagnosis (a SIMPLE answer) keeps none. The view is a hint: a fault in it
    is logged and leaves the diagnosis as derived (no ranking recorded), never fails the run."""
    if not isinstance(result.diagnosis, dict):
        return result
    root = result.diagnosis.get("rootCause")
    try:
        view = ranking_view([o.to_dict() for o in outcomes], question=question,
                            root_service=root.get("service") if isinstance(root, dict) else None)
    except Exception:  # noqa: BLE001 - a hint never costs the run its answer
        logger.exception("the localiser's view of a run could not be computed")
        return result
    return replace(result, diagnosis={**result.diagnosis, **redact_value(view)})


def run_keep_alive(run: DiagnosisRun, publish) -> None:
    """Between graph steps: the observer stops a run whose lease is lost (its ticker renews a held one;
    every grouped commit is fenced); without an observer, a plain heartbeat."""
    node_end = getattr(publish, "node_end", None)
    if node_end is not None:
        node_end()
    else:
        run_heartbeat(run_id=run.run_id)


@dataclass
class RunContext:
    """One claimed run and its collaborators (see the module docstring)."""

    run: DiagnosisRun
    publish: Callable[[str, dict], Any]
    recorder: DbRunObserver
    tools: ToolBox | None
    budget: RunBudget
    agent: AgentContext
    prompt_version: str | None = None  # a replay's pinned prompt catalog

    def heartbeat(self) -> None:
        run_keep_alive(self.run, self.publish)

    def counts(self) -> RunCounts:
        return RunCounts(
            step_count=self.recorder.step_count, tool_count=self.recorder.tool_count,
            prompt_tokens=self.budget.prompt_tokens, completion_tokens=self.budget.completion_tokens,
            model_name=", ".join(sorted(self.agent.models_used))[:128], prompt_version=catalog_version(),
        )

    def fail(self, *, code: str, message: str, partial: RunResult | None = None) -> DiagnosisRun | None:
        return run_finish_failed(self.run, self.publish, code=code, message=message, partial=partial,
                                 counts=self.counts())

    def succeed(self, result: RunResult) -> DiagnosisRun:
        """SUCCESS with the localiser's view kept in the diagnosis; the status event carries `degraded` and
        the served verdict."""
        result = run_result_ranked(result, question=self.run.question, outcomes=self.tools.outcomes if self.tools else ())
        return run_finish_succeeded(self.run, self.publish, result=result, counts=self.counts(), status_event={
            "degraded": result.degraded, "verdict": str(result.effective_verdict) if result.effective_verdict else None})
