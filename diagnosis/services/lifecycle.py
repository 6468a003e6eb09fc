"""The run lifecycle: the only code that changes `diagnosis_run.status`.

PENDING -> RUNNING -> SUCCESS | FAILED. Every move is a conditional UPDATE on the expected
status, so two workers can never both claim or both finish the same run.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from diagnosis.models import DiagnosisRun
from diagnosis.observability import metrics

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


def _move(*, run_id: str, source: set[str], target: str, **fields) -> DiagnosisRun:
    for status in source:
        if target not in ALLOWED_MOVES[status]:
            raise RunTransitionError(run_id, status, target)
    updated = DiagnosisRun.objects.filter(run_id=run_id, status__in=source).update(status=target, **fields)
    if updated != 1:
        current = DiagnosisRun.objects.filter(run_id=run_id).values_list("status", flat=True).first()
        raise RunTransitionError(run_id, current, target)
    moved = DiagnosisRun.objects.get(run_id=run_id)
    metrics.run_moved(moved)  # counted once committed
    return moved


@transaction.atomic
def run_claim(*, run_id: str, task_id: str = "") -> DiagnosisRun:
    """PENDING -> RUNNING, atomically: only one worker can win."""
    now = timezone.now()
    return _move(
        run_id=run_id, source={Status.PENDING}, target=Status.RUNNING,
        started_at=now, heartbeat_at=now, celery_task_id=task_id[:64],
    )


def run_heartbeat(*, run_id: str) -> bool:
    """Record that the worker running this run is alive. False when the run is no longer RUNNING."""
    return DiagnosisRun.objects.filter(run_id=run_id, status=Status.RUNNING).update(heartbeat_at=timezone.now()) == 1


def _duration_ms(run_id: str, now) -> int | None:
    started = DiagnosisRun.objects.filter(run_id=run_id).values_list("started_at", "created_at").first()
    if not started:
        return None
    begin = started[0] or started[1]
    return max(0, int((now - begin).total_seconds() * 1000))


@transaction.atomic
def run_succeed(*, run_id: str, answer: str, **results) -> DiagnosisRun:
    """RUNNING -> SUCCESS with the answer and the mapped results (verdict, evaluation, trace, counts)."""
    if not answer or not answer.strip():
        raise ValueError("a successful run needs a non-empty answer")
    now = timezone.now()
    return _move(
        run_id=run_id, source={Status.RUNNING}, target=Status.SUCCESS,
        answer=answer, finished_at=now, heartbeat_at=now, duration_ms=_duration_ms(run_id, now), **results,
    )


@transaction.atomic
def run_fail(*, run_id: str, error_code: str, error_message: str, **results) -> DiagnosisRun:
    """PENDING or RUNNING -> FAILED, keeping whatever partial results really exist."""
    now = timezone.now()
    return _move(
        run_id=run_id, source={Status.PENDING, Status.RUNNING}, target=Status.FAILED,
        error_code=error_code[:64], error_message=error_message[:4000], finished_at=now,
        duration_ms=_duration_ms(run_id, now), **results,
    )
