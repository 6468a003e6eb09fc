"""The lease of an executing run, and the fence on every write its worker makes.

A claim draws a token (`run_claim`). While the worker executes the run:

- every write for the run (agent step, tool invocation, progress event) runs in a transaction that
  first locks the run row with `SELECT ... FOR UPDATE WHERE status = RUNNING AND claim_token = <token>`;
  heartbeats (after every node, and from the ticker) and the result are conditional UPDATEs on the same
  condition. Either locks the row, so it serialises with the reaper (which locks the row before it
  decides): either the write lands while the run is RUNNING under this token, or the run was reaped
  first, the statement matches no row, and the write is refused with `LeaseLost`;
- a ticker thread renews the heartbeat the same way every lease/4, so a model or tool call that lasts
  longer than the lease keeps its run alive. It is fenced too: once the run is reaped it stops.

The reaper (services/reaper.py) fails RUNNING runs whose heartbeat is older than the lease. So a
worker that really stopped is reaped after one lease, and a live one can never be reaped and keep
writing: reaping and fencing are one mechanism.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from diagnosis.models import DiagnosisRun
from diagnosis.services.lifecycle import LeaseLost

logger = logging.getLogger(__name__)
Status = DiagnosisRun.Status


class RunLease:
    """The claim of one run by this worker: its token, the fence, and the renewal ticker."""

    def __init__(self, run_id: str, token: str, *, lease_seconds: float | None = None):
        self.run_id, self.token = run_id, token
        self.lease_seconds = float(lease_seconds if lease_seconds is not None else settings.RUN_LEASE_SECONDS)
        self.lost = False
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the fence ---------------------------------------------------------------------------------------
    def fence(self) -> None:
        """Renew the heartbeat, only if the run is still RUNNING under this token; LeaseLost otherwise.
        Inside a transaction, the run row stays locked until it commits."""
        if self.lost:
            raise LeaseLost(self.run_id)
        updated = DiagnosisRun.objects.filter(run_id=self.run_id, status=Status.RUNNING, claim_token=self.token).update(
            heartbeat_at=timezone.now())
        if updated != 1:
            self.lost = True
            current = DiagnosisRun.objects.filter(run_id=self.run_id).values_list("status", flat=True).first()
            raise LeaseLost(self.run_id, current)

    def hold(self) -> None:
        """Inside a transaction: lock the run row (SELECT ... FOR UPDATE, no write) if it is still RUNNING
        under this token; LeaseLost otherwise. Cheaper than `fence` for the many small writes of a run:
        the ticker and the node boundaries keep the heartbeat fresh."""
        if self.lost:
            raise LeaseLost(self.run_id)
        held = DiagnosisRun.objects.select_for_update().filter(
            run_id=self.run_id, status=Status.RUNNING, claim_token=self.token).values_list("pk", flat=True).first()
        if held is None:
            self.lost = True
            current = DiagnosisRun.objects.filter(run_id=self.run_id).values_list("status", flat=True).first()
            raise LeaseLost(self.run_id, current)

    @contextmanager
    def guarded(self):
        """A transaction whose writes land only while this worker holds the run: the run row stays locked
        until they commit, so the reaper (which locks it too) acts either before them or after them."""
        with transaction.atomic():
            self.hold()
            yield

    # -- the ticker ----------------------------------------------------------------------------------------
    @property
    def tick_seconds(self) -> float:
        return self.lease_seconds / 4

    def start(self) -> "RunLease":
        self._thread = threading.Thread(target=self._tick, name=f"lease-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _tick(self) -> None:
        try:
            while not self._stop.wait(self.tick_seconds):
                try:
                    self.fence()
                    self.renewals += 1
                except LeaseLost:
                    logger.warning("run %s: lease lost; the ticker stops and the worker's next write is refused", self.run_id)
                    return
                except Exception:  # a database blip: the next tick tries again, the lease has 3 more ticks of margin
                    logger.exception("run %s: could not renew the lease", self.run_id)
                    connection.close()  # reconnect on the next tick
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> "RunLease":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
