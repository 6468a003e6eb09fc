"""The reaper: a RUNNING run whose worker stopped sending heartbeats is recorded FAILED (`worker_lost`).

Its partial steps and tool invocations stay; the route it had taken is rebuilt from its "node"
progress events, so the audit shows where it was interrupted. Runs by the beat schedule, the
`reap_runs` command, and by a redelivered task message that finds its run stale.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from diagnosis.graph.trace import build_orchestration_trace
from diagnosis.models import AgentStep, DiagnosisRun, RunEvent, ToolInvocation
from diagnosis.services.lifecycle import RunTransitionError, run_fail
from diagnosis.services.progress import ProgressPublisher

logger = logging.getLogger(__name__)
Status = DiagnosisRun.Status

WORKER_LOST = "worker_lost"


def _cutoff(lease_seconds: float | None):
    return timezone.now() - timedelta(seconds=settings.RUN_LEASE_SECONDS if lease_seconds is None else lease_seconds)


def _stale(cutoff) -> Q:
    # A claimed run always has a heartbeat; the created_at branch only guards rows written by hand.
    return Q(status=Status.RUNNING) & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff))


def runs_stale(*, lease_seconds: float | None = None) -> list[str]:
    """Run ids of RUNNING runs whose heartbeat is older than the lease (RUN_LEASE_SECONDS by default)."""
    stale = DiagnosisRun.objects.filter(_stale(_cutoff(lease_seconds))).order_by("heartbeat_at")
    return list(stale.values_list("run_id", flat=True))


def partial_trace(*, run: DiagnosisRun) -> dict | None:
    """The route taken so far, from the run's node events; None when no node finished."""
    events = list(RunEvent.objects.filter(run_id=run.pk, kind="node").order_by("seq").values_list("data", flat=True))
    if not events:
        return None
    # Node events are written when a node finishes; a step still RUNNING names the node that was cut off.
    running = AgentStep.objects.filter(run_id=run.pk, status=AgentStep.Status.RUNNING).order_by("-step_index").first()
    interrupted_at = running.node if running else events[-1].get("node")
    return build_orchestration_trace(events, interrupted_at=interrupted_at)


@transaction.atomic
def run_reap(*, run_id: str, lease_seconds: float | None = None) -> DiagnosisRun | None:
    """FAILED(worker_lost) if the run is still RUNNING with a stale heartbeat; None when it is not.

    The row is locked first, so a worker heartbeat that lands meanwhile either wins (the run is
    fresh and left alone) or finds the run FAILED (and the worker's later writes are refused)."""
    run = DiagnosisRun.objects.select_for_update().filter(_stale(_cutoff(lease_seconds)), run_id=run_id).first()
    if run is None:
        return None
    now = timezone.now()
    lease = settings.RUN_LEASE_SECONDS if lease_seconds is None else lease_seconds
    last = run.heartbeat_at.isoformat(timespec="seconds") if run.heartbeat_at else "never"
    trace = partial_trace(run=run)  # before the cut-off step is closed: it names the interrupted node
    AgentStep.objects.filter(run_id=run.pk, status=AgentStep.Status.RUNNING).update(
        status=AgentStep.Status.FAILED, error=f"{WORKER_LOST}: the worker stopped during this step", finished_at=now,
    )
    steps = AgentStep.objects.filter(run_id=run.pk).aggregate(
        n=Count("id"), p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    try:
        failed = run_fail(
            run_id=run_id, error_code=WORKER_LOST,
            error_message=f"the worker stopped sending heartbeats (last {last}, lease {lease:g}s); partial steps and trace are kept",
            orchestration_trace=trace,
            step_count=steps["n"] or 0, tool_count=ToolInvocation.objects.filter(run_id=run.pk).count(),
            prompt_tokens=steps["p"] or 0, completion_tokens=steps["c"] or 0,
        )
    except RunTransitionError:
        return None
    ProgressPublisher(run.pk)("status", {"status": Status.FAILED, "errorCode": WORKER_LOST,
                                         "errorMessage": failed.error_message[:500]})
    logger.warning("run %s reaped: %s", run_id, failed.error_message)
    return failed


def runs_reap_stale(*, lease_seconds: float | None = None) -> list[DiagnosisRun]:
    """Reap every stale RUNNING run, each in its own transaction; returns the runs recorded FAILED."""
    reaped = []
    for run_id in runs_stale(lease_seconds=lease_seconds):
        run = run_reap(run_id=run_id, lease_seconds=lease_seconds)
        if run is not None:
            reaped.append(run)
    return reaped
