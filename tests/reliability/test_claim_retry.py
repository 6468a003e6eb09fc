"""A run queued while the database is down is not lost: execute_run fails before its claim, retries with
backoff (Celery autoretry, acks_late) and executes once the database is back. Everything runs on a MariaDB
instance of the test's own, SIGKILLed for 35 s and restarted; Redis is the session's."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from diagnosis.tasks import execute_run
from tests.reliability.crash_worker_settings import RUNS_QUEUE
from tests.reliability.scripted import script_happy
from tests.reliability.test_database_outage import manage, own_mariadb, process_env, wait_for
from tests.reliability.test_leases import QUEUES, lease_env
from tests.support.worker import celery_worker

pytestmark = [pytest.mark.services, pytest.mark.slow]

OUTAGE_SECONDS = 35
OWN_PORT = 3420  # this suite's own MariaDB port


def query(db, statement: str) -> str:
    return subprocess.run(["mysql", "-uroot", "-h127.0.0.1", f"-P{db.port}", "-N", "-B", "aiops_outage", "-e", statement],
                          check=True, capture_output=True, text=True, timeout=30).stdout.strip()


def pending_run(env: dict) -> str:
    """A PENDING run in a new session, written without enqueueing it."""
    out = manage(env, "shell", "-c", (
        "from django.contrib.auth.models import User; from diagnosis.models import ChatSession, DiagnosisRun; "
        "u = User.objects.create_user('queued', password='x-queued-pass-1'); "
        "s = ChatSession.objects.create(owner=u, session_id='queued-session'); "
        "r = DiagnosisRun.objects.create(session=s, question='Why is payment-service failing?'); print(r.run_id)"))
    return out.strip().splitlines()[-1]


def test_a_run_queued_during_a_35s_database_outage_ends_success_once_the_database_is_back(fake_openai, tmp_path):
    script_happy(fake_openai)
    with own_mariadb(tmp_path, port=OWN_PORT) as db:
        # The reaper would publish a PENDING run again after its queue deadline: far beyond this test, so
        # only the task's own retries can save the message.
        extra = lease_env(fake_openai, DATABASE_URL=db.url, RUN_QUEUE_DEADLINE_SECONDS="600",
                          RUN_CLAIM_RETRY_BACKOFF_MAX_SECONDS="8")
        env = process_env(extra)
        manage(env, "migrate", "--noinput")
        run_id = pending_run(env)
        log_path = tmp_path / "worker.log"
        with celery_worker(name="claim-retry", queues=QUEUES, extra_env=extra, log_path=log_path):
            db.kill()
            down = time.monotonic()
            task_id = execute_run.apply_async(args=[run_id], kwargs={"queued_at": time.time()}, queue=RUNS_QUEUE).id
            wait_for(lambda: "not claimed" in log_path.read_text(), 30, "the worker to meet the outage")
            time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down)))
            db.start()
            wait_for(lambda: query(db, f"SELECT status FROM diagnosis_run WHERE run_id='{run_id}'")
                     in ("SUCCESS", "FAILED"), 90, "the run to end")
            up_after = time.monotonic() - down
            status, celery_task_id = query(
                db, f"SELECT status, celery_task_id FROM diagnosis_run WHERE run_id='{run_id}'").split("\t")
            requeued = query(db, f"SELECT requeued_at IS NOT NULL FROM diagnosis_run WHERE run_id='{run_id}'")
            executions = query(db, f"SELECT COUNT(*) FROM run_event e JOIN diagnosis_run r ON e.run_id = r.id "
                                   f"WHERE r.run_id='{run_id}' AND e.kind='status' AND e.data LIKE '%RUNNING%'")
            log = log_path.read_text()

    assert status == "SUCCESS"
    assert celery_task_id == task_id  # executed by a retry of the message that met the outage, not a republished one
    assert requeued == "0" and executions == "1"
    retries = re.findall(r"not claimed: (\w+): .*; retry (\d+) with backoff", log)
    assert retries and {cause for cause, _ in retries} <= {"OperationalError", "InterfaceError"}, retries
    print(f"\ndatabase down {OUTAGE_SECONDS}s with a run queued: {len(retries)} failed claims, retried with backoff; "
          f"the run ended SUCCESS {up_after:.0f}s after the outage began")
