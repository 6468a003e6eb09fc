from django.conf import settings
from django.core.management.base import CommandError

from diagnosis.management.arguments import DAY, ValidatedCommand, seconds

from diagnosis.services.reaper import runs_reap_stale, runs_stale


class Command(ValidatedCommand):
    help = ("Record FAILED (worker_lost) every RUNNING run whose heartbeat is older than the lease, keeping its "
            "partial steps and trace. The beat task reap_stale_runs does the same every RUN_LEASE_SECONDS/2.")

    def add_arguments(self, parser):
        parser.add_argument("--lease-seconds", type=seconds(maximum=365 * DAY), default=None,
                            help=f"Heartbeat age that counts as lost (default RUN_LEASE_SECONDS={settings.RUN_LEASE_SECONDS}).")
        parser.add_argument("--dry-run", action="store_true", help="List the stale runs without changing them.")

    def handle(self, lease_seconds, dry_run, **options):
        if lease_seconds is not None and lease_seconds <= 0:
            raise CommandError("--lease-seconds must be positive")
        if dry_run:
            stale = runs_stale(lease_seconds=lease_seconds)
            for run_id in stale:
                self.stdout.write(run_id)
            self.stdout.write(f"{len(stale)} stale run(s); dry run, nothing changed")
            return
        reaped = runs_reap_stale(lease_seconds=lease_seconds)
        for run in reaped:
            self.stdout.write(f"{run.run_id} FAILED worker_lost ({run.step_count} steps kept)")
        self.stdout.write(f"reaped {len(reaped)} run(s)")
