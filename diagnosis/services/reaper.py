"""The reaper: every run ends, whatever stopped.

- A RUNNING run whose lease lapsed (heartbeat older than RUN_LEASE_SECONDS) is recorded FAILED
  (`worker_lost`). Its partial steps and tool invocations stay; the route it had taken is rebuilt from
  its "node" progress events, so the audit shows where it was interrupted. Its worker, if it still
  lives, finds its later writes refused (services/lease.py): reaping and fencing are one mechanism.
- A PENDING run older than RUN_QUEUE_DEADLINE_SECONDS (its message lost with a broker that restarted
  empty, or never consumed) is published again once; still PENDING one deadline later, it is FAILED
  (`queue_lost`).

`reaper_pass` does both under a database lock (one pass at a time across every worker and beat) and
records when it ran (/api/health). It runs on a timer in every worker (`reaper_timer_start`), from
beat if beat runs, and from a redelivered task message that finds its run stale. `reap_runs` is the
manual command.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from diagnosis import tasks
from diagnosis.contracts import RunCounts, RunResult
from diagnosis.graph.trace import build_orchestration_trace
from diagnosis.models import AgentStep, DiagnosisRun, MaintenanceLock, RunEvent, ToolInvocation
from diagnosis.services.lifecycle import RunTransitionError, run_fail
from diagnosis.services.observer import run_event_append
from diagnosis.services.submission import BrokerUnavailable, run_enqueue

logger = logging.getLogger(__name__)
Status = DiagnosisRun.Status

WORKER_LOST = "worker_lost"
QUEUE_LOST = "queue_lost"
REAPER_LOCK = "reaper"


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
    events = list(RunEvent.objects.filter(run_id=run.pk, kind="node").order_by("id").values_list("data", flat=True))
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
            partial=RunResult(orchestration_trace=trace),
            counts=RunCounts(step_count=steps["n"] or 0, tool_count=ToolInvocation.objects.filter(run_id=run.pk).count(),
                             prompt_tokens=steps["p"] or 0, completion_tokens=steps["c"] or 0),
        )
    except RunTransitionError:
        return None
    run_event_append(run_pk=run.pk, kind="status", data={"status": Status.FAILED, "errorCode": WORKER_LOST,
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


# -- PENDING runs past the queue deadline --------------------------------------------------------------

def _pending_lost(cutoff) -> Q:
    return Q(status=Status.PENDING) & (Q(requeued_at__isnull=True, created_at__lt=cutoff) | Q(requeued_at__lt=cutoff))


def runs_requeue_lost(*, deadline_seconds: float | None = None) -> dict[str, list[str]]:
    """PENDING runs older than the queue deadline: published again once; past a second deadline, FAILED
    queue_lost. Returns {"requeued": [...], "failed": [...]} run ids."""
    deadline = settings.RUN_QUEUE_DEADLINE_SECONDS if deadline_seconds is None else deadline_seconds
    now = timezone.now()
    cutoff = now - timedelta(seconds=deadline)
    done: dict[str, list[str]] = {"requeued": [], "failed": []}
    candidates = DiagnosisRun.objects.filter(_pending_lost(cutoff)).order_by("created_at")
    for run_id, requeued_at in list(candidates.values_list("run_id", "requeued_at")[:500]):
        if requeued_at is None:
            # Conditional: of two reapers (or a reaper and a worker's claim) only one acts.
            if DiagnosisRun.objects.filter(run_id=run_id, status=Status.PENDING, requeued_at__isnull=True).update(requeued_at=now):
                try:
                    run_enqueue(run_id=run_id, task=tasks.execute_run)  # a broker that refuses it fails the run
                    done["requeued"].append(run_id)
                    logger.warning("run %s was PENDING for more than %ss: published again", run_id, deadline)
                except BrokerUnavailable:
                    done["failed"].append(run_id)
            continue
        try:
            failed = run_fail(run_id=run_id, error_code=QUEUE_LOST,
                              error_message=f"the run was never picked up by a worker: PENDING for more than {deadline:g}s, "
                                            "published again, and still not picked up")
        except RunTransitionError:
            continue  # claimed meanwhile
        run_event_append(run_pk=failed.pk, kind="status", data={"status": Status.FAILED, "errorCode": QUEUE_LOST,
                                                                "errorMessage": failed.error_message[:500]})
        logger.warning("run %s failed: %s", run_id, QUEUE_LOST)
        done["failed"].append(run_id)
    return done


# -- one pass at a time, under a database lock -----------------------------------------------------------

def _lock_acquire(holder: str, hold_seconds: float) -> bool:
    now = timezone.now()
    if not MaintenanceLock.objects.filter(name=REAPER_LOCK).exists():
        try:
            with transaction.atomic():
                MaintenanceLock.objects.create(name=REAPER_LOCK)
        except IntegrityError:
            pass  # created by another process meanwhile
    free = Q(locked_until__isnull=True) | Q(locked_until__lt=now)
    return MaintenanceLock.objects.filter(free, name=REAPER_LOCK).update(
        holder=holder[:128], locked_until=now + timedelta(seconds=hold_seconds)) == 1


def reaper_pass(*, holder: str = "") -> dict | None:
    """Reap lapsed leases and lost queue entries, if no other process holds the reaper lock; None when
    another does. The lock is held at most one lease, so a holder that died mid-pass frees it."""
    holder = holder or f"pid-{threading.get_native_id()}"
    if not _lock_acquire(holder, hold_seconds=settings.RUN_LEASE_SECONDS):
        return None
    result = {"reaped": [], "requeued": [], "failed": []}
    try:
        result["reaped"] = [run.run_id for run in runs_reap_stale()]
        result.update(runs_requeue_lost())
    finally:
        MaintenanceLock.objects.filter(name=REAPER_LOCK, holder=holder[:128]).update(
            locked_until=None, last_run_at=timezone.now(), last_result={**result, "holder": holder[:128]})
    if any(result.values()):
        logger.warning("reaper pass by %s: %s", holder, result)
    return result


def reaper_last_run():
    """When a reaper pass last finished (None if never)."""
    return MaintenanceLock.objects.filter(name=REAPER_LOCK).values_list("last_run_at", flat=True).first()


class ReaperTimer:
    """A daemon thread running `reaper_pass` every RUN_REAPER_INTERVAL_SECONDS, in each worker process."""

    def __init__(self, *, holder: str, interval: float | None = None):
        self.holder = holder
        self.interval = float(settings.RUN_REAPER_INTERVAL_SECONDS if interval is None else interval)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reaper-timer", daemon=True)

    def start(self) -> "ReaperTimer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    reaper_pass(holder=self.holder)
                except Exception:  # the database is away: the next tick tries again
                    logger.exception("reaper pass failed")
                    connection.close()
        finally:
            connection.close()
