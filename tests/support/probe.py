"""A probe task for the services pass: proof that a real worker consumed the queue and reached the database.

The worker loads it with `--include tests.support.probe` (see `celery_worker(include=...)`); it writes a
`maintenance_lock` row named after its token, so no table exists for tests alone."""

from __future__ import annotations

import socket

from config.celery import app


@app.task(name="tests.support.probe.ping", queue="maintenance")
def ping(token: str) -> str:
    from diagnosis.models import MaintenanceLock

    MaintenanceLock.objects.get_or_create(name=token[:64], defaults={"holder": socket.gethostname()})
    return token
