"""Around the execution of one run: its log context, its trace export."""

from __future__ import annotations

import logging
from contextlib import contextmanager

from diagnosis.observability import tracing
from diagnosis.observability.logs import run_context

logger = logging.getLogger("diagnosis.run")


@contextmanager
def observed_run(run_id: str):
    """Every log record written inside carries run_id and session_id; a run that finishes inside is
    exported as a trace (when tracing is configured)."""
    from django.db import DatabaseError

    from diagnosis.models import DiagnosisRun

    def lookup(query):  # log context only: a database that is away must not decide how the task ends
        try:
            return query.first()
        except DatabaseError:
            return None

    row = lookup(DiagnosisRun.objects.filter(run_id=run_id).values_list("session__session_id", "status"))
    session_id, status_before = row if row else (None, None)
    with run_context(run_id=run_id, session_id=session_id):
        logger.info("run execution starts (status %s)", status_before)
        try:
            yield
        finally:
            status = lookup(DiagnosisRun.objects.filter(run_id=run_id).values_list("status", flat=True))
            logger.info("run execution ends (status %s)", status)
            if status in DiagnosisRun.TERMINAL and status_before not in DiagnosisRun.TERMINAL:
                tracing.export_run(run_id)
