"""Retention: delete finished runs older than N days with their audit rows (docs/CONSOLE.md).

The admin never deletes audit rows, superusers included; this command is the one documented way. The
deleting is the write side's (`diagnosis/services/retention.py`); this command only parses and reports.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import CommandError
from django.utils import timezone

from diagnosis.management.arguments import ValidatedCommand, integer
from diagnosis.services.retention import DEFAULT_BATCH_SIZE, PURGED, runs_purge, runs_purge_preview


class Command(ValidatedCommand):
    help = (
        "Delete finished diagnosis runs older than N days, with their steps, tool invocations, events and "
        "cases, then the sessions left without runs. Use --dry-run first."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than-days", type=integer(minimum=1, maximum=36_500), required=True, metavar="N",
                            help="purge runs created more than N days ago (1 to 36500)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
        parser.add_argument("--batch-size", type=integer(minimum=1, maximum=100_000), default=DEFAULT_BATCH_SIZE,
                            help=f"runs deleted per transaction (default {DEFAULT_BATCH_SIZE})")
        parser.add_argument("--keep-sessions", action="store_true", help="do not delete sessions left without runs")

    def handle(self, *args, older_than_days, dry_run, batch_size, keep_sessions, **options):
        if older_than_days < 1:
            raise CommandError("--older-than-days must be at least 1")
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        cutoff = timezone.now() - timedelta(days=older_than_days)
        when = cutoff.strftime("%Y-%m-%d %H:%M:%S %Z")

        if dry_run:
            counts = runs_purge_preview(cutoff=cutoff, keep_sessions=keep_sessions)
            self.stdout.write(f"Dry run: finished runs created before {when} would be deleted:")
            for name in ("runs", "agent steps", "tool invocations", "run events", "cases"):
                self.stdout.write(f"  {counts[name]} {name}")
            if "sessions" in counts:
                self.stdout.write(f"  {counts['sessions']} sessions left without runs")
            self.stdout.write("Nothing was deleted.")
            return

        totals = runs_purge(cutoff=cutoff, batch_size=batch_size, keep_sessions=keep_sessions)
        self.stdout.write(self.style.SUCCESS(f"Purged finished runs created before {when}:"))
        for name in PURGED:
            self.stdout.write(f"  {totals[name]} {name}")
        self.stdout.write(f"  {totals['sessions']} sessions left without runs")
