"""Leases, fencing and the reaper with real worker processes (MySQL + Redis, no beat).

Every worker here runs with a 10 s lease, a 9 s worst model call (1 s connect + 8 s read, no retry)
and its own reaper timer every 2 s. Nothing else reaps: no beat runs, and the test never calls the
reaper itself."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from contextlib import contextmanager

import pytest
import redis

from diagnosis.models import AgentStep, DiagnosisRun, MaintenanceLock, RunEvent, ToolInvocation
from tests.reliability.crash_worker_settings import MAINTENANCE_QUEUE, RUNS_QUEUE
from tests.reliability.scripted import PLAN, script_happy, worker_model_env
from tests.reliability.test_crash_worker import assert_one_execution, enqueue, kill_worker, log_text, new_run, steps_of, wait_for
from tests.support.fake_openai import Reply
from tests.support.worker import celery_worker

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LEASE, REAPER_EVERY = 10, 2
QUEUES = f"{RUNS_QUEUE},{MAINTENANCE_QUEUE}"
S = DiagnosisRun.Status


def lease_env(fake, **extra) -> dict:
    return worker_model_env(fake, DJANGO_SETTINGS_MODULE="tests.reliability.lease_worker_settings",
                            RUN_LEASE_SECONDS=str(LEASE), RUN_REAPER_INTERVAL_SECONDS=str(REAPER_EVERY),
                            LLM_CONNECT_TIMEOUT="1", LLM_READ_TIMEOUT="8", LLM_MAX_RETRIES="0", **extra)


def pool_child(worker: subprocess.Popen) -> int:
    return int(subprocess.check_output(["pgrep", "-P", str(worker.pid)]).split()[0])


def reaper_passes_since(moment) -> bool:
    last = MaintenanceLock.objects.filter(name="reaper").values_list("last_run_at", flat=True).first()
    return bool(last and last > moment)


def test_a_model_call_three_leases_long_completes_success_and_the_reaper_leaves_it_alone(fake_openai, tmp_path):
    from django.utils import timezone

    script_happy(fake_openai, planner=Reply.trickle(3 * LEASE, then=Reply.json(PLAN)))
    run = new_run()
    started = timezone.now()
    beats = []
    with celery_worker(name="lease-long", queues=QUEUES, extra_env=lease_env(fake_openai), log_path=tmp_path / "w.log"):
        enqueue(run)
        wait_for(lambda: AgentStep.objects.filter(run=run, node="planner").exists(), 60, "the planner call")
        t0 = time.monotonic()
        while not DiagnosisRun.objects.filter(pk=run.pk, status__in=DiagnosisRun.TERMINAL).exists():
            assert time.monotonic() - t0 < 3 * LEASE + 60, "the run did not finish"
            beats.append(DiagnosisRun.objects.filter(pk=run.pk).values_list("heartbeat_at", flat=True).first())
            time.sleep(1)
        call_seconds = time.monotonic() - t0
    run.refresh_from_db()
    assert (run.status, run.error_code) == (S.SUCCESS, ""), run.error_message
    assert reaper_passes_since(started)  # the reaper ran all along, and left the live run alone
    assert not RunEvent.objects.filter(run=run, kind="status", data__errorCode="worker_lost").exists()
    renewals = len(set(beats))
    assert renewals >= 3  # renewed while the call was in flight (its lease would have lapsed twice over otherwise)
    assert_one_execution(run)
    assert run.step_count == AgentStep.objects.filter(run=run).count()
    print(f"\nmodel call of {3 * LEASE}s under a {LEASE}s lease: SUCCESS after {call_seconds:.1f}s, "
          f"{renewals} distinct heartbeats seen, reaper every {REAPER_EVERY}s never touched it")


def test_a_fenced_worker_writes_nothing_after_the_reap(fake_openai, tmp_path):
    """The pool process is frozen (SIGSTOP: a GC pause, a swapped-out VM) in the verifier's call, so its
    lease lapses and the reaper, in the worker's main process, fails the run. Then it thaws, its call
    returns, and every write it tries is refused."""
    script_happy(fake_openai, verifier=Reply.trickle(LEASE + 12, then=Reply.json({"verdict": "PASS", "score": 0.9,
                                                                                   "claim_checks": [], "critical_evidence_gaps": []})))
    run = new_run()
    log = tmp_path / "fenced.log"
    with celery_worker(name="fenced", queues=QUEUES, extra_env=lease_env(fake_openai), log_path=log) as worker:
        task_id = enqueue(run)
        wait_for(lambda: AgentStep.objects.filter(run=run, node="verifier").exists(), 60, "the verifier call")
        child = pool_child(worker)
        os.kill(child, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            wait_for(lambda: DiagnosisRun.objects.filter(pk=run.pk, status=S.FAILED).exists(), LEASE + 3 * REAPER_EVERY + 10,
                     "the reaper")
            reaped_after = time.monotonic() - stopped
            snapshot = {
                "steps": list(AgentStep.objects.filter(run=run).order_by("pk").values_list("pk", "status", "finished_at")),
                "invocations": ToolInvocation.objects.filter(run=run).count(),
                "events": list(RunEvent.objects.filter(run=run).order_by("id").values_list("id", "kind")),
                "run": DiagnosisRun.objects.filter(pk=run.pk).values("status", "error_code", "step_count", "tool_count",
                                                                     "finished_at", "answer").get(),
            }
        finally:
            os.kill(child, signal.SIGCONT)
        done = wait_for(lambda: re.search(rf"execute_run\[{task_id}\] succeeded in [\d.]+s: '?(\w+)'?", log_text(log)),
                        LEASE + 40, "the thawed worker to stop")
    assert done[1] == S.FAILED and "no longer RUNNING under this worker's claim" in log_text(log)
    after = {
        "steps": list(AgentStep.objects.filter(run=run).order_by("pk").values_list("pk", "status", "finished_at")),
        "invocations": ToolInvocation.objects.filter(run=run).count(),
        "events": list(RunEvent.objects.filter(run=run).order_by("id").values_list("id", "kind")),
        "run": DiagnosisRun.objects.filter(pk=run.pk).values("status", "error_code", "step_count", "tool_count",
                                                             "finished_at", "answer").get(),
    }
    assert after == snapshot  # not one row written or changed by the fenced worker
    assert after["run"]["status"] == S.FAILED and after["run"]["error_code"] == "worker_lost"
    assert after["run"]["step_count"] == len(after["steps"]) and after["run"]["tool_count"] == after["invocations"]
    assert after["events"][-1][1] == "status"  # nothing after the terminal status
    assert AgentStep.objects.get(run=run, node="verifier").status == "FAILED"  # the reaper's verdict stands
    assert not fake_openai.requests_for("composer")  # the thawed worker never went on to the next node
    print(f"\nfenced worker: pool process frozen {reaped_after:.1f}s in the verifier, reaped FAILED worker_lost by the "
          f"worker's own reaper timer (lease {LEASE}s, every {REAPER_EVERY}s); thawed, its call returned and it wrote "
          f"0 rows: {len(after['steps'])} steps, {after['invocations']} invocations, {len(after['events'])} events unchanged, "
          f"0 composer requests")


def test_a_killed_pool_process_without_beat_ends_failed_within_lease_and_reaper_period(fake_openai, tmp_path):
    script_happy(fake_openai, verifier=Reply.trickle(60))
    run = new_run()
    log = tmp_path / "child.log"
    with celery_worker(name="child-nobeat", queues=QUEUES, extra_env=lease_env(fake_openai), log_path=log) as worker:
        enqueue(run)
        wait_for(lambda: AgentStep.objects.filter(run=run, node="verifier").exists(), 60, "the verifier call")
        steps_at_kill = steps_of(run)
        os.kill(pool_child(worker), signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: DiagnosisRun.objects.filter(pk=run.pk, status=S.FAILED).exists(),
                 LEASE + REAPER_EVERY + 15, "the run to end")
        ended_after = time.monotonic() - killed
    run.refresh_from_db()
    assert run.error_code == "worker_lost"
    assert steps_of(run) == steps_at_kill and assert_one_execution(run)
    assert ended_after <= LEASE + REAPER_EVERY + 15
    print(f"\npool process SIGKILLed, no beat: FAILED worker_lost {ended_after:.1f}s after the kill "
          f"(lease {LEASE}s + reaper every {REAPER_EVERY}s); {len(steps_at_kill)} steps kept, 0 duplicated")


def test_a_killed_worker_without_beat_ends_failed_within_lease_and_reaper_period(fake_openai, tmp_path):
    """The whole worker dies; another worker (consuming nothing but maintenance) reaps it on its own timer."""
    script_happy(fake_openai, verifier=Reply.trickle(60))
    run = new_run()
    with celery_worker(name="bystander", queues=MAINTENANCE_QUEUE, extra_env=lease_env(fake_openai),
                       log_path=tmp_path / "bystander.log"):
        with celery_worker(name="victim", queues=QUEUES, extra_env=lease_env(fake_openai), log_path=tmp_path / "v.log") as victim:
            enqueue(run)
            wait_for(lambda: AgentStep.objects.filter(run=run, node="verifier").exists(), 60, "the verifier call")
            steps_at_kill = steps_of(run)
            kill_worker(victim)
        killed = time.monotonic()
        wait_for(lambda: DiagnosisRun.objects.filter(pk=run.pk, status=S.FAILED).exists(),
                 LEASE + REAPER_EVERY + 15, "the run to end")
        ended_after = time.monotonic() - killed
    run.refresh_from_db()
    assert run.error_code == "worker_lost" and steps_of(run) == steps_at_kill
    assert run.orchestration_trace["termination_reason"] == "verifier_interrupted"
    print(f"\nwhole worker SIGKILLed, no beat: FAILED worker_lost {ended_after:.1f}s after the kill by the other "
          f"worker's reaper timer (lease {LEASE}s, every {REAPER_EVERY}s); {len(steps_at_kill)} steps kept")


@contextmanager
def own_redis(port: int, tmp_path):
    """A redis-server of this test's own on `port`, without persistence: a restart starts it empty."""
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    try:
        wait_for(lambda: _pings(client), 20, "redis-server to start")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _pings(client) -> bool:
    try:
        return client.ping()
    except redis.ConnectionError:
        return False


def test_the_broker_restarts_empty_with_queued_runs_and_every_run_ends(fake_openai, tmp_path):
    from diagnosis.tasks import execute_run
    from tests.reliability.conftest import broker_at, closed_port

    script_happy(fake_openai)
    port = closed_port()
    url = f"redis://127.0.0.1:{port}/0"
    runs = [new_run() for _ in range(4)]
    with own_redis(port, tmp_path):
        with broker_at(url):
            for run in runs:
                execute_run.apply_async(args=[run.run_id], queue=RUNS_QUEUE)
        assert redis.Redis(port=port).llen(RUNS_QUEUE) == 4  # queued; no worker has taken them yet
    restarted = time.monotonic()
    with own_redis(port, tmp_path):  # the same broker back, empty: the 4 messages are gone
        assert redis.Redis(port=port).llen(RUNS_QUEUE) == 0
        env = lease_env(fake_openai, REDIS_URL=url, RUN_QUEUE_DEADLINE_SECONDS="10")
        with celery_worker(name="broker-restart", queues=QUEUES, extra_env=env, log_path=tmp_path / "w.log"):
            wait_for(lambda: DiagnosisRun.objects.filter(pk__in=[r.pk for r in runs], status__in=DiagnosisRun.TERMINAL).count() == 4,
                     10 + 2 * REAPER_EVERY + 90, "every run to end")
            ended_after = time.monotonic() - restarted
    final = list(DiagnosisRun.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", "requeued_at"))
    assert [status for status, _ in final] == [S.SUCCESS] * 4
    assert all(requeued is not None for _, requeued in final)  # each published again once by the reaper
    for run in runs:
        assert_one_execution(run)
    print(f"\nbroker restarted empty with 4 runs queued: all 4 re-queued after the 10s queue deadline by the worker's "
          f"reaper timer and ended SUCCESS {ended_after:.1f}s after the restart; 0 left PENDING, 0 executed twice")
