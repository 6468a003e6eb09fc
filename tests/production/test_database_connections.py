"""The web process's database connections are bounded by design (docs/DEPLOY.md, "Database connections"):
under ASGI it keeps none between requests, an open stream holds none while it waits, and under load it
stays within the documented per-process bound. Services pass: gunicorn with uvicorn workers on the test
database, connections counted in the server's process list and matched to the web processes' ports."""

from __future__ import annotations

import os
import threading
import time

import httpx
import pytest

from tests.factories import ChatSessionFactory, DiagnosisRunFactory, UserFactory
from tests.production.test_stack import OpenStream, token_of, wait_for
from tests.support.db_connections import held_by

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

WEB_WORKERS = 2
STREAMS = 40
REQUEST_CLIENTS = 12


def stream_read_pool() -> int:
    """asyncio's default executor, on which every stream read runs (live_progress.off_loop)."""
    return min(32, (os.cpu_count() or 1) + 4)


def web_bound(in_flight_requests: int) -> int:
    """docs/DEPLOY.md: a web process holds at most one connection per request running its view code, plus
    one per stream read in flight on the shared pool."""
    return WEB_WORKERS * (in_flight_requests + stream_read_pool())


@pytest.fixture
def web(tmp_path):
    from tests.support.server import production_server
    from tests.support.worker import worker_env

    env = worker_env(SSE_MAX_STREAMS_PER_USER=str(STREAMS), SSE_HEARTBEAT_SECONDS="0.5",
                     STATIC_ROOT=str(tmp_path / "static"), DATABASE_CONN_MAX_AGE="60")  # what the workers use
    with production_server(env=env, workers=WEB_WORKERS, log_path=tmp_path / "web.log") as proc:
        yield proc


def test_open_streams_hold_no_database_connection_and_none_stays_after_the_clients_leave(web):
    users = [UserFactory(username=f"streamer{i}") for i in range(2)]
    streams = []
    for user in users:
        run = DiagnosisRunFactory(session=ChatSessionFactory(owner=user), question="q")  # stays PENDING
        client = httpx.Client(base_url=web.base_url, headers={"Authorization": f"Token {token_of(user)}"}, timeout=30)
        streams += [OpenStream(client, f"/api/runs/{run.run_id}/events") for _ in range(STREAMS // len(users))]
    try:
        assert all(stream.response.status_code == 200 for stream in streams)
        for stream in streams:  # every stream is past its replay and waiting
            stream.read_until(lambda line: line.startswith(": keep-alive"))
        # 40 idle streams: at most the reads of one heartbeat tick in flight, never one per stream
        samples = [held_by(web.pid) for _ in range(10)]
        assert max(samples) <= stream_read_pool(), samples
    finally:
        for stream in streams:
            stream.close()
    wait_for(lambda: held_by(web.pid) == 0, 20, "the web process to give back every connection")


def test_under_concurrent_requests_and_streams_the_web_process_stays_within_the_documented_bound(web):
    user = UserFactory(username="loader")
    runs = [DiagnosisRunFactory(session=ChatSessionFactory(owner=user), question="q") for _ in range(5)]
    headers = {"Authorization": f"Token {token_of(user)}"}
    stop = threading.Event()
    errors: list[str] = []

    def reader(index: int):
        with httpx.Client(base_url=web.base_url, headers=headers, timeout=30) as client:
            while not stop.is_set():
                response = client.get(f"/api/runs/{runs[index % len(runs)].run_id}")
                if response.status_code != 200:
                    errors.append(f"{response.status_code} {response.text[:200]}")

    stream_client = httpx.Client(base_url=web.base_url, headers=headers, timeout=30)
    streams = [OpenStream(stream_client, f"/api/runs/{runs[i % len(runs)].run_id}/events") for i in range(20)]
    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(REQUEST_CLIENTS)]
    for thread in threads:
        thread.start()
    peak, samples = 0, 0
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            peak = max(peak, held_by(web.pid))
            samples += 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        for stream in streams:
            stream.close()
    assert not errors, errors[:3]
    assert samples > 10
    assert 0 < peak <= web_bound(REQUEST_CLIENTS), (peak, web_bound(REQUEST_CLIENTS))
    wait_for(lambda: held_by(web.pid) == 0, 20, "the web process to give back every connection")
