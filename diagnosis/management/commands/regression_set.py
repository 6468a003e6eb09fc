"""manage.py regression_set NAME --useful --cases --reviewed --run RUN_ID: build a named regression set."""

from __future__ import annotations

from django.core.management.base import CommandError

from diagnosis.management.arguments import ValidatedCommand, integer

from diagnosis.services.regression import RegressionSetError, regression_set_build


class Command(ValidatedCommand):
    help = "Create or replace a named set of recorded runs for `manage.py regress`."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--useful", action="store_true", help="runs support staff rated useful")
        parser.add_argument("--cases", action="store_true", help="runs published to the case library")
        parser.add_argument("--reviewed", action="store_true", help="runs whose review was resolved with a resolution")
        parser.add_argument("--run", action="append", default=[], dest="run_ids", metavar="RUN_ID",
                            help="an explicit run (repeatable)")
        parser.add_argument("--description", default="")
        parser.add_argument("--limit", type=integer(minimum=1, maximum=100_000), default=500,
                            help="at most this many runs (1 to 100000)")

    def handle(self, *args, name, useful, cases, reviewed, run_ids, description, limit, **options):
        try:
            built = regression_set_build(name=name, useful=useful, cases=cases, reviewed=reviewed, run_ids=run_ids,
                                         description=description, limit=limit)
        except RegressionSetError as exc:
            raise CommandError(str(exc)) from None
        count = built.runs.count()
        self.stdout.write(f"regression set {built.name}: {count} run{'s' if count != 1 else ''}")
