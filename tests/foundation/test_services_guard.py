"""The services pass fails, never skips or xfails, when MariaDB or Redis is not configured or not answering."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import services_missing

ROOT = Path(__file__).resolve().parents[2]
# A services test that needs nothing but the guard to run: if the guard let it through, it would pass.
TARGET = "tests/foundation/test_services_pass.py::test_the_connection_speaks_utf8mb4_in_strict_mode"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_embedded_database_and_an_unset_redis_are_both_named():
    missing = services_missing(database={"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}, redis_url=None)
    assert "DATABASE_URL must be mysql" in missing and "REDIS_URL is not set" in missing


def test_a_mariadb_and_a_redis_that_do_not_answer_are_both_named():
    port = _closed_port()
    missing = services_missing(database={"ENGINE": "django.db.backends.mysql", "NAME": "x", "HOST": "127.0.0.1",
                                         "PORT": str(port), "USER": "root"}, redis_url=f"redis://127.0.0.1:{port}/0")
    assert f"MariaDB at 127.0.0.1:{port} does not answer" in missing
    assert f"Redis at redis://127.0.0.1:{port}/0 does not answer" in missing


def _run_services_pass(**env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "AIOPS_REQUIRE_SERVICES": "1", "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TARGET],
                          cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize(("database_url", "redis_url", "named"), [
    ("", "", "DATABASE_URL must be mysql"),
    ("mysql://root@127.0.0.1:{closed}/h_guard", "", "MariaDB at 127.0.0.1:{closed} does not answer"),
    ("mysql://root@127.0.0.1:{closed}/h_guard", "redis://127.0.0.1:{closed}/0", "Redis at redis://127.0.0.1:{closed}/0"),
])
def test_the_services_pass_fails_naming_the_missing_service(database_url, redis_url, named):
    closed = _closed_port()
    result = _run_services_pass(DATABASE_URL=database_url.format(closed=closed), REDIS_URL=redis_url.format(closed=closed))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "xfail" not in output and "skipped" not in output and " passed" not in output, output
    assert "1 error" in output and named.format(closed=closed) in output, output
