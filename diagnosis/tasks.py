"""Celery tasks: thin wrappers that take ids and call services.

Services import this module at the top (to enqueue); a task imports its service inside its body, so the
import graph has no cycle (the HackSoft direction)."""

from __future__ import annotations

import logging
import socket
import time

from celery import shared_task
from django.conf import settings

from diagnosis.observability.runs import observed_run
from diagnosis.services.lifecycle import RunNotClaimed

logger = logging.getLogger(__name__)


@shared_task(name="diagnosis.tasks.execute_run", bind=True, acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(RunNotClaimed,), retry_backoff=True,
             retry_backoff_max=settings.RUN_CLAIM_RETRY_BACKOFF_MAX_SECONDS, retry_jitter=True, max_retries=None)
def execute_run(self, run_id: str, queued_at: float | None = None) -> str | None:
    """Execute one run. Idempotent: a redelivered message for a finished or live run does nothing.

    A database or broker error before the claim (RunNotClaimed: nothing of the run was written) is retried
    with exponential backoff and jitter (Celery's autoretry), until the run's queue deadline counted from
    `queued_at`; acks_late keeps the message until an attempt ends. Back in time, the run executes; back
    late, the run is FAILED `database_unavailable`. Still away at the deadline, the task stops retrying and
    the reaper ends the run once the database returns."""
    from diagnosis.services.execution import run_execute

    try:
        with observed_run(run_id):  # log context (run_id, session_id) and trace export
            run = run_execute(run_id=run_id, task_id=self.request.id or "", retried=bool(self.request.retries))
    except RunNotClaimed as exc:
        if queued_at is not None and time.time() > queued_at + settings.RUN_QUEUE_DEADLINE_SECONDS:
            logger.error("%s; past the run's queue deadline (%ss), no more retries: the reaper ends it",
                         exc, settings.RUN_QUEUE_DEADLINE_SECONDS)
            return None
        logger.warning("%s; retry %d with backoff", exc, self.request.retries + 1)
        raise
    return run.status if run else None


@shared_task(name="diagnosis.tasks.reap_stale_runs")
def reap_stale_runs() -> list[str]:
    """Beat (optional), every RUN_LEASE_SECONDS/2 on the maintenance queue: one reaper pass, unless another
    process holds the reaper lock. Returns the run ids it reaped."""
    from diagnosis.services.reaper import reaper_pass

    result = reaper_pass(holder=f"beat-task-{socket.gethostname()}")
    return list(result["reaped"]) if result else []
