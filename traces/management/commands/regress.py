"""manage.py regress SET --model … --prompt-version …: replay a regression set and gate on thresholds."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError

from diagnosis.management.arguments import DAY, ValidatedCommand, integer, seconds
from diagnosis.services.regression import RegressionSetError
from diagnosis.services.replay import ReplayInputError, replay_options_clean
from diagnosis.services.submission import RunRefused
from traces.regress import Thresholds, regress, write_report


THRESHOLD = integer(minimum=0, maximum=1_000_000)


class Command(ValidatedCommand):
    help = ("Replay every run of a regression set on its recorded evidence with the given model and prompt "
            "catalog, compare each with the recorded run, write regression.json and regression.md, and exit "
            "non-zero when a total exceeds its threshold.")

    def add_arguments(self, parser):
        parser.add_argument("set_name", metavar="SET")
        parser.add_argument("--model", help='one model for every role; "offline" is the built-in analyser')
        parser.add_argument("--role-model", action="append", default=[], metavar="ROLE=MODEL")
        parser.add_argument("--prompt-version", help='"current", a catalog name or catalog-<hash>')
        parser.add_argument("--live-fallback", action="store_true")
        parser.add_argument("--max-verdict-drops", type=THRESHOLD, default=0)
        parser.add_argument("--max-lost-claims", type=THRESHOLD, default=0)
        parser.add_argument("--max-root-cause-disagreements", type=THRESHOLD, default=0)
        parser.add_argument("--max-unsupported-claims", type=THRESHOLD, default=0)
        parser.add_argument("--max-failed-replays", type=THRESHOLD, default=0)
        parser.add_argument("--prices", type=Path, help='price table JSON: {"model": {"prompt": usd_per_1M, "completion": usd_per_1M}}')
        parser.add_argument("--out", type=Path, default=Path("var/regress"), help="report folder")
        parser.add_argument("--wait", type=seconds(maximum=DAY), default=600.0, help="seconds to wait for each replay")

    def handle(self, *args, **o):
        models = dict(item.partition("=")[::2] for item in o["role_model"])
        try:
            options = replay_options_clean(model=o["model"], models=models or None, prompt_version=o["prompt_version"],
                                           live_fallback=o["live_fallback"])
        except ReplayInputError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        prices = None
        if o["prices"]:
            try:
                prices = json.loads(o["prices"].read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise CommandError(f"--prices: {exc}") from None
        limits = Thresholds(o["max_verdict_drops"], o["max_lost_claims"], o["max_root_cause_disagreements"],
                            o["max_unsupported_claims"], o["max_failed_replays"])
        try:
            report = regress(set_name=o["set_name"], options=options, limits=limits, prices=prices, wait_seconds=o["wait"])
        except RegressionSetError as exc:
            raise CommandError(str(exc)) from None
        except RunRefused as exc:  # the regression user's active-run cap stayed full for --wait seconds
            raise CommandError(f"{exc.field}: {exc.message}") from None
        json_path, md_path = write_report(report, o["out"])
        s = report["summary"]
        self.stdout.write(
            f"regress {report['set']}: {s['runs']} runs, root-cause agreement {s['rootCauseAgreement']}, "
            f"verdict drops {s['verdictDrops']}, claims lost {s['claimsLost']}, added {s['claimsAdded']}, "
            f"unsupported {s['unsupportedClaims']}, failed {s['failedReplays']}\nreport: {json_path} {md_path}")
        if report["breaches"]:
            raise CommandError("regression beyond thresholds: " + "; ".join(report["breaches"]))
