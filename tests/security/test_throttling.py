"""Per-user throttling of run submissions and the cap on a user's concurrent runs: both answer 429
with Retry-After, create nothing, and leave other users alone."""

from __future__ import annotations

import threading
import time
from unittest import mock

import pytest

from diagnosis.api.throttling import ChatThrottle
from diagnosis.models import DiagnosisRun
from tests.api.conftest import token_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("api_executor")]

HELLO = {"question": "hello there"}


@pytest.fixture
def tiny_throttle(monkeypatch):
    """CHAT_THROTTLE_RATE is read into DRF's throttle class at import; patch the class's rates. The clock is
    held in the middle of one window: requests that straddle a minute would count in two fixed windows."""
    monkeypatch.setattr(ChatThrottle, "THROTTLE_RATES", {**ChatThrottle.THROTTLE_RATES, "chat": "3/min"})
    held = (time.time() // 60) * 60 + 30
    monkeypatch.setattr(ChatThrottle, "timer", lambda self: held)
    return 3


def assert_429_with_retry_after(response, code: str, *, at_most: int) -> int:
    assert response.status_code == 429, response.content
    assert response.json()["error"]["code"] == code
    retry_after = int(response["Retry-After"])
    assert 0 < retry_after <= at_most
    return retry_after


def test_a_user_over_the_chat_rate_gets_429_with_retry_after_and_no_run(alice, tiny_throttle):
    client = token_client(alice)
    statuses = [client.post("/api/chat", HELLO, format="json").status_code for _ in range(tiny_throttle)]
    assert statuses == [200] * tiny_throttle
    before = DiagnosisRun.objects.count()
    refused = client.post("/api/chat", HELLO, format="json")
    retry_after = assert_429_with_retry_after(refused, "throttled", at_most=60)
    assert DiagnosisRun.objects.count() == before
    print(f"\nthrottle: {tiny_throttle} accepted, then 429 with Retry-After {retry_after}s")


def test_the_throttle_is_per_user(alice, bob, tiny_throttle):
    alice_client, bob_client = token_client(alice), token_client(bob)
    for _ in range(tiny_throttle):
        alice_client.post("/api/chat", HELLO, format="json")
    assert_429_with_retry_after(alice_client.post("/api/chat", HELLO, format="json"), "throttled", at_most=60)
    accepted = bob_client.post("/api/chat", HELLO, format="json")
    assert accepted.status_code == 200
    assert DiagnosisRun.objects.get(run_id=accepted.json()["runId"]).session.owner == bob
    assert DiagnosisRun.objects.filter(session__owner=alice).count() == tiny_throttle


def test_alert_analysis_shares_the_chat_budget(alice, tiny_throttle):
    client = token_client(alice)
    for _ in range(tiny_throttle):
        assert client.post("/api/chat", HELLO, format="json").status_code == 200
    refused = client.post("/api/ai_ops", {"stream": False}, format="json")
    assert_429_with_retry_after(refused, "throttled", at_most=60)


def test_a_session_login_does_not_reset_a_token_users_budget(alice, tiny_throttle):
    from django.middleware.csrf import _get_new_csrf_string
    from rest_framework.test import APIClient

    token = token_client(alice)
    for _ in range(tiny_throttle):
        token.post("/api/chat", HELLO, format="json")
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)
    csrf = _get_new_csrf_string()
    browser.cookies["csrftoken"] = csrf
    refused = browser.post("/api/chat", HELLO, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert_429_with_retry_after(refused, "throttled", at_most=60)
    assert DiagnosisRun.objects.filter(session__owner=alice).count() == tiny_throttle


def test_reads_are_not_throttled_by_the_chat_budget(alice, tiny_throttle):
    client = token_client(alice)
    run_ids = [client.post("/api/chat", HELLO, format="json").json()["runId"] for _ in range(tiny_throttle)]
    for _ in range(3):
        for run_id in run_ids:
            response = client.get(f"/api/runs/{run_id}")
            assert response.status_code == 200 and response.json()["runId"] == run_id


# --------------------------------------------------------------------------- the concurrent-run cap


def active_runs(owner, n: int) -> list[DiagnosisRun]:
    """`n` runs of `owner` still in progress, alternately PENDING and RUNNING, in separate sessions."""
    from tests.traces.conftest import make_run

    statuses = (DiagnosisRun.Status.PENDING, DiagnosisRun.Status.RUNNING)
    return [make_run(owner=owner, status=statuses[i % 2], answer="") for i in range(n)]


def test_a_user_at_the_active_run_cap_gets_429_with_retry_after_and_no_run(alice, settings):
    settings.CHAT_MAX_ACTIVE_RUNS = 2
    active_runs(alice, 2)
    before = DiagnosisRun.objects.count()
    client = token_client(alice)
    for path, body in (("/api/chat", HELLO), ("/api/ai_ops", {"stream": False})):
        response = client.post(path, body, format="json")
        assert_429_with_retry_after(response, "too_many_active_runs", at_most=60)
        assert "at most 2 may run at once" in response.json()["error"]["message"]
    assert DiagnosisRun.objects.count() == before


def test_the_cap_is_per_user_and_frees_up_when_a_run_finishes(alice, bob, settings):
    settings.CHAT_MAX_ACTIVE_RUNS = 2
    running = active_runs(alice, 2)
    alice_client = token_client(alice)
    assert_429_with_retry_after(alice_client.post("/api/chat", HELLO, format="json"), "too_many_active_runs", at_most=60)
    assert token_client(bob).post("/api/chat", HELLO, format="json").status_code == 200
    assert DiagnosisRun.objects.filter(session__owner=bob).count() == 1
    DiagnosisRun.objects.filter(pk=running[0].pk).update(status=DiagnosisRun.Status.FAILED)
    accepted = alice_client.post("/api/chat", HELLO, format="json")
    assert accepted.status_code == 200
    assert DiagnosisRun.objects.get(run_id=accepted.json()["runId"]).session.owner == alice


def test_finished_runs_do_not_count_toward_the_cap(alice, settings):
    from tests.traces.conftest import make_run

    settings.CHAT_MAX_ACTIVE_RUNS = 1
    for status in (DiagnosisRun.Status.SUCCESS, DiagnosisRun.Status.FAILED) * 3:
        make_run(owner=alice, status=status)
    accepted = token_client(alice).post("/api/chat", HELLO, format="json")
    assert accepted.status_code == 200
    assert DiagnosisRun.objects.filter(session__owner=alice).count() == 7
    assert DiagnosisRun.objects.get(run_id=accepted.json()["runId"]).session.owner == alice


@pytest.mark.services
def test_parallel_submissions_never_exceed_the_cap(alice, settings):
    """Twelve requests at once against a cap of three: the cap is checked under a lock on the
    caller's row, so exactly three runs are created and the rest are refused (MySQL, real threads)."""
    from django.db import connections

    settings.CHAT_MAX_ACTIVE_RUNS = 3
    requests, barrier = 12, threading.Barrier(12)
    token_client(alice)  # the token row exists before the threads race
    statuses: list[int] = []
    lock = threading.Lock()

    def submit():
        try:
            client = token_client(alice)
            barrier.wait(timeout=10)
            status = client.post("/api/chat", {**HELLO, "wait": False}, format="json").status_code
            with lock:
                statuses.append(status)
        finally:
            connections.close_all()

    # Nothing consumes these runs, so every accepted one stays PENDING and counts toward the cap.
    with mock.patch("diagnosis.tasks.execute_run.delay"):
        threads = [threading.Thread(target=submit) for _ in range(requests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    accepted = DiagnosisRun.objects.filter(session__owner=alice).count()
    print(f"\ncap 3, {requests} parallel submissions: statuses {sorted(statuses)}, runs created {accepted}")
    assert sorted(statuses) == [202] * 3 + [429] * (requests - 3)
    assert accepted == 3


# --------------------------------------------------------------------------- the rate limit under concurrency


def test_simultaneous_posts_hold_the_rate_limit_exactly(monkeypatch):
    """20 requests of one user at the same instant, three rounds: exactly N pass each time. The counter
    is an atomic increment in the configured cache: Redis (INCR) in the services pass, the local-memory
    cache (incremented under its lock) in the embedded one."""
    from types import SimpleNamespace

    from django.conf import settings

    monkeypatch.setattr(ChatThrottle, "THROTTLE_RATES", {**ChatThrottle.THROTTLE_RATES, "chat": "5/min"})
    backend = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
    rounds = []
    for round_ in range(3):
        if time.time() % 60 > 58:  # never straddle two windows of the fixed-window counter
            time.sleep(61 - time.time() % 60)
        request = SimpleNamespace(user=SimpleNamespace(pk=f"concurrency-{round_}-{threading.get_native_id()}",
                                                       is_authenticated=True))
        start = threading.Barrier(20)
        allowed = []

        def post():
            throttle = ChatThrottle()
            start.wait()
            allowed.append(throttle.allow_request(request, None))

        threads = [threading.Thread(target=post) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        rounds.append(sum(allowed))
        assert len(allowed) == 20
    assert rounds == [5, 5, 5]
    print(f"\nrate limit 5/min, 20 simultaneous requests x 3 rounds on {backend}: {rounds} passed")
