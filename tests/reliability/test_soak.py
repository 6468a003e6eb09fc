"""The short soak (about 2 minutes): bench/soak.py starts the Procfile stack on its own MariaDB and Redis,
drives runs from several clients with open event streams, SIGKILLs a worker and restarts Redis mid-way.
It fails on any lost, duplicated, stuck or wrongly FAILED run, or on database connections past the bound
of docs/DEPLOY.md. The long soak's figures are in docs/RELIABILITY.md."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.worker import ROOT

pytestmark = [pytest.mark.services, pytest.mark.slow]

SHORT = ["--runs", "60", "--clients", "8", "--streams", "12", "--mariadb-port", "3422", "--redis-port", "6422",
         "--web-port", "8122", "--stuck-after", "150"]


def test_a_short_soak_with_a_killed_worker_and_a_redis_restart_ends_every_run_once(tmp_path):
    out = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, "bench/soak.py", *SHORT, "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert out.exists(), done.stderr[-4000:]
    figures = json.loads(out.read_text())
    print("\nsoak:", json.dumps({k: figures[k] for k in ("accepted", "success", "failed", "expectedFailed", "faults",
                                                          "peakConnections", "connectionBound", "e2eSeconds")}))
    assert figures["accepted"] == 60
    assert figures["lost"] == [] and figures["stuck"] == [] and figures["duplicated"] == []
    assert figures["wronglyFailed"] == {}
    assert figures["success"] + len(figures["expectedFailed"]) == 60
    assert any("SIGKILLed" in f for f in figures["faults"]) and any("Redis restarted" in f for f in figures["faults"])
    assert figures["peakConnections"] <= figures["connectionBound"]
    assert done.returncode == 0, done.stdout[-3000:]
