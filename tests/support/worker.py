"""Start a real Celery worker process against the test database and Redis (services pass)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"mysql://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def worker_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(DATABASE_URL=test_database_url(), REDIS_URL=settings.REDIS_URL, PYTHONUNBUFFERED="1")
    env.update(extra)  # may point the worker at another database or broker
    return env


@contextmanager
def celery_worker(*, name: str = "test", concurrency: int = 1, pool: str = "prefork", queues: str = "diagnosis,maintenance",
                  extra_env: dict | None = None, log_path: Path | None = None, include: str | None = None):
    """A worker subprocess, ready when it logs 'ready'; stopped with SIGTERM (warm shutdown). `include`
    names extra task modules to load (test support tasks such as tests.support.probe)."""
    log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"celery-{name}-{os.getpid()}.log"
    log = open(log_path, "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "INFO", "-Q", queues, "-P", pool,
         "-c", str(concurrency), "-n", f"{name}-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
         "--without-heartbeat", *(["--include", include] if include else [])],
        cwd=ROOT, env=worker_env(**(extra_env or {})), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            log.seek(0)
            if " ready." in log.read():
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"celery worker did not start (exit {proc.returncode}):\n{log.read()[-3000:]}")
            time.sleep(0.2)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
