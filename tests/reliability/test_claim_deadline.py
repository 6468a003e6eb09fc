"""The end of a run whose claim kept failing: back after its queue deadline, it is FAILED with the reason,
not started late; back in time, or never retried, it executes (diagnosis.services.execution)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from diagnosis.models import DiagnosisRun, RunEvent
from diagnosis.services.execution import DATABASE_UNAVAILABLE, run_execute
from diagnosis.services.lifecycle import RunNotClaimed

pytestmark = pytest.mark.django_db(transaction=True)


def queued_long_ago(run, settings) -> None:
    DiagnosisRun.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(seconds=settings.RUN_QUEUE_DEADLINE_SECONDS + 5))


def test_a_retried_claim_past_the_queue_deadline_fails_the_run_saying_the_database_was_unavailable(make_run, settings):
    run = make_run("hello there")
    queued_long_ago(run, settings)
    ended = run_execute(run_id=run.run_id, retried=True)
    assert ended.status == DiagnosisRun.Status.FAILED
    assert ended.error_code == DATABASE_UNAVAILABLE
    assert "database was unavailable" in ended.error_message and str(settings.RUN_QUEUE_DEADLINE_SECONDS) in ended.error_message
    event = RunEvent.objects.filter(run=run, kind="status").last()
    assert event.data["status"] == "FAILED" and event.data["errorCode"] == DATABASE_UNAVAILABLE


def test_a_retried_claim_within_the_deadline_executes_the_run(make_run, demo_knowledge):
    run = make_run("hello there")
    assert run_execute(run_id=run.run_id, retried=True).status == DiagnosisRun.Status.SUCCESS


def test_a_first_delivery_is_never_failed_for_lateness_here(make_run, settings, demo_knowledge):
    run = make_run("hello there")  # a late first delivery is the reaper's business (queue_lost), not this one's
    queued_long_ago(run, settings)
    assert run_execute(run_id=run.run_id).status == DiagnosisRun.Status.SUCCESS


def test_the_task_retries_only_what_failed_before_the_claim():
    from diagnosis.tasks import execute_run

    assert execute_run.autoretry_for == (RunNotClaimed,)
    assert execute_run.acks_late and execute_run.retry_backoff and execute_run.max_retries is None
