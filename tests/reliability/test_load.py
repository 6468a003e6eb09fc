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
DEADLINE_SECONDS = 150
# Its own queue: the session's `live_worker` (API tests) must not help, the worker measured has two processes.
LOAD_QUEUE = "reliability-load"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


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

    to_load_queue = mock.patch.object(execute_run, "delay", lambda run_id: execute_run.apply_async(args=[run_id], queue=LOAD_QUEUE))
    with celery_worker(name="load", concurrency=2, queues=LOAD_QUEUE, log_path=tmp_path / "worker.log"), to_load_queue:
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

    waits = [(r.started_at - r.created_at).total_seconds() for r in runs]
    durations = [r.duration_ms / 1000 for r in runs]
    accept = [elapsed for _, _, elapsed in answers]
    span = (max(r.finished_at for r in runs) - min(r.created_at for r in runs)).total_seconds()
    print(f"\nload: {CHATS} chats ({USERS} users, {THREADS} client threads) -> {len(runs)} runs, {statuses['SUCCESS']} SUCCESS, "
          f"0 lost, 0 duplicated, {sum(steps.values())} agent_step rows = sum of step_count; "
          f"submitted in {submitted:.1f}s (POST p50 {percentile(accept, 50) * 1000:.0f} ms, p95 {percentile(accept, 95) * 1000:.0f} ms), "
          f"drained in {drained:.1f}s; throughput {CHATS / span:.2f} runs/s on 2 worker processes; "
          f"queue wait p50 {percentile(waits, 50):.1f}s, p95 {percentile(waits, 95):.1f}s; "
          f"run duration p50 {statistics.median(durations):.2f}s, p95 {percentile(durations, 95):.2f}s")
