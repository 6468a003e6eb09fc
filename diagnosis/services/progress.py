"""Run progress events: appended in order while a run executes, read back by the SSE endpoint."""

from __future__ import annotations

import logging
from contextlib import nullcontext

from django.db import IntegrityError, connection, transaction
from django.db.models import Max

from diagnosis.models import RunEvent
from diagnosis.services.live_progress import publish_event

logger = logging.getLogger(__name__)

TERMINAL_KIND = "status"


class ProgressPublisher:
    """Appends events for one run; a failed append is logged, never allowed to break the run. With a
    lease, an append lands only while this worker holds the run: LeaseLost (never swallowed) otherwise."""

    def __init__(self, run_pk: int, *, lease=None):
        self.run_pk = run_pk
        self.lease = lease
        last = RunEvent.objects.filter(run_id=run_pk).aggregate(m=Max("seq"))["m"]
        self.seq = last or 0

    def __call__(self, kind: str, data: dict) -> None:
        for _ in range(3):
            self.seq += 1
            try:
                # Outside a transaction one INSERT is atomic by itself: no BEGIN/COMMIT round trips.
                with self.lease.guarded() if self.lease is not None else nullcontext(), \
                        transaction.atomic() if connection.in_atomic_block else nullcontext():
                    RunEvent.objects.create(run_id=self.run_pk, seq=self.seq, kind=kind, data=data)
                publish_event(self.run_pk, self.seq, kind, data)  # to live streams, once committed
                return
            except IntegrityError:
                continue  # another writer (a redelivered task) used this seq: take the next one
            except Exception:
                logger.exception("could not record a progress event for run pk=%s", self.run_pk)
                return


def run_event_publish(*, run_pk: int, kind: str, data: dict) -> None:
    ProgressPublisher(run_pk)(kind, data)
