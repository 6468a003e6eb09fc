"""Start the production web server (gunicorn + uvicorn workers, config/gunicorn.py) as a subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # 503 from /api/health is still a server answering
    except OSError:
        return False


def _stop(proc: subprocess.Popen, timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def managed_process(args: list[str], *, env: dict, log_path: Path, ready, what: str, wait_seconds: float = 60):
    """A subprocess in its own session, ready when `ready(log_text)` is true; SIGTERM on exit."""
    log = open(log_path, "w+")
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            log.seek(0)
            if ready(log.read()):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"{what} did not start (exit {proc.returncode}):\n{log.read()[-3000:]}")
            time.sleep(0.2)
        yield proc
    finally:
        _stop(proc)
        log.close()


@contextmanager
def production_server(*, env: dict, workers: int = 1, log_path: Path | None = None):
    """gunicorn serving config.asgi on a free port; yields its base URL once /api/health answers."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"gunicorn-{port}-{os.getpid()}.log"
    full_env = {**env, "PORT": str(port), "HOST": "127.0.0.1", "WEB_CONCURRENCY": str(workers),
                "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.asgi:application"]
    with managed_process(args, env=full_env, log_path=log_path, what="gunicorn",
                         ready=lambda _log: _answers(base_url + "/api/health")) as proc:
        proc.base_url, proc.log_path = base_url, log_path
        yield proc
