"""Retention: delete finished runs older than N days with their audit rows (docs/CONSOLE.md).

The admin never deletes audit rows, superusers included; this command is the one documented way.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.db.models.functions import Coalesce
from django.utils import timezone

from diagnosis.models import AgentStep, CaseLibraryEntry, ChatSession, DiagnosisRun, RunEvent, ToolInvocation

DEFAULT_BATCH_SIZE = 500


def purgeable_runs(*, cutoff):
    """Finished runs created before `cutoff` (a PENDING or RUNNING run is never purged)."""
    return DiagnosisRun.objects.filter(created_at__lt=cutoff, status__in=DiagnosisRun.TERMINAL)


def purgeable_sessions(*, cutoff):
    """Sessions without any run left whose last activity is older than `cutoff`."""
    return (
        ChatSession.objects.annotate(last_active=Coalesce("last_message_at", "created_at"))
        .filter(last_active__lt=cutoff)
        .exclude(Exists(DiagnosisRun.objects.filter(session=OuterRef("pk"))))
    )


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


class Command(BaseCommand):
    help = (
        "Delete finished diagnosis runs older than N days, with their steps, tool invocations, events and "
        "cases, then the sessions left without runs. Use --dry-run first."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than-days", type=int, required=True, metavar="N",
                            help="purge runs created more than N days ago (N >= 1)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                            help=f"runs deleted per transaction (default {DEFAULT_BATCH_SIZE})")
        parser.add_argument("--keep-sessions", action="store_true", help="do not delete sessions left without runs")

    def handle(self, *args, older_than_days, dry_run, batch_size, keep_sessions, **options):
        if older_than_days < 1:
            raise CommandError("--older-than-days must be at least 1")
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        cutoff = timezone.now() - timedelta(days=older_than_days)
        runs = purgeable_runs(cutoff=cutoff)
        when = cutoff.strftime("%Y-%m-%d %H:%M:%S %Z")

        if dry_run:
            pks = runs.values("pk")
            counts = {
                "runs": runs.count(),
                "agent steps": AgentStep.objects.filter(run_id__in=pks).count(),
                "tool invocations": ToolInvocation.objects.filter(run_id__in=pks).count(),
                "run events": RunEvent.objects.filter(run_id__in=pks).count(),
                "cases": CaseLibraryEntry.objects.filter(run_id__in=pks).count(),
            }
            self.stdout.write(f"Dry run: finished runs created before {when} would be deleted:")
            for name, count in counts.items():
                self.stdout.write(f"  {count} {name}")
            if not keep_sessions:
                # Sessions whose every run is purgeable would be left empty, then deleted.
                emptied = (
                    ChatSession.objects.annotate(last_active=Coalesce("last_message_at", "created_at"))
                    .filter(last_active__lt=cutoff)
                    .exclude(Exists(DiagnosisRun.objects.filter(session=OuterRef("pk")).exclude(pk__in=pks)))
                    .count()
                )
                self.stdout.write(f"  {emptied} sessions left without runs")
            self.stdout.write("Nothing was deleted.")
            return

        totals: dict[str, int] = {}
        while True:
            batch = list(runs.order_by("pk").values_list("pk", flat=True)[:batch_size])
            if not batch:
                break
            for name, count in _delete_batch(batch).items():
                totals[name] = totals.get(name, 0) + count
        sessions = 0 if keep_sessions else purgeable_sessions(cutoff=cutoff).delete()[0]
        self.stdout.write(self.style.SUCCESS(f"Purged finished runs created before {when}:"))
        for name in ("runs", "agent steps", "tool invocations", "run events", "cases"):
            self.stdout.write(f"  {totals.get(name, 0)} {name}")
        self.stdout.write(f"  {sessions} sessions left without runs")
