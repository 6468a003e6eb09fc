"""Real processes: a Celery worker SIGKILLed in the middle of a run, a new worker, the beat reaper,
and the same task message delivered twice at once. MySQL and Redis (the services pass).

The run is held in the verifier by a scripted model that stalls; the whole worker process group is
killed, so no Celery handler runs and the message stays unacknowledged in Redis until the
visibility timeout hands it out again (crash_worker_settings: 30 s, swept every second)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from django.conf import settings

from diagnosis.models import AgentStep, DiagnosisRun, RunEvent
from diagnosis.tasks import execute_run
from tests.factories import ChatSessionFactory, DiagnosisRunFactory
from tests.reliability.crash_worker_settings import MAINTENANCE_QUEUE, RUNS_QUEUE
from tests.reliability.scripted import PLAN, script_happy, worker_model_env
from tests.support.fake_openai import Reply
from tests.support.worker import ROOT, celery_worker, worker_env

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

LEASE = 10
VISIBILITY = 30  # crash_worker_settings.CELERY_BROKER_VISIBILITY_TIMEOUT
S = DiagnosisRun.Status


QUEUES = f"{RUNS_QUEUE},{MAINTENANCE_QUEUE}"


def crash_env(fake, **extra) -> dict:
    return worker_model_env(fake, DJANGO_SETTINGS_MODULE="tests.reliability.crash_worker_settings",
                            RUN_LEASE_SECONDS=str(LEASE), LLM_CONNECT_TIMEOUT="1", LLM_READ_TIMEOUT="8",
                            LLM_MAX_RETRIES="0", **extra)  # one call's worst case, 9 s, fits the lease


@contextmanager
def beat(env: dict, tmp_path: Path):
    """`celery beat` with the product schedule: reap_stale_runs every RUN_LEASE_SECONDS/2."""
    log = open(tmp_path / "beat.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO", "-s", str(tmp_path / "beat-schedule"),
         "--pidfile="], cwd=ROOT, env=worker_env(**env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
        log.close()


def wait_for(predicate, seconds: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {seconds}s waiting for {what}"
        time.sleep(interval)


def kill_worker(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the main process and its pool children: no handler runs
    proc.wait(timeout=10)


def enqueue(run: DiagnosisRun) -> str:
    return execute_run.apply_async(args=[run.run_id], queue=RUNS_QUEUE).id


def unacked() -> set[str]:
    """Task ids of the messages delivered but not acknowledged (other suites' workers may share the database)."""
    values = redis.Redis.from_url(settings.REDIS_URL).hvals("unacked")
    return {json.loads(value)[0].get("headers", {}).get("id") for value in values}


def log_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def steps_of(run: DiagnosisRun) -> list[tuple]:
    return list(AgentStep.objects.filter(run=run).order_by("step_index").values_list("step_index", "node", "attempt"))


def assert_one_execution(run: DiagnosisRun) -> list[tuple]:
    steps = steps_of(run)
    indexes = [s[0] for s in steps]
    assert indexes == list(range(len(steps))), f"step indexes duplicated or missing: {indexes}"
    per_node_attempt = Counter((s[1], s[2]) for s in steps if s[1] != "executor")
    assert all(n == 1 for n in per_node_attempt.values()), per_node_attempt  # e.g. never two planner attempt-1 steps
    claims = RunEvent.objects.filter(run=run, kind="status", data__status=S.RUNNING).count()
    assert claims == 1, f"the run was claimed {claims} times"
    return steps


def new_run(question: str = "Why is payment-service failing?") -> DiagnosisRun:
    return DiagnosisRunFactory(session=ChatSessionFactory(), question=question)


def hold_in_verifier(fake) -> None:
    script_happy(fake, verifier=Reply.stall(90))


def start_and_kill_mid_run(fake, tmp_path) -> tuple[DiagnosisRun, str, list[tuple]]:
    """Worker A takes the run, stalls in the verifier, and is SIGKILLed there."""
    run = new_run()
    with celery_worker(name="crash-a", queues=QUEUES, extra_env=crash_env(fake), log_path=tmp_path / "worker-a.log") as worker_a:
        task_id = enqueue(run)
        wait_for(lambda: AgentStep.objects.filter(run=run, node="verifier").exists(), 60, "the run to reach the verifier")
        time.sleep(0.5)
        kill_worker(worker_a)
    killed_at = time.monotonic()
    run.refresh_from_db()
    assert run.status == S.RUNNING and task_id in unacked()  # the message is held, unacknowledged, by nobody
    steps = steps_of(run)
    assert steps[-1][1] == "verifier"
    run.killed_at = killed_at
    return run, task_id, steps


def test_a_worker_killed_mid_run_is_reaped_by_beat_and_the_redelivered_message_does_not_run_it_again(fake_openai, tmp_path):
    hold_in_verifier(fake_openai)
    run, task_id, steps_at_kill = start_and_kill_mid_run(fake_openai, tmp_path)
    env = crash_env(fake_openai)

    with celery_worker(name="crash-b", queues=QUEUES, extra_env=env, log_path=tmp_path / "worker-b.log"), beat(env, tmp_path):
        failed = wait_for(lambda: DiagnosisRun.objects.filter(pk=run.pk, status=S.FAILED).first(), LEASE + 30, "the reaper")
        reaped_after = time.monotonic() - run.killed_at
        # the unacknowledged message comes back once the visibility timeout has passed
        redelivered = wait_for(lambda: re.search(rf"execute_run\[{task_id}\] succeeded in [\d.]+s: '(\w+)'",
                                                  log_text(tmp_path / "worker-b.log")), VISIBILITY + 30, "the redelivery")
        redelivered_after = time.monotonic() - run.killed_at
        assert task_id not in unacked()

    assert redelivered[1] == S.FAILED  # it found the run finished and did nothing
    run.refresh_from_db()
    assert (run.status, run.error_code) == (S.FAILED, "worker_lost")
    assert "reap_stale_runs" in log_text(tmp_path / "worker-b.log")  # beat -> maintenance queue -> reaper
    steps = assert_one_execution(run)
    assert steps == steps_at_kill and run.step_count == len(steps)  # partial steps kept, none added by the redelivery
    assert AgentStep.objects.get(run=run, node="verifier").status == "FAILED"
    assert run.orchestration_trace["termination_reason"] == "verifier_interrupted"
    assert len(fake_openai.requests_for("planner")) == 1  # the redelivered message never reached the model
    print(f"\ncrash + beat reaper: 1 run, worker SIGKILLed in the verifier, reaped FAILED worker_lost "
          f"{reaped_after:.1f}s after the kill (lease {LEASE}s, beat every {LEASE / 2:g}s), message redelivered "
          f"{redelivered_after:.1f}s after the kill (visibility {VISIBILITY}s) and ignored; {len(steps)} steps kept, "
          f"0 duplicated, 0 left RUNNING")


def test_a_redelivered_message_finds_its_run_stale_and_records_worker_lost(fake_openai, tmp_path):
    hold_in_verifier(fake_openai)
    run, task_id, steps_at_kill = start_and_kill_mid_run(fake_openai, tmp_path)

    with celery_worker(name="crash-c", queues=QUEUES, extra_env=crash_env(fake_openai), log_path=tmp_path / "worker-c.log"):
        redelivered = wait_for(lambda: re.search(rf"execute_run\[{task_id}\] succeeded in [\d.]+s: '(\w+)'",
                                                  log_text(tmp_path / "worker-c.log")), VISIBILITY + 30, "the redelivery")
        redelivered_after = time.monotonic() - run.killed_at

    run.refresh_from_db()
    assert redelivered[1] == S.FAILED and (run.status, run.error_code) == (S.FAILED, "worker_lost")
    steps = assert_one_execution(run)
    assert steps == steps_at_kill
    assert run.orchestration_trace["termination_reason"] == "verifier_interrupted"
    assert len(fake_openai.requests_for("planner")) == 1
    print(f"\ncrash + redelivery (no beat): message redelivered {redelivered_after:.1f}s after the kill, heartbeat older "
          f"than the {LEASE}s lease -> FAILED worker_lost (by the new worker's reaper timer, or the redelivered task); {len(steps)} steps kept, 0 duplicated")


def test_the_same_message_delivered_twice_at_once_executes_the_run_once(fake_openai, tmp_path):
    script_happy(fake_openai, planner=Reply.stall(3, then=Reply.json(PLAN)))
    run = new_run()
    log = tmp_path / "worker-dup.log"
    env = worker_model_env(fake_openai, LLM_READ_TIMEOUT="30", DJANGO_SETTINGS_MODULE="tests.reliability.crash_worker_settings")
    with celery_worker(name="dup", concurrency=2, queues=QUEUES, extra_env=env, log_path=log):
        ids = [enqueue(run), enqueue(run)]
        wait_for(lambda: DiagnosisRun.objects.filter(pk=run.pk, status__in=DiagnosisRun.TERMINAL).exists(), 60, "the run to finish")
        results = wait_for(lambda: len(found := re.findall(r"execute_run\[([\w-]+)\] succeeded in [\d.]+s: '?(\w+)'?", log_text(log))) == 2 and found,
                           30, "both deliveries")

    run.refresh_from_db()
    assert run.status == S.SUCCESS and run.celery_task_id in ids
    assert sorted(t for t, _ in results) == sorted(ids)
    outcomes = dict(results)
    # the other delivery saw the live claim (or lost the claim race) and waited for the run to end
    assert outcomes[run.celery_task_id] == S.SUCCESS and outcomes[next(i for i in ids if i != run.celery_task_id)] == S.SUCCESS
    steps = assert_one_execution(run)
    assert len(fake_openai.requests_for("planner")) == 1
    other = outcomes[next(i for i in ids if i != run.celery_task_id)]
    print(f"\nduplicate delivery (2 worker processes, at once): 2 deliveries, 1 execution, {len(steps)} steps, "
          f"0 duplicated; the other delivery waited for the run and returned {other} without executing")


def test_a_pool_process_killed_mid_run_is_requeued_at_once_never_run_twice_and_then_reaped(fake_openai, tmp_path):
    """Only the pool child dies (OOM killer, hard time limit): the surviving main process rejects the
    message back to the queue at once (reject_on_worker_lost); the lease is still live, so the
    redelivery must not start the run again: it waits for the lease and is acknowledged only once the
    run has ended (reaped by the delivery itself or by the worker's reaper timer)."""
    hold_in_verifier(fake_openai)
    run = new_run()
    log = tmp_path / "worker-child.log"
    with celery_worker(name="child", queues=QUEUES, extra_env=crash_env(fake_openai), log_path=log) as worker:
        task_id = enqueue(run)
        wait_for(lambda: AgentStep.objects.filter(run=run, node="verifier").exists(), 60, "the run to reach the verifier")
        steps_at_kill = steps_of(run)
        child = int(subprocess.check_output(["pgrep", "-P", str(worker.pid)]).split()[0])
        os.kill(child, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_for(lambda: "WorkerLostError" in log_text(log), 30, "the worker to notice")
        run.refresh_from_db()
        assert run.status == S.RUNNING and steps_of(run) == steps_at_kill  # requeued, not run again
        redelivered = wait_for(lambda: re.search(rf"execute_run\[{task_id}\] succeeded in [\d.]+s: '(\w+)'", log_text(log)),
                               LEASE + 30, "the requeued message")
        ended_after = time.monotonic() - killed_at
        assert redelivered[1] == S.FAILED and task_id not in unacked()

    run.refresh_from_db()
    assert (run.status, run.error_code) == (S.FAILED, "worker_lost")
    steps = assert_one_execution(run)
    assert steps == steps_at_kill and len(fake_openai.requests_for("planner")) == 1
    print(f"\ncrash of a pool process only: message requeued at once, the redelivery waited for the {LEASE}s lease "
          f"and was acknowledged {ended_after:.1f}s after the kill with the run FAILED worker_lost; "
          f"{len(steps)} steps kept, 0 duplicated")
