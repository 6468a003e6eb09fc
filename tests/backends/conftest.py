"""Fixtures for backend tests: a real Prometheus server and a recording HTTP server.

No Django: run with ``-p no:django``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

RECORDINGS = Path(__file__).parent / "recordings"
PROMETHEUS_BIN = os.environ.get("PROMETHEUS_BIN", "/usr/bin/prometheus")
PROMETHEUS_WAIT_SECONDS = 60

# Same config as scripts/start_prometheus.sh.
PROMETHEUS_CONFIG = """\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{rules}"]
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["{addr}"]
"""
PROMETHEUS_RULES = """\
groups:
  - name: test
    interval: 1s
    rules:
      - alert: AlwaysFiring
        expr: vector(1)
        labels: {severity: page, service: prometheus}
        annotations:
          summary: "always on"
          description: "test alert that is always firing"
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get_json(url: str):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.loads(response.read().decode())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _has_samples_and_firing_alert(url: str) -> bool:
    """At least 3 ``up`` samples in the last minute (so short ranges have several points)
    and the AlwaysFiring alert firing."""
    up = _get_json(url + "/api/v1/query?query=count_over_time(up%5B1m%5D)")
    alerts = _get_json(url + "/api/v1/alerts")
    if not up or not alerts:
        return False
    result = up.get("data", {}).get("result") or []
    has_up = bool(result) and float(result[0]["value"][1]) >= 3
    firing = any(
        a.get("state") == "firing" and a.get("labels", {}).get("alertname") == "AlwaysFiring"
        for a in alerts.get("data", {}).get("alerts", [])
    )
    return has_up and firing


def _start_prometheus(workdir: Path, extra: str = "", args: tuple[str, ...] = ()):
    """Start prometheus; return (process, url, log path) or raise RuntimeError. `extra` is appended to the
    configuration: further `scrape_configs` items first, then other top-level keys (e.g. `alerting:`)."""
    port = free_port()
    addr = f"127.0.0.1:{port}"
    url = f"http://{addr}"
    (workdir / "rules.yml").write_text(PROMETHEUS_RULES)
    (workdir / "prometheus.yml").write_text(
        PROMETHEUS_CONFIG.format(rules=workdir / "rules.yml", addr=addr) + extra
    )
    log_path = workdir / "prometheus.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [
            PROMETHEUS_BIN,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--web.listen-address={addr}",
            f"--storage.tsdb.path={workdir / 'data'}",
            "--log.level=warn",
            *args,
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    deadline = time.monotonic() + PROMETHEUS_WAIT_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}:\n{log_path.read_text()[-2000:]}")
        if _ready(url) and _has_samples_and_firing_alert(url):
            return proc, url, log_path
        time.sleep(0.2)
    _stop(proc)
    raise RuntimeError(
        f"prometheus at {url} had no 'up' samples / firing alert after "
        f"{PROMETHEUS_WAIT_SECONDS}s:\n{log_path.read_text()[-2000:]}"
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def prometheus_url(tmp_path_factory):
    """Base URL of a real Prometheus (Debian package `prometheus`) scraping itself every 1 s
    with an always-firing alert ``AlwaysFiring{severity="page",service="prometheus"}``."""
    if not (os.path.isfile(PROMETHEUS_BIN) and os.access(PROMETHEUS_BIN, os.X_OK)):
        pytest.fail(
            f"{PROMETHEUS_BIN} not found: the Prometheus integration tests need a real server; "
            "install it with `apt-get install -y prometheus`",
            pytrace=False,
        )
    errors = []
    for attempt in range(3):  # a free port can be taken between probe and bind
        workdir = tmp_path_factory.mktemp(f"prometheus{attempt}")
        try:
            proc, url, _ = _start_prometheus(workdir)
        except RuntimeError as exc:
            errors.append(str(exc))
            continue
        try:
            yield url
        finally:
            _stop(proc)
        return
    pytest.fail("could not start prometheus:\n" + "\n---\n".join(errors), pytrace=False)


# --------------------------------------------------------------------------- fake HTTP server


class RecordingServer:
    """A local HTTP server in a thread that serves canned responses and records requests."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, bytes, dict[str, str]]] = {}
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                parts = urlsplit(self.path)
                server.requests.append({
                    "method": "GET",
                    "path": parts.path,
                    "params": {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                })
                status, content_type, body, headers = server.routes.get(
                    parts.path, (404, "text/plain; charset=utf-8", b"404 page not found\n", {})
                )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def respond(self, path: str, body, status: int = 200, content_type: str | None = None,
                headers: dict[str, str] | None = None) -> None:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            content_type = content_type or "application/json"
        if isinstance(body, str):
            body = body.encode()
        self.routes[path] = (status, content_type or "text/plain; charset=utf-8", body, headers or {})

    def respond_with_recording(self, path: str, name: str, status: int = 200) -> None:
        file = RECORDINGS / name
        content_type = "application/json" if file.suffix == ".json" else "text/plain; charset=utf-8"
        self.respond(path, file.read_bytes(), status=status, content_type=content_type)


@pytest.fixture
def http_server():
    server = RecordingServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


@pytest.fixture
def silent_port():
    """A 127.0.0.1 port that accepts TCP connections but never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
