"""The database down for 30 s under a live server and worker: the API answers 503 JSON with Retry-After,
every run ends, and the worker recovers. Everything here runs on a MariaDB instance of the test's own
(its own data directory and port), so the shared database is never touched; Redis is the session's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
import requests
from django.conf import settings

from tests.reliability.conftest import closed_port
from tests.reliability.scripted import PLAN, script_happy
from tests.reliability.test_leases import LEASE, QUEUES, REAPER_EVERY, lease_env
from tests.support.fake_openai import Reply
from tests.support.worker import ROOT, celery_worker

pytestmark = [pytest.mark.services, pytest.mark.slow]

OUTAGE_SECONDS = 30
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"


def wait_for(predicate, seconds: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {seconds}s waiting for {what}"
        time.sleep(interval)


class OwnMariaDB:
    def __init__(self, tmp_path, port: int | None = None):
        self.dir, self.port, self.proc = tmp_path / "mariadb", port or closed_port(), None
        self.url = f"mysql://root@127.0.0.1:{self.port}/aiops_outage"

    def install(self) -> None:
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.dir / 'data'}", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        log = open(self.dir / "server.log", "a")
        self.proc = subprocess.Popen(
            [MARIADBD, "--no-defaults", f"--datadir={self.dir / 'data'}", f"--port={self.port}", "--bind-address=127.0.0.1",
             f"--socket={self.dir / 'sock'}", f"--pid-file={self.dir / 'pid'}", "--user=root", "--skip-log-bin",
             "--innodb-buffer-pool-size=32M"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: subprocess.run(["mysqladmin", "-uroot", "-h127.0.0.1", f"-P{self.port}", "ping"],
                                        capture_output=True, timeout=5).returncode == 0, 60, "mariadbd to start")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=20)

    def sql(self, statement: str) -> None:
        subprocess.run(["mysql", "-uroot", "-h127.0.0.1", f"-P{self.port}", "-e", statement], check=True, timeout=30)


@contextmanager
def own_mariadb(tmp_path, port: int | None = None):
    db = OwnMariaDB(tmp_path, port)
    db.dir.mkdir()
    db.install()
    db.start()
    try:
        db.sql("CREATE DATABASE aiops_outage CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        yield db
    finally:
        db.kill()


def manage(env: dict, *args: str) -> str:
    proc = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def process_env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(PYTHONUNBUFFERED="1", REDIS_URL=settings.REDIS_URL, LOG_LEVEL="WARNING")
    env.update(extra)
    return env


def test_the_database_down_for_30s_answers_503_json_every_run_ends_and_the_worker_recovers(fake_openai, tmp_path):
    # Each run spends ~6 s in its planner call: the outage lands while some run, others wait in the queue.
    script_happy(fake_openai, planner=Reply.trickle(6, then=Reply.json(PLAN)))
    with own_mariadb(tmp_path) as db:
        extra = lease_env(fake_openai, DATABASE_URL=db.url, DJANGO_DEBUG="true", RUN_QUEUE_DEADLINE_SECONDS="20")
        env = process_env(extra)
        manage(env, "migrate", "--noinput")
        token = manage(env, "shell", "-c", (
            "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token; "
            "u = User.objects.create_user('outage', password='x-outage-pass-1'); print(Token.objects.create(user=u).key)")).strip().splitlines()[-1]
        port = closed_port()
        base = f"http://127.0.0.1:{port}"
        server_log = open(tmp_path / "server.log", "w")
        server = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], cwd=ROOT,
                                  env=env, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True)
        auth = {"Authorization": f"Token {token}"}
        try:
            wait_for(lambda: requests.get(f"{base}/api/health", timeout=5).status_code == 200, 60, "the server")
            with celery_worker(name="outage", queues=QUEUES, extra_env=extra, log_path=tmp_path / "worker.log"):
                run_ids = [requests.post(f"{base}/api/chat", json={"question": f"Why is payment-service failing? #{i}",
                                                                     "wait": False}, headers=auth, timeout=30).json()["runId"]
                           for i in range(3)]
                status = lambda rid: requests.get(f"{base}/api/runs/{rid}", headers=auth, timeout=10).json()["status"]  # noqa: E731
                wait_for(lambda: any(status(r) == "RUNNING" for r in run_ids), 60, "a run to start")

                db.kill()
                down = time.monotonic()
                answers = []
                while time.monotonic() - down < OUTAGE_SECONDS:
                    for method, path, body in (("post", "/api/chat", {"question": "during the outage", "wait": False}),
                                               ("get", f"/api/runs/{run_ids[0]}", None), ("get", "/api/health", None)):
                        r = requests.request(method, base + path, json=body, headers=auth, timeout=30)
                        answers.append((path, r.status_code, r.headers.get("Content-Type"), r.headers.get("Retry-After"),
                                        r.json() if r.headers.get("Content-Type") == "application/json" else r.text[:200]))
                    time.sleep(2)
                db.start()
                up = time.monotonic()

                finals = wait_for(lambda: (s := {r: status(r) for r in run_ids}) and all(
                    v in ("SUCCESS", "FAILED") for v in s.values()) and s, LEASE + 2 * REAPER_EVERY + 20 + 90, "every run to end")
                ended_after = time.monotonic() - up
                after = requests.post(f"{base}/api/chat", json={"question": "Why is payment-service failing? (after)",
                                                                "wait": False}, headers=auth, timeout=30)
                assert after.status_code == 202, after.text
                recovered = wait_for(lambda: status(after.json()["runId"]) == "SUCCESS", 90, "a run after the outage")
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=20)
            server_log.close()

    api = [a for a in answers if a[0] != "/api/health"]
    assert api and all(code == 503 and ctype == "application/json" and retry and body["error"]["code"] == "database_unavailable"
                       for _, code, ctype, retry, body in api), api
    assert all(a[1] == 503 and a[4]["checks"]["database"]["ok"] is False for a in answers if a[0] == "/api/health")
    assert recovered
    outcome = sorted(finals.values())
    print(f"\ndatabase down {OUTAGE_SECONDS}s (own MariaDB, SIGKILLed then restarted): {len(api)} API answers during the "
          f"outage, all 503 database_unavailable JSON with Retry-After, 0 HTML; the 3 runs ended {outcome} "
          f"{ended_after:.1f}s after the database came back; a new chat afterwards ended SUCCESS")
