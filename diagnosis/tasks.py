"""Celery tasks: thin wrappers that take ids and call services."""

from __future__ import annotations

import socket

from celery import shared_task

from diagnosis.models import ServiceProbe


@shared_task(name="diagnosis.tasks.ping")
def ping(token: str) -> str:
    """Write a probe row: proves a worker consumed the queue and can reach the database."""
    ServiceProbe.objects.get_or_create(token=token, defaults={"worker": socket.gethostname()})
    return token
