"""Load: 200 concurrent `wait=false` chats over HTTP against a live server, executed by a two-process
Celery worker on MySQL and Redis with the offline model. Nothing is lost or duplicated, every run
ends, step counts match the agent_step rows. Prints throughput and p50/p95 queue wait."""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

import pytest
import redis
import requests
from django.conf import settings
from django.db.models import Count

from diagnosis.models import AgentStep, DiagnosisRun, RunEvent, ToolInvocation
from diagnosis.tasks import execute_run
from tests.factories import UserFactory
from tests.support.worker import celery_worker

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHATS, USERS, THREADS = 200, 20, 40  # 10 chats per user: under the 60/min throttle, over the default cap of 5 active runs
QUESTIONS = (
    "Why is payment-service failing?",
    "Checkout latency is high, what is the root cause?",
    "Why does inventory-service return errors?",
    "payment-service 5xx since this morning, why?",
)
# A liveness bound (every run ends), not a speed claim: fenced writes cost more round trips, and a
# busy 2-core machine drained the 200 runs in up to 155 s (docs/RELIABILITY.md).
DEADLINE_SECONDS = 240
# Database connections of this test database open at once, at most: one per client thread's request
# (the live server runs each request in its own thread) + per worker process one for the run and one
# for its lease ticker + the worker's reaper timer + this test's two (itself and the sampler) + 3 spare.
CONNECTION_BOUND = THREADS + 2 * 2 + 1 + 2 + 3


class ConnectionSampler:
    """Counts, every 0.2 s, the server's connections to the test database (information_schema.processlist)."""

    def __init__(self):
        import threading

        from django.db import connection

        self.db = connection.settings_dict["NAME"]
        self.params = connection.get_connection_params()
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import MySQLdb

        conn = MySQLdb.connect(**{k: v for k, v in self.params.items() if k in ("host", "port", "user", "passwd", "password")})
        try:
            cursor = conn.cursor()
            while not self._stop.wait(0.2):
                cursor.execute("SELECT COUNT(*) FROM information_schema.processlist WHERE db = %s", [self.db])
                self.samples.append(cursor.fetchone()[0])
        finally:
            conn.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)
# Its own queue: the session's `live_worker` (API tests) must not help, the worker measured has two processes.
LOAD_QUEUE = "reliability-load"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


@pytest.mark.timeout(420)
def test_200_concurrent_chats_on_a_two_process_worker_all_finish_once(live_server, demo_knowledge, settings, tmp_path):
    from rest_framework.authtoken.models import Token

    settings.CHAT_MAX_ACTIVE_RUNS = CHATS  # the cap is per user; this test measures the queue, not the cap
    tokens = [Token.objects.get_or_create(user=UserFactory(username=f"load-{i}"))[0].key for i in range(USERS)]
    url = f"{live_server.url}/api/chat"

    def post(i: int) -> tuple[int, dict, float]:
        started = time.monotonic()
        response = requests.post(url, json={"question": QUESTIONS[i % len(QUESTIONS)], "wait": False, "requestId": f"load-{i}"},
                                 headers={"Authorization": f"Token {tokens[i % USERS]}"}, timeout=60)
        return response.status_code, response.json(), time.monotonic() - started

    to_load_queue = mock.patch.object(execute_run, "delay", lambda run_id, **kwargs: execute_run.apply_async(args=[run_id], kwargs=kwargs, queue=LOAD_QUEUE))
    with celery_worker(name="load", concurrency=2, queues=LOAD_QUEUE, log_path=tmp_path / "worker.log"), to_load_queue, \
            ConnectionSampler() as connections:
        started = time.monotonic()
        with ThreadPoolExecutor(THREADS) as pool:
            answers = list(pool.map(post, range(CHATS)))
        submitted = time.monotonic() - started
        deadline = time.monotonic() + DEADLINE_SECONDS
        while DiagnosisRun.objects.exclude(status__in=DiagnosisRun.TERMINAL).exists():
            assert time.monotonic() < deadline, f"runs still not terminal after {DEADLINE_SECONDS}s: " + str(
                Counter(DiagnosisRun.objects.values_list("status", flat=True)))
            time.sleep(0.5)
        drained = time.monotonic() - started

    codes = Counter(code for code, _, _ in answers)
    assert codes == {202: CHATS}, codes
    run_ids = [body["runId"] for _, body, _ in answers]
    assert len(set(run_ids)) == CHATS  # 200 distinct runs answered
    runs = list(DiagnosisRun.objects.all())
    assert len(runs) == CHATS and {r.run_id for r in runs} == set(run_ids)  # none lost, none extra
    statuses = Counter(r.status for r in runs)
    assert statuses == {"SUCCESS": CHATS}, statuses

    steps = dict(AgentStep.objects.values("run_id").annotate(n=Count("id")).values_list("run_id", "n"))
    tools = dict(ToolInvocation.objects.values("run_id").annotate(n=Count("id")).values_list("run_id", "n"))
    claims = dict(RunEvent.objects.filter(kind="status", data__status="RUNNING").values("run_id").annotate(n=Count("id"))
                  .values_list("run_id", "n"))
    for run in runs:
        assert run.step_count == steps.get(run.pk, 0) > 0, run.run_id
        assert run.tool_count == tools.get(run.pk, 0), run.run_id
        assert claims.get(run.pk) == 1, f"{run.run_id} claimed {claims.get(run.pk)} times"
    duplicated = AgentStep.objects.values("run_id", "step_index").annotate(n=Count("id")).filter(n__gt=1).count()
    assert duplicated == 0
    client = redis.Redis.from_url(settings.REDIS_URL)
    left = [v for v in client.hvals("unacked") if json.loads(v)[2] == LOAD_QUEUE]
    assert client.llen(LOAD_QUEUE) == 0 and not left  # no message left behind, queued or unacknowledged

    assert connections.samples and max(connections.samples) <= CONNECTION_BOUND, max(connections.samples)

    waits = [(r.started_at - r.created_at).total_seconds() for r in runs]
    durations = [r.duration_ms / 1000 for r in runs]
    accept = [elapsed for _, _, elapsed in answers]
    span = (max(r.finished_at for r in runs) - min(r.created_at for r in runs)).total_seconds()
    print(f"\nload: {CHATS} chats ({USERS} users, {THREADS} client threads) -> {len(runs)} runs, {statuses['SUCCESS']} SUCCESS, "
          f"0 lost, 0 duplicated, {sum(steps.values())} agent_step rows = sum of step_count; "
          f"submitted in {submitted:.1f}s (POST p50 {percentile(accept, 50) * 1000:.0f} ms, p95 {percentile(accept, 95) * 1000:.0f} ms), "
          f"drained in {drained:.1f}s; throughput {CHATS / span:.2f} runs/s on 2 worker processes; "
          f"queue wait p50 {percentile(waits, 50):.1f}s, p95 {percentile(waits, 95):.1f}s; "
          f"run duration p50 {statistics.median(durations):.2f}s, p95 {percentile(durations, 95):.2f}s; "
          f"database connections at most {max(connections.samples)} (bound {CONNECTION_BOUND}, "
          f"{len(connections.samples)} samples)")
