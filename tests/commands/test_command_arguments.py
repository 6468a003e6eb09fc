"""Every management command refuses a bad argument with a one-line CommandError, never a traceback:
negative, zero, huge, non-numeric and unknown values (diagnosis/management/arguments.py)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from diagnosis.models import RegressionSet

from tests.support.worker import ROOT

pytestmark = pytest.mark.django_db

HUGE = "9" * 30

REFUSED = [
    # (command and arguments, what the one line must say)
    (["regression_set", "s", "--limit", "-1"], "argument --limit: -1 is out of range; give 1 to 100000"),
    (["regression_set", "s", "--limit", "0"], "argument --limit: 0 is out of range"),
    (["regression_set", "s", "--limit", HUGE], "argument --limit: " + HUGE + " is out of range"),
    (["regression_set", "s", "--limit", "ten"], "argument --limit: 'ten' is not a whole number"),
    (["regression_set", "s", "--limit", "1.5"], "argument --limit: '1.5' is not a whole number"),
    (["regression_set", "s", "--run", "run-does-not-exist"], "run-does-not-exist"),
    (["regression_set", "s", "--bogus"], "unrecognized arguments: --bogus"),
    (["regress", "no-such-set"], "no-such-set"),
    (["regress", "s", "--max-verdict-drops", "-1"], "argument --max-verdict-drops: -1 is out of range"),
    (["regress", "s", "--max-lost-claims", HUGE], "argument --max-lost-claims: " + HUGE + " is out of range"),
    (["regress", "s", "--max-failed-replays", "many"], "argument --max-failed-replays: 'many' is not a whole number"),
    (["regress", "s", "--wait", "0"], "argument --wait: 0 is out of range"),
    (["regress", "s", "--wait", "inf"], "argument --wait: inf is out of range"),
    (["replay_run", "run-does-not-exist"], "run run-does-not-exist does not exist"),
    (["replay_run", "r", "--wait", "-5"], "argument --wait: -5 is out of range"),
    (["replay_run", "r", "--wait", "nan"], "argument --wait: nan is out of range"),
    (["replay_run", "r", "--wait", "soon"], "argument --wait: 'soon' is not a number of seconds"),
    (["reap_runs", "--lease-seconds", "0"], "argument --lease-seconds: 0 is out of range"),
    (["reap_runs", "--lease-seconds", "-1"], "argument --lease-seconds: -1 is out of range"),
    (["reap_runs", "--lease-seconds", "1e308"], "argument --lease-seconds: 1e308 is out of range"),
    (["reap_runs", "--lease-seconds", "nan"], "argument --lease-seconds: nan is out of range"),
    (["purge_runs", "--older-than-days", "0"], "argument --older-than-days: 0 is out of range; give 1 to 36500"),
    (["purge_runs", "--older-than-days", "-7"], "argument --older-than-days: -7 is out of range"),
    (["purge_runs", "--older-than-days", "99999999999"], "argument --older-than-days: 99999999999 is out of range"),
    (["purge_runs", "--older-than-days", "a week"], "argument --older-than-days: 'a week' is not a whole number"),
    (["purge_runs", "--older-than-days", "30", "--batch-size", "0"], "argument --batch-size: 0 is out of range"),
    (["purge_runs"], "the following arguments are required: --older-than-days"),
    (["bootstrap_demo", "--port", "0"], "argument --port: 0 is out of range; give 1 to 65535"),
    (["bootstrap_demo", "--port", "70000"], "argument --port: 70000 is out of range"),
    (["bootstrap_demo", "--port", "http"], "argument --port: 'http' is not a whole number"),
    (["eval_scenarios", "--lang", "fr"], "argument --lang: invalid choice: 'fr'"),
    (["load_runbooks", "/no/such/folder"], "/no/such/folder is not a folder"),
]


@pytest.mark.parametrize("argv, message", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_bad_argument_is_a_command_error_naming_it(argv, message):
    with pytest.raises(CommandError) as refused:
        call_command(*argv)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_an_accepted_limit_still_builds_the_set():
    out = io.StringIO()
    call_command("regression_set", "empty-set", "--useful", "--limit", "1", stdout=out)  # no run matches
    assert out.getvalue().strip() == "regression set empty-set: 0 runs"
    assert RegressionSet.objects.get(name="empty-set").runs.count() == 0


CLI = [
    ["regression_set", "s", "--limit", "-1"],
    ["purge_runs", "--older-than-days", "99999999999"],
    ["reap_runs", "--lease-seconds", "nan"],
    ["replay_run", "r", "--unknown-option"],
]


@pytest.mark.parametrize("argv", CLI, ids=[" ".join(a) for a in CLI])
def test_from_the_command_line_a_bad_argument_prints_one_line_and_exits_1(argv):
    env = {**os.environ, "DJANGO_DEBUG": "true"}
    done = subprocess.run([sys.executable, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("CommandError: argument", "CommandError: unrecognized")), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
