"""The run lifecycle: legal and illegal status moves."""

from __future__ import annotations

import pytest
from django.utils import timezone

from diagnosis.contracts import RunCounts, RunResult, Verdict
from diagnosis.models import DiagnosisRun
from diagnosis.services.lifecycle import RunTransitionError, run_claim, run_fail, run_heartbeat, run_succeed
from tests.factories import DiagnosisRunFactory

pytestmark = pytest.mark.django_db
S = DiagnosisRun.Status


def test_a_pending_run_is_claimed_once_and_only_once():
    run = DiagnosisRunFactory()
    claimed = run_claim(run_id=run.run_id, task_id="task-1")
    assert claimed.status == S.RUNNING and claimed.started_at and claimed.heartbeat_at
    assert claimed.celery_task_id == "task-1"
    with pytest.raises(RunTransitionError) as info:
        run_claim(run_id=run.run_id)
    assert info.value.current == S.RUNNING and info.value.code == "illegal_run_transition"


def test_a_running_run_succeeds_with_duration_and_finish_time():
    run = DiagnosisRunFactory()
    run_claim(run_id=run.run_id)
    done = run_succeed(run_id=run.run_id, result=RunResult(answer="The pool is exhausted.", effective_verdict=Verdict.PASS),
                       counts=RunCounts(step_count=6))
    assert done.status == S.SUCCESS and done.answer == "The pool is exhausted."
    assert done.finished_at is not None and done.duration_ms is not None and done.duration_ms >= 0
    assert done.step_count == 6 and done.effective_verdict == "PASS"


def test_a_success_needs_an_answer():
    run = DiagnosisRunFactory()
    run_claim(run_id=run.run_id)
    with pytest.raises(ValueError):
        run_succeed(run_id=run.run_id, result=RunResult(answer="  "))
    run.refresh_from_db()
    assert run.status == S.RUNNING


@pytest.mark.parametrize("start", [S.PENDING, S.RUNNING])
def test_pending_and_running_runs_can_fail_with_a_reason(start):
    run = DiagnosisRunFactory(status=start)
    failed = run_fail(run_id=run.run_id, error_code="worker_lost", error_message="heartbeat expired")
    assert failed.status == S.FAILED and failed.error_code == "worker_lost" and failed.finished_at


def test_a_pending_run_cannot_succeed_directly():
    run = DiagnosisRunFactory()
    with pytest.raises(RunTransitionError):
        run_succeed(run_id=run.run_id, result=RunResult(answer="x"))
    run.refresh_from_db()
    assert run.status == S.PENDING


@pytest.mark.parametrize("terminal", [S.SUCCESS, S.FAILED])
def test_terminal_runs_never_move_again(terminal):
    run = DiagnosisRunFactory(status=terminal)
    for move in (
        lambda: run_claim(run_id=run.run_id),
        lambda: run_succeed(run_id=run.run_id, result=RunResult(answer="x")),
        lambda: run_fail(run_id=run.run_id, error_code="x", error_message="y"),
    ):
        with pytest.raises(RunTransitionError):
            move()
    run.refresh_from_db()
    assert run.status == terminal


def test_an_unknown_run_cannot_be_claimed():
    with pytest.raises(RunTransitionError) as info:
        run_claim(run_id="run-" + "0" * 32)
    assert info.value.current is None


def test_heartbeat_only_touches_running_runs():
    run = DiagnosisRunFactory()
    assert run_heartbeat(run_id=run.run_id) is False
    run_claim(run_id=run.run_id)
    before = DiagnosisRun.objects.get(pk=run.pk).heartbeat_at
    assert run_heartbeat(run_id=run.run_id) is True
    assert DiagnosisRun.objects.get(pk=run.pk).heartbeat_at >= before


def test_feedback_fields_never_change_status():
    run = DiagnosisRunFactory()
    run_claim(run_id=run.run_id)
    run_succeed(run_id=run.run_id, result=RunResult(answer="ok"))
    DiagnosisRun.objects.filter(pk=run.pk).update(feedback="not_useful", feedback_at=timezone.now())
    run.refresh_from_db()
    assert run.status == S.SUCCESS
