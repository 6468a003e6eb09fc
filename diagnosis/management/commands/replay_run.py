"""manage.py replay_run RUN_ID: replay a recorded run on its recorded evidence and print the outcome."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from diagnosis.management.arguments import DAY, ValidatedCommand, seconds
from diagnosis.models import DiagnosisRun
from diagnosis.services.replay import ReplayForbidden, ReplayNotFound, replay_options_clean, replay_submit, replay_wait
from diagnosis.services.submission import RunRefused


class Command(ValidatedCommand):
    help = "Replay a finished chat diagnosis on the tool results it recorded (same graph, chosen model and prompts)."

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--model", help='one model for every role; "offline" is the built-in analyser')
        parser.add_argument("--role-model", action="append", default=[], metavar="ROLE=MODEL",
                            help="a per-role model, e.g. --role-model verifier=gpt-4o (repeatable)")
        parser.add_argument("--prompt-version", help='a prompt catalog: "current", a catalog name or catalog-<hash>')
        parser.add_argument("--live-fallback", action="store_true",
                            help="serve tool calls missing from the recording live (marked in the trace)")
        parser.add_argument("--user", help="who replays it (default: the run's owner)")
        parser.add_argument("--wait", type=seconds(maximum=DAY), default=600.0, help="seconds to wait for the replay to finish")

    def handle(self, *args, run_id, model, role_model, prompt_version, live_fallback, user, wait, **options):
        source = DiagnosisRun.objects.select_related("session__owner").filter(run_id=run_id).first()
        if source is None:
            raise CommandError(f"run {run_id} does not exist")
        who = source.session.owner
        if user:
            who = get_user_model().objects.filter(username=user).first()
            if who is None:
                raise CommandError(f"user {user} does not exist")
        models = {}
        for item in role_model:
            role, _, name = item.partition("=")
            models[role.strip()] = name.strip()
        try:
            replay_options = replay_options_clean(model=model, models=models or None, prompt_version=prompt_version,
                                                  live_fallback=live_fallback)
            run = replay_submit(user=who, run_id=run_id, options=replay_options)
        except (ReplayNotFound, ReplayForbidden):
            raise CommandError(f"{who} may not replay run {run_id}") from None
        except RunRefused as exc:  # bad input, or the user's active-run cap
            raise CommandError(f"{exc.field}: {exc.message}") from None
        run = replay_wait(run, wait)
        self.stdout.write(json.dumps({
            "runId": run.run_id, "replayOf": run_id, "status": run.status, "verdict": run.effective_verdict or None,
            "degraded": run.degraded, "errorCode": run.error_code or None, "model": run.model_name,
            "promptVersion": run.prompt_version, "toolInvocations": run.tool_count,
        }, indent=2))
        if not run.is_terminal:
            raise CommandError(f"replay {run.run_id} did not finish within {wait:g}s (status {run.status})")
