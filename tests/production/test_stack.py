"""The production processes together (services pass): gunicorn with uvicorn workers, a Celery worker
and beat on MySQL and Redis. Streams are capped per user and freed on disconnect; a real Prometheus
scrapes /metrics; `honcho start` runs the Procfile."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import httpx
import pytest

from diagnosis.models import DiagnosisRun
from tests.conftest import STACK_MAX_STREAMS, STACK_METRICS_TOKEN
from tests.diagnosis.conftest import demo_knowledge  # noqa: F401
from tests.factories import ChatSessionFactory, DiagnosisRunFactory
from tests.support.server import ROOT, free_port, managed_process

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def token_of(user) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key


def wait_for(predicate, seconds: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {seconds}s waiting for {what}"
        time.sleep(interval)


def metric(base_url: str, name: str) -> float | None:
    text = httpx.get(base_url + "/metrics", headers={"Authorization": f"Bearer {STACK_METRICS_TOKEN}"}, timeout=10).text
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    return float(match.group(1)) if match else None


def no_stream_open(base_url: str) -> float:
    """Wait until the server holds no stream open; returns that baseline, 0. A client that closed its
    stream in an earlier test is noticed by the server at its next heartbeat, so a gauge read right
    away may still count it; every test here starts from a server that has let go of every stream."""
    wait_for(lambda: (metric(base_url, "aiops_sse_open_streams") or 0) == 0, 30,
             "the streams of earlier tests to be let go")
    return 0.0


class OpenStream:
    """An SSE request held open; `.lines()` reads what has arrived."""

    def __init__(self, client: httpx.Client, url: str):
        self.response = client.send(client.build_request("GET", url, headers={"Accept": "text/event-stream"}), stream=True)
        self._lines = self.response.iter_lines()

    def read_until(self, predicate, limit: int = 200) -> list[str]:
        seen = []
        for line in self._lines:
            seen.append(line)
            if predicate(line) or len(seen) >= limit:
                return seen
        return seen

    def close(self):
        self.response.close()


def hit_the_stream_cap_and_free_a_slot(production_stack, alice, bob) -> float:
    """Open the most streams alice may, be refused one more, close one and reopen in its slot; every
    stream is closed on return. Returns the open-streams gauge as it was before."""
    pending = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), question="q")  # never enqueued: stays PENDING
    url = f"/api/runs/{pending.run_id}/events"
    base = production_stack.base_url
    alice_http = httpx.Client(base_url=base, headers={"Authorization": f"Token {token_of(alice)}"}, timeout=30)
    before = no_stream_open(base)
    streams = [OpenStream(alice_http, url) for _ in range(STACK_MAX_STREAMS)]
    try:
        assert all(s.response.status_code == 200 for s in streams)
        for stream in streams:  # an idle stream carries heartbeat comments (every 0.5 s here)
            assert stream.read_until(lambda line: line.startswith(": keep-alive"))[-1] == ": keep-alive"
        assert metric(base, "aiops_sse_open_streams") == before + STACK_MAX_STREAMS

        refused = alice_http.get(url)
        assert refused.status_code == 429, refused.text
        assert refused.headers["content-type"].startswith("application/json")
        assert refused.json()["error"]["code"] == "too_many_streams"
        # the cap is per user: bob is not affected by alice's streams (he may not read her run: 404, not 429)
        bob_http = httpx.Client(base_url=base, headers={"Authorization": f"Token {token_of(bob)}"}, timeout=30)
        assert bob_http.get(url).status_code == 404

        streams.pop().close()  # the client goes away: the server notices and frees the slot

        def reopened():
            stream = OpenStream(alice_http, url)
            if stream.response.status_code == 200:
                streams.append(stream)
                return True
            stream.response.read()
            stream.close()
            return False

        wait_for(reopened, 20, "the closed stream's slot to be freed")
    finally:
        for stream in streams:
            stream.close()
    return before


def test_streams_are_capped_per_user_send_heartbeats_and_free_their_slot_on_disconnect(production_stack, alice, bob):
    hit_the_stream_cap_and_free_a_slot(production_stack, alice, bob)


def test_after_the_cap_was_hit_the_open_streams_gauge_returns_to_where_it_was(production_stack, alice, bob):
    before = hit_the_stream_cap_and_free_a_slot(production_stack, alice, bob)
    base = production_stack.base_url
    wait_for(lambda: (metric(base, "aiops_sse_open_streams") or 0) <= before, 30, "every stream to be cleaned up")


def test_the_open_streams_gauge_returns_to_where_it_was_once_the_clients_are_gone(production_stack, alice):
    pending = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), question="q")
    url = f"/api/runs/{pending.run_id}/events"
    base = production_stack.base_url
    alice_http = httpx.Client(base_url=base, headers={"Authorization": f"Token {token_of(alice)}"}, timeout=30)
    before = no_stream_open(base)
    streams = [OpenStream(alice_http, url) for _ in range(STACK_MAX_STREAMS)]
    for stream in streams:
        assert stream.read_until(lambda line: line.startswith(": keep-alive"))[-1] == ": keep-alive"
        stream.close()
    wait_for(lambda: (metric(base, "aiops_sse_open_streams") or 0) <= before, 30, "every stream to be cleaned up")


def test_a_huge_last_event_id_is_400_json_not_a_server_error(production_stack, alice):
    run = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), question="q")
    response = httpx.get(f"{production_stack.base_url}/api/runs/{run.run_id}/events", timeout=30,
                         headers={"Authorization": f"Token {token_of(alice)}", "Last-Event-ID": "9" * 5000})
    assert response.status_code == 400 and response.json()["error"]["field"] == "Last-Event-ID"


def test_the_waiting_chat_call_answers_when_the_worker_finishes(production_stack, alice, demo_knowledge):  # noqa: F811
    response = httpx.post(f"{production_stack.base_url}/api/chat", json={"question": "Why is payment-service failing?"},
                          headers={"Authorization": f"Token {token_of(alice)}"}, timeout=90)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "SUCCESS"
    run = DiagnosisRun.objects.get(run_id=response.json()["runId"])
    assert run.celery_task_id  # executed by the worker process, not in the web process


def test_prometheus_scrapes_the_service_and_answers_a_query_for_its_runs(production_stack, alice, demo_knowledge,  # noqa: F811
                                                                         tmp_path_factory):
    from tests.backends.conftest import PROMETHEUS_BIN, _start_prometheus, _stop

    if not os.access(PROMETHEUS_BIN, os.X_OK):
        pytest.fail(f"{PROMETHEUS_BIN} is missing: apt-get install prometheus", pytrace=False)
    body = httpx.post(f"{production_stack.base_url}/api/chat", json={"question": "hello there"},
                      headers={"Authorization": f"Token {token_of(alice)}"}, timeout=90).json()
    assert body["status"] == "SUCCESS"
    target = urllib.parse.urlsplit(production_stack.base_url).netloc
    scrape = (f"  - job_name: aiops\n    metrics_path: /metrics\n"
              f"    authorization: {{type: Bearer, credentials: {STACK_METRICS_TOKEN}}}\n"
              f"    static_configs:\n      - targets: [\"{target}\"]\n")
    proc, url, _log = _start_prometheus(tmp_path_factory.mktemp("prometheus-scrape"), extra=scrape)
    try:
        query = 'sum by (flow, status) (aiops_runs_total{job="aiops", flow="CHAT", status="SUCCESS"})'

        def series():
            answer = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=5).json()
            result = answer["data"]["result"]
            return result if result and float(result[0]["value"][1]) >= 1 else None

        result = wait_for(series, 30, "Prometheus to scrape aiops_runs_total")
        assert result[0]["metric"] == {"flow": "CHAT", "status": "SUCCESS"}
        up = httpx.get(f"{url}/api/v1/query", params={"query": 'up{job="aiops"}'}, timeout=5).json()
        assert up["data"]["result"][0]["value"][1] == "1"
    finally:
        _stop(proc)


@pytest.mark.slow
def test_honcho_starts_the_procfile_web_worker_and_beat(tmp_path, live_worker):
    """`make up`'s path: the release step, then web, worker and beat from the Procfile."""
    from tests.support.worker import worker_env

    port = free_port()
    env = worker_env(STATIC_ROOT=str(tmp_path / "static"), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                     WEB_CONCURRENCY="1")
    release = subprocess.run([sys.executable, "-m", "honcho", "start", "release"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert release.returncode == 0, release.stdout[-3000:]
    assert (tmp_path / "static" / "admin" / "css" / "base.css").is_file()

    def health() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    started = {"web": False, "worker": False, "beat": False}

    def ready(log: str) -> bool:
        started["worker"] = started["worker"] or " ready." in log
        started["beat"] = started["beat"] or "beat: Starting" in log
        return all(started[k] for k in ("worker", "beat")) and health()

    args = [sys.executable, "-m", "honcho", "start", "-p", str(port), "web", "worker", "beat"]
    with managed_process(args, env=env, log_path=tmp_path / "honcho.log", what="honcho", ready=ready,
                         wait_seconds=90) as proc:
        body = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=5).json()
        assert body["status"] == "ok" and all(check["ok"] for check in body["checks"].values())
    assert proc.returncode is not None
    log = (tmp_path / "honcho.log").read_text()
    assert re.search(r"web\.1\s+\|.*Listening at: http://[0-9.]+:%d" % port, log), log[-2000:]
