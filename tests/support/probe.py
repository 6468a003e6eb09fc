"""A probe task for the services pass: proof that a real worker consumed the queue and reached the database.

The worker loads it with `--include tests.support.probe` (see `celery_worker(include=...)`); it writes a
`maintenance_lock` row named after its token, so no table exists for tests alone. It has a queue of its own
(`PROBE_QUEUE`): a worker of the rest of the suite, which does not know this task, would otherwise take the
message from a shared queue and drop it as unregistered."""

from __future__ import annotations

import socket

from config.celery import app


PROBE_QUEUE = "probe"


@app.task(name="tests.support.probe.ping", queue=PROBE_QUEUE)
def ping(token: str) -> str:
    from diagnosis.models import MaintenanceLock

    MaintenanceLock.objects.get_or_create(name=token[:64], defaults={"holder": socket.gethostname()})
    return token
