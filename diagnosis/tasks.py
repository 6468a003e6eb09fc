"""Celery tasks: thin wrappers that take ids and call services.

Services import this module at the top (to enqueue); a task imports its service inside its body, so the
import graph has no cycle (the HackSoft direction)."""

from __future__ import annotations

import socket

from celery import shared_task

from diagnosis.observability.runs import observed_run


@shared_task(name="diagnosis.tasks.execute_run", bind=True, acks_late=True, reject_on_worker_lost=True)
def execute_run(self, run_id: str) -> str | None:
    """Execute one run. Idempotent: a redelivered message for a finished or live run does nothing."""
    from diagnosis.services.execution import run_execute

    with observed_run(run_id):  # log context (run_id, session_id) and trace export
        run = run_execute(run_id=run_id, task_id=self.request.id or "")
    return run.status if run else None


@shared_task(name="diagnosis.tasks.reap_stale_runs")
def reap_stale_runs() -> list[str]:
    """Beat (optional), every RUN_LEASE_SECONDS/2 on the maintenance queue: one reaper pass, unless another
    process holds the reaper lock. Returns the run ids it reaped."""
    from diagnosis.services.reaper import reaper_pass

    result = reaper_pass(holder=f"beat-task-{socket.gethostname()}")
    return list(result["reaped"]) if result else []
