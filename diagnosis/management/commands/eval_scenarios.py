from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from diagnosis.management.arguments import ValidatedCommand

from diagnosis.evaluation.scenarios import IncrementalReport, evaluate_folder, markdown_table, summary


class Command(ValidatedCommand):
    help = ("Run the diagnosis over every scenario in a folder (demo format: logs, metrics, alerts, runbooks, "
            "ground truth) and report false confidence (a PASS on a wrong root cause), strict root-cause hits, "
            "undetermined runs, citation validity and unsupported claims. "
            "Exits non-zero when any answer contains an unverified claim or shows false confidence.")

    def add_arguments(self, parser):
        parser.add_argument("--scenarios", type=Path, default=None, help="Folder of scenarios (default: the shipped demo).")
        parser.add_argument("--lang", choices=("en", "zh", "both"), default="both")
        parser.add_argument("--out", type=Path, default=Path("var/eval"), help="Where to write evaluation.jsonl (one line per finished run), evaluation.json and evaluation.md.")

    def handle(self, scenarios, lang, out, **options):
        folder = scenarios or Path(settings.DEMO_SCENARIOS_DIR)
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder")
        languages = ("en", "zh") if lang == "both" else (lang,)
        report = IncrementalReport(out)  # each finished run is on disk at once: an interruption keeps it
        scores = evaluate_folder(folder=folder, languages=languages, on_score=report.add)
        json_path, md_path = report.finish()
        self.stdout.write(markdown_table(scores))
        self.stdout.write(f"\nsummary: {summary(scores)} (model: {settings.LLM_PROVIDER})")
        self.stdout.write(f"wrote {json_path} and {md_path}")
        unsupported = sum(s.unsupported_claims for s in scores)
        false_confidence = [f"{s.scenario}/{s.language}" for s in scores if s.false_confidence]
        if false_confidence:
            raise CommandError(f"false confidence (PASS on a wrong root cause): {', '.join(false_confidence)}")
        if unsupported:
            raise CommandError(f"{unsupported} unverified claim(s) appeared in answers")
