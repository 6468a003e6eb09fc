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


@contextmanager
def beat_process(*, env: dict, workdir: Path):
    """`celery beat` with the product schedule (the reaper), ready once it has started."""
    args = [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO", "-s", str(workdir / "beat-schedule"),
            "--pidfile="]
    with managed_process(args, env={**env, "PYTHONUNBUFFERED": "1"}, log_path=workdir / "beat.log", what="celery beat",
                         ready=lambda log: "beat: Starting" in log) as proc:
        yield proc


class LiveResponse:
    """An httpx response with the parts of a Django test response the API tests read."""

    def __init__(self, response):
        self._response = response
        self.status_code = response.status_code
        self.content = response.content
        self.streaming_content = [response.content]
        self.headers = response.headers

    def json(self):
        return self._response.json()

    def __getitem__(self, name: str) -> str:
        return self._response.headers[name]


class LiveApiClient:
    """The API test client's interface (get/post with `format="json"` and HTTP_* headers), sent over
    HTTP to the production server with a token."""

    def __init__(self, base_url: str, token: str | None):
        import httpx

        self.base_url = base_url
        self._headers = {"Authorization": f"Token {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url, timeout=120)

    @staticmethod
    def _headers_of(extra: dict) -> dict:
        headers = {}
        for key, value in extra.items():
            if key.startswith("HTTP_"):
                headers[key[5:].replace("_", "-").title()] = value
            elif key == "content_type":
                headers["Content-Type"] = value
        return headers

    def get(self, path: str, data: dict | None = None, **extra) -> LiveResponse:
        return LiveResponse(self._http.get(path, params=data, headers={**self._headers, **self._headers_of(extra)}))

    def post(self, path: str, data=None, format: str | None = None, **extra) -> LiveResponse:  # noqa: A002
        headers = {**self._headers, **self._headers_of(extra)}
        if format == "json" or isinstance(data, (dict, list)):
            return LiveResponse(self._http.post(path, json=data, headers=headers))
        return LiveResponse(self._http.post(path, content=data, headers=headers))
