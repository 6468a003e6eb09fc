"""Retention: delete finished runs older than a cut-off with their audit rows, then the sessions left
without runs (docs/CONSOLE.md). The admin never deletes audit rows; `manage.py purge_runs` calls this.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.functions import Coalesce

from diagnosis.models import AgentStep, CaseLibraryEntry, ChatSession, DiagnosisRun, RunEvent, ToolInvocation

DEFAULT_BATCH_SIZE = 500
PURGED = ("runs", "agent steps", "tool invocations", "run events", "cases")


def purgeable_runs(*, cutoff) -> QuerySet[DiagnosisRun]:
    """Finished runs created before `cutoff` (a PENDING or RUNNING run is never purged)."""
    return DiagnosisRun.objects.filter(created_at__lt=cutoff, status__in=DiagnosisRun.TERMINAL)


def _idle_sessions(*, cutoff) -> QuerySet[ChatSession]:
    return ChatSession.objects.annotate(last_active=Coalesce("last_message_at", "created_at")).filter(last_active__lt=cutoff)


def purgeable_sessions(*, cutoff) -> QuerySet[ChatSession]:
    """Sessions without any run left whose last activity is older than `cutoff`."""
    return _idle_sessions(cutoff=cutoff).exclude(Exists(DiagnosisRun.objects.filter(session=OuterRef("pk"))))


def runs_purge_preview(*, cutoff, keep_sessions: bool = False) -> dict[str, int]:
    """What `runs_purge` would delete, counted; nothing is deleted."""
    runs = purgeable_runs(cutoff=cutoff)
    pks = runs.values("pk")
    counts = {
        "runs": runs.count(),
        "agent steps": AgentStep.objects.filter(run_id__in=pks).count(),
        "tool invocations": ToolInvocation.objects.filter(run_id__in=pks).count(),
        "run events": RunEvent.objects.filter(run_id__in=pks).count(),
        "cases": CaseLibraryEntry.objects.filter(run_id__in=pks).count(),
    }
    if not keep_sessions:
        # Sessions whose every run is purgeable would be left empty, then deleted.
        counts["sessions"] = _idle_sessions(cutoff=cutoff).exclude(
            Exists(DiagnosisRun.objects.filter(session=OuterRef("pk")).exclude(pk__in=pks))).count()
    return counts


@transaction.atomic
def _delete_batch(run_pks: list[int]) -> dict[str, int]:
    # Children first, each a plain DELETE … WHERE run_id IN (…): no row is loaded into memory.
    counts = {
        "tool invocations": ToolInvocation.objects.filter(run_id__in=run_pks).delete()[0],
        "agent steps": AgentStep.objects.filter(run_id__in=run_pks).delete()[0],
        "run events": RunEvent.objects.filter(run_id__in=run_pks).delete()[0],
        "cases": CaseLibraryEntry.objects.filter(run_id__in=run_pks).delete()[0],
    }
    counts["runs"] = DiagnosisRun.objects.filter(pk__in=run_pks).delete()[0]
    return counts


def runs_purge(*, cutoff, batch_size: int = DEFAULT_BATCH_SIZE, keep_sessions: bool = False) -> dict[str, int]:
    """Delete the purgeable runs batch by batch (one transaction each), then the sessions left without
    runs unless `keep_sessions`. Returns the rows deleted per kind (and "sessions")."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    runs = purgeable_runs(cutoff=cutoff)
    totals = dict.fromkeys(PURGED, 0)
    while True:
        batch = list(runs.order_by("pk").values_list("pk", flat=True)[:batch_size])
        if not batch:
            break
        for name, count in _delete_batch(batch).items():
            totals[name] += count
    totals["sessions"] = 0 if keep_sessions else purgeable_sessions(cutoff=cutoff).delete()[0]
    return totals
