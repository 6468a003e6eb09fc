"""The run lifecycle: the only code that changes `diagnosis_run.status`.

PENDING -> RUNNING -> SUCCESS | FAILED. Every move is a conditional UPDATE on the expected
status, so two workers can never both claim or both finish the same run. A claim draws a token;
the executing worker's moves are conditional on that token too (fencing: see services/lease.py).
"""

from __future__ import annotations

import secrets

from django.db import transaction
from django.utils import timezone

from diagnosis.contracts import RunCounts, RunResult
from diagnosis.models import DiagnosisRun
from diagnosis.observability import metrics
from diagnosis.services.row_update import rows_update
from diagnosis.search_text import answer_terms_of, root_summary_of

Status = DiagnosisRun.Status

ALLOWED_MOVES = {
    Status.PENDING: {Status.RUNNING, Status.FAILED},
    Status.RUNNING: {Status.SUCCESS, Status.FAILED},
    Status.SUCCESS: set(),
    Status.FAILED: set(),
}


class RunTransitionError(Exception):
    """An illegal status move, e.g. finishing a run that is not RUNNING."""

    code = "illegal_run_transition"

    def __init__(self, run_id: str, current: str | None, target: str):
        self.run_id, self.current, self.target = run_id, current, target
        super().__init__(f"run {run_id} cannot move from {current or 'missing'} to {target}")


class RunNotClaimed(Exception):
    """The run could not be claimed: the database (or broker) failed before the claim committed. Nothing of
    the run was written, so the task retries it with backoff (diagnosis.tasks.execute_run)."""

    @classmethod
    def of(cls, run_id: str, cause: BaseException) -> "RunNotClaimed":
        return cls(f"run {run_id} not claimed: {type(cause).__name__}: {cause}")


class LeaseLost(BaseException):
    """The run is no longer RUNNING under this worker's claim token (reaped, or claimed again): the
    write was refused and this worker's execution of the run must stop, writing nothing more.

    A BaseException, like the cancellation it is: the `except Exception` handlers that turn a node's or
    a tool's fault into data must not turn a lost lease into more writes. `run_execute` ends the task
    quietly on it."""

    code = "lease_lost"

    def __init__(self, run_id: str, current: str | None = None):
        self.run_id, self.current = run_id, current
        super().__init__(f"run {run_id} is no longer RUNNING under this worker's claim ({current or 'missing'})")


def _move(*, run_id: str, source: set[str], target: str, token: str | None = None, run: DiagnosisRun | None = None,
          **fields) -> DiagnosisRun:
    """The conditional UPDATE: one statement, atomic by itself, so it needs no transaction (or savepoint)
    of its own: alone it commits at once, inside a caller's transaction it joins it, and a refusal writes
    nothing. With `run` (the caller's copy of the row), the moved run is that copy with the columns just
    written, not read again."""
    for status in source:
        if target not in ALLOWED_MOVES[status]:
            raise RunTransitionError(run_id, status, target)
    fenced = {"claim_token": token} if token else {}
    # The ORM's `filter(...).update(...)`, written without its query compiler (services/row_update.py).
    updated = rows_update(DiagnosisRun, {"run_id": run_id, "status": source, **fenced}, {"status": target, **fields})
    if updated != 1:
        current = DiagnosisRun.objects.filter(run_id=run_id).values_list("status", flat=True).first()
        if token:
            raise LeaseLost(run_id, current)
        raise RunTransitionError(run_id, current, target)
    if run is not None and run.run_id == run_id:
        for name, value in {**fields, "status": target}.items():
            setattr(run, name, value)
        moved = run
    else:
        moved = DiagnosisRun.objects.get(run_id=run_id)
    metrics.run_moved(moved)  # counted once committed
    return moved


def run_claim(*, run_id: str, task_id: str = "", run: DiagnosisRun | None = None) -> DiagnosisRun:
    """PENDING -> RUNNING, atomically: only one worker can win; the winner's claim token is on the row.
    `run`: the caller's copy of the row, returned moved (see `_move`)."""
    now = timezone.now()
    return _move(
        run_id=run_id, source={Status.PENDING}, target=Status.RUNNING, run=run,
        started_at=now, heartbeat_at=now, celery_task_id=task_id[:64], claim_token=secrets.token_hex(16),
    )


def run_heartbeat(*, run_id: str, token: str | None = None) -> bool:
    """Record that the worker running this run is alive. False when the run is no longer RUNNING (under
    `token`, when given)."""
    fenced = {"claim_token": token} if token else {}
    return DiagnosisRun.objects.filter(run_id=run_id, status=Status.RUNNING, **fenced).update(
        heartbeat_at=timezone.now()) == 1


def _duration_ms(run_id: str, now, run: DiagnosisRun | None = None) -> int | None:
    started = ((run.started_at, run.created_at) if run is not None and run.run_id == run_id else
               DiagnosisRun.objects.filter(run_id=run_id).values_list("started_at", "created_at").first())
    if not started:
        return None
    begin = started[0] or started[1]
    return max(0, int((now - begin).total_seconds() * 1000))


def _result_columns(result: RunResult | None, counts: RunCounts | None, *, answer: str = "") -> dict:
    """The columns of `diagnosis_run` a run result (with `answer` when it is stored) and its counts are stored in."""
    columns: dict = {}
    if result is not None:
        columns.update(
            degraded=result.degraded, effective_verdict=str(result.effective_verdict or ""),
            diagnosis=result.diagnosis, root_service=DiagnosisRun.root_service_of(result.diagnosis),
            root_summary=root_summary_of(result.diagnosis), answer_terms=answer_terms_of(answer, result.diagnosis),
            self_evaluation=result.self_evaluation,
            orchestration_trace=result.orchestration_trace,
        )
    if counts is not None:
        columns.update(
            step_count=counts.step_count, tool_count=counts.tool_count, prompt_tokens=counts.prompt_tokens,
            completion_tokens=counts.completion_tokens, model_name=counts.model_name[:128],
            prompt_version=counts.prompt_version[:64],
        )
    return columns


def run_succeed(*, run_id: str, result: RunResult, counts: RunCounts | None = None,
                token: str | None = None, run: DiagnosisRun | None = None) -> DiagnosisRun:
    """RUNNING -> SUCCESS with the answer and its audit (verdict, evaluation, trace) and the counts.
    With `token`, only under that claim (LeaseLost otherwise). `run`: the claimed copy (see `_move`)."""
    if not result.answer or not result.answer.strip():
        raise ValueError("a successful run needs a non-empty answer")
    now = timezone.now()
    return _move(
        run_id=run_id, source={Status.RUNNING}, target=Status.SUCCESS, token=token, run=run,
        answer=result.answer, finished_at=now, heartbeat_at=now, duration_ms=_duration_ms(run_id, now, run),
        **_result_columns(result, counts, answer=result.answer),
    )


@transaction.atomic
def run_fail(*, run_id: str, error_code: str, error_message: str, token: str | None = None,
             partial: RunResult | None = None, counts: RunCounts | None = None) -> DiagnosisRun:
    """PENDING or RUNNING -> FAILED, keeping whatever partial results really exist. With `token`, only
    a RUNNING run under that claim (LeaseLost otherwise)."""
    now = timezone.now()
    return _move(
        run_id=run_id, source={Status.RUNNING} if token else {Status.PENDING, Status.RUNNING}, target=Status.FAILED,
        token=token,
        error_code=error_code[:64], error_message=error_message[:4000], finished_at=now,
        duration_ms=_duration_ms(run_id, now), **_result_columns(partial, counts),
    )
