"""Fencing, the queue deadline, the reaper lock and the active-run cap, on database rows (both passes).

The real-process versions (a frozen worker thawing after its reap, kills without beat) are in
test_leases.py."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from diagnosis.models import AgentStep, DiagnosisRun, MaintenanceLock, RunEvent, ToolInvocation
from diagnosis.services import wiring
from diagnosis.services.submission import run_submit
from diagnosis.services.health import health_check
from diagnosis.services.lifecycle import LeaseLost, run_claim, run_heartbeat
from diagnosis.services.observer import DbRunObserver, RunLease
from diagnosis.services.reaper import REAPER_LOCK, reaper_pass, run_reap, runs_requeue_lost
from diagnosis.services.execution import run_execute
from diagnosis.contracts import RunResult
from diagnosis.services.run_context import run_finish_succeeded

pytestmark = pytest.mark.django_db
S = DiagnosisRun.Status


def age(run, **fields_seconds) -> None:
    now = timezone.now()
    DiagnosisRun.objects.filter(pk=run.pk).update(**{f: now - timedelta(seconds=s) for f, s in fields_seconds.items()})


def rows(run) -> dict:
    return {
        "steps": list(AgentStep.objects.filter(run=run).order_by("pk").values_list("pk", "status", "finished_at")),
        "invocations": ToolInvocation.objects.filter(run=run).count(),
        "events": list(RunEvent.objects.filter(run=run).order_by("id").values_list("id", "kind", "data")),
        "run": DiagnosisRun.objects.filter(pk=run.pk).values("status", "error_code", "step_count", "answer").get(),
    }


def test_each_claim_draws_a_token_and_only_its_holder_may_renew(make_run):
    run = run_claim(run_id=make_run("q").run_id)
    assert len(run.claim_token) == 32
    assert run_heartbeat(run_id=run.run_id, token=run.claim_token) is True
    assert run_heartbeat(run_id=run.run_id, token="0" * 32) is False


def test_every_write_of_a_reaped_worker_is_refused(make_run, settings):
    """Each kind of write, buffered by a fresh observer of the reaped run, is refused at its commit
    point: the whole group is dropped and no row is written or changed."""
    run = run_claim(run_id=make_run("q").run_id)
    first = DbRunObserver(run, lease=RunLease(run.run_id, run.claim_token))
    step = first.step_start(node="planner", agent="planner", attempt=1, model_input=[], model_name="m")
    first("node", {"node": "planner"})
    first.commit()
    age(run, heartbeat_at=settings.RUN_LEASE_SECONDS + 1)
    assert run_reap(run_id=run.run_id) is not None
    before = rows(run)

    def finished(o):
        o.step_finish(step, status="COMPLETED", model_output={}, duration_ms=1, usage=None, has_tool_call=True,
                      error="", model_name="m")  # buffered until the next commit point
        o.commit()

    def invocation(o):
        o.record(tool_name="query_logs", arguments={}, status="SUCCESS", result={}, truncated=False,
                 error_message="", duration_ms=1, retrieval_details=None)
        assert [r.run_id for r in o.lookup([o._invocations[0].invocation_id])] == [run.run_id]  # from memory
        o.commit()

    def event(o):
        o("node", {"node": "executor"})
        o.commit()

    attempts = {
        "step_finish": finished,
        "step_start": lambda o: o.step_start(node="executor", agent="executor", attempt=1, model_input=[], model_name="m"),
        "invocation": invocation,
        "event": event,
        "heartbeat": lambda o: o.lease.fence(),
        "result": lambda o: run_finish_succeeded(run, o, result=RunResult(answer="late"), status_event={}),
    }
    for name, write in attempts.items():
        observer = DbRunObserver(run, lease=RunLease(run.run_id, run.claim_token))
        with pytest.raises(LeaseLost):
            write(observer)
        assert observer.lease.lost or name == "result"
        assert not observer._events and not observer._invocations and not observer._step_updates, name  # dropped
        with pytest.raises(LeaseLost):
            observer.node_end() if name != "result" else observer.lease.fence()  # and the run stops
    assert rows(run) == before  # 6 kinds of write, 0 rows written or changed
    assert before["run"]["status"] == S.FAILED and before["steps"][0][1] == "FAILED"


class ReapedDuring:
    """The offline model, except that during one role's call the worker's lease lapses and the reaper runs."""

    def __init__(self, model, role: str):
        self.model, self.role, self.reaped = model, role, None

    def __getattr__(self, name):
        return getattr(self.model, name)

    def complete(self, request):
        reply = self.model.complete(request)
        if request.role == self.role and self.reaped is None:
            run = DiagnosisRun.objects.get(status=S.RUNNING)
            age(run, heartbeat_at=3600)
            self.reaped = run_reap(run_id=run.run_id)
        return reply  # the call returns after the reap, as a slow model's would


@pytest.mark.parametrize("role", ["planner", "verifier", "composer"])
def test_a_worker_reaped_during_a_model_call_stops_and_writes_nothing_more(make_run, demo_knowledge, role):
    run = make_run("Why is payment-service failing?")
    real = wiring.chat_model
    model = ReapedDuring(real(), role)
    with mock.patch.object(wiring, "chat_model", lambda: model):
        after_reap = {}
        original = model.complete

        def complete(request):
            reply = original(request)
            if model.reaped is not None and not after_reap:
                after_reap.update(rows(run))
            return reply

        model.complete = complete
        result = run_execute(run_id=run.run_id)
    assert model.reaped is not None
    assert result.status == S.FAILED and result.error_code == "worker_lost"
    assert rows(run) == after_reap  # nothing after the reap: no step closed, no event, no result
    final = rows(run)
    assert final["run"]["step_count"] == len(final["steps"])
    assert final["events"][-1][1] == "status" and final["events"][-1][2]["errorCode"] == "worker_lost"
    assert [s for s in final["steps"] if s[1] == "RUNNING"] == []


def test_a_pending_run_past_the_queue_deadline_is_requeued_once_then_failed_queue_lost(make_run, settings, demo_knowledge):
    settings.RUN_QUEUE_DEADLINE_SECONDS = 60
    lost = make_run("Why is payment-service failing?")
    fresh = make_run("q")
    age(lost, created_at=61)
    with mock.patch("diagnosis.tasks.execute_run.delay") as delay:  # the broker accepts it, nobody consumes it
        first = runs_requeue_lost()
        assert first == {"requeued": [lost.run_id], "failed": []} and delay.call_count == 1
        assert runs_requeue_lost() == {"requeued": [], "failed": []}  # once only, and not before the deadline
        age(lost, requeued_at=61)
        second = runs_requeue_lost()
    assert second == {"requeued": [], "failed": [lost.run_id]} and delay.call_count == 1
    lost.refresh_from_db()
    fresh.refresh_from_db()
    assert (lost.status, lost.error_code) == (S.FAILED, "queue_lost") and fresh.status == S.PENDING
    assert RunEvent.objects.filter(run=lost, kind="status", data__errorCode="queue_lost").count() == 1


def test_a_requeued_run_is_executed_when_a_worker_takes_it(make_run, settings, demo_knowledge, eager_tasks):
    settings.RUN_QUEUE_DEADLINE_SECONDS = 60
    run = make_run("Why is payment-service failing?")
    age(run, created_at=61)
    assert runs_requeue_lost()["requeued"] == [run.run_id]  # eager here: executed at once
    run.refresh_from_db()
    assert run.status == S.SUCCESS and run.requeued_at is not None


def test_one_reaper_pass_at_a_time_and_health_reports_the_last(make_run, settings):
    # In the services pass a live worker may have reaped (and left its lock row) before this test:
    # start from no pass at all. The test's own transaction keeps that worker out until it ends.
    MaintenanceLock.objects.filter(name=REAPER_LOCK).delete()
    assert health_check()["lastReapAt"] is None
    MaintenanceLock.objects.create(name=REAPER_LOCK, holder="other", locked_until=timezone.now() + timedelta(seconds=60))
    stale = make_run("q", status=S.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=settings.RUN_LEASE_SECONDS + 1))
    assert reaper_pass(holder="me") is None  # the other holder's pass is running
    stale.refresh_from_db()
    assert stale.status == S.RUNNING
    MaintenanceLock.objects.filter(name=REAPER_LOCK).update(locked_until=timezone.now() - timedelta(seconds=1))  # it died
    result = reaper_pass(holder="me")
    assert result["reaped"] == [stale.run_id]
    lock = MaintenanceLock.objects.get(name=REAPER_LOCK)
    assert lock.locked_until is None and lock.last_result["holder"] == "me"
    assert health_check()["lastReapAt"] == lock.last_run_at.isoformat()


def test_lost_requeued_and_lapsed_runs_do_not_count_against_the_active_run_cap(make_run, alice, settings):
    settings.CHAT_MAX_ACTIVE_RUNS = 2
    now = timezone.now()
    old = now - timedelta(seconds=settings.RUN_LEASE_SECONDS + 1)
    make_run("lapsed", owner=alice, status=S.RUNNING, heartbeat_at=old)
    make_run("requeued", owner=alice, requeued_at=now)
    past = make_run("past the queue deadline", owner=alice)
    age(past, created_at=settings.RUN_QUEUE_DEADLINE_SECONDS + 1)
    make_run("live", owner=alice, status=S.RUNNING, heartbeat_at=now)
    with mock.patch("diagnosis.tasks.execute_run.delay"):
        assert run_submit(user=alice, question="one more").created  # 1 live + this one = the cap of 2
        with pytest.raises(Exception, match="at most 2 may run at once"):
            run_submit(user=alice, question="and another")


def _ended_and_left(make_run, settings, left: str) -> tuple[DbRunObserver, int]:
    """A worker's observer with its first step ended (buffered) and a node event, after its run left it:
    reaped, or claimed again under another token."""
    run = run_claim(run_id=make_run("q").run_id)
    observer = DbRunObserver(run, lease=RunLease(run.run_id, run.claim_token))
    first = observer.step_start(node="planner", agent="planner", attempt=1, model_input=[], model_name="m")
    observer.step_finish(first, status="COMPLETED", model_output={"plan": 1}, duration_ms=1, usage=None,
                         has_tool_call=False, error="", model_name="m")
    observer("node", {"node": "planner"})
    if left == "reaped":
        age(run, heartbeat_at=settings.RUN_LEASE_SECONDS + 1)
        assert run_reap(run_id=run.run_id) is not None
    else:
        DiagnosisRun.objects.filter(pk=run.pk).update(claim_token="0" * 32)
    return observer, first


@pytest.mark.parametrize("returns_ids", [True, False], ids=["upsert", "insert-then-update"])
@pytest.mark.parametrize("left", ["reaped", "claimed-again"])
def test_a_step_group_after_the_run_left_its_worker_writes_nothing_and_stops_it(make_run, settings, left, returns_ids):
    """The group before a model call is fenced by its step's INSERT (no heartbeat UPDATE): once the run is
    not RUNNING under the worker's token, neither the new step nor the ended step's end nor the event is
    written, and LeaseLost stops the worker."""
    from django.db import connection

    from tests.reliability.test_write_groups import counted

    observer, first = _ended_and_left(make_run, settings, left)
    run = observer.run
    before = rows(run)
    features = connection.features
    with mock.patch.object(type(features), "can_return_rows_from_bulk_insert",
                           new=returns_ids and features.can_return_rows_from_bulk_insert), counted() as seen:
        with pytest.raises(LeaseLost) as lost:
            observer.step_start(node="executor", agent="executor", attempt=1, model_input=["p"], model_name="m")
    assert lost.value.current == (S.FAILED if left == "reaped" else S.RUNNING)
    assert rows(run) == before  # no new step, the ended one not closed by this worker, no event
    assert before["steps"][0][1] == ("FAILED" if left == "reaped" else "RUNNING")
    assert observer.lease.lost and not observer._events and not observer._step_updates
    sqls = [sql for sql in seen["sql"] if not sql.startswith(("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK"))]
    assert sqls[0].startswith("INSERT INTO") and "agent_step" in sqls[0] and "claim_token" in sqls[0], sqls
    assert not any(sql.startswith("UPDATE") for sql in sqls), sqls  # no separate fence, nothing else tried
    with pytest.raises(LeaseLost):
        observer.node_end()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_step_group_waits_for_a_reap_holding_the_run_and_then_writes_nothing(make_run, settings):
    """MySQL: the step's INSERT locks the run row (FOR UPDATE), so while the reaper holds it, the run
    already FAILED but not committed, the group waits; then it reads FAILED and writes nothing. (Read
    without the lock, READ COMMITTED gives the last committed row, RUNNING, and the step is written
    after the reap.)"""
    import threading
    import time

    from django.db import connection, transaction

    run = run_claim(run_id=make_run("q").run_id)
    observer = DbRunObserver(run, lease=RunLease(run.run_id, run.claim_token))
    first = observer.step_start(node="planner", agent="planner", attempt=1, model_input=[], model_name="m")
    observer.step_finish(first, status="COMPLETED", model_output={}, duration_ms=1, usage=None,
                         has_tool_call=False, error="", model_name="m")
    locked, done = threading.Event(), threading.Event()

    def reaper():
        try:
            with transaction.atomic():
                DiagnosisRun.objects.select_for_update().get(pk=run.pk)
                DiagnosisRun.objects.filter(pk=run.pk).update(status=S.FAILED, error_code="worker_lost")
                locked.set()
                done.wait(1.0)  # the group must not get past the lock meanwhile
        finally:
            connection.close()

    thread = threading.Thread(target=reaper)
    thread.start()
    assert locked.wait(10)
    started = time.monotonic()
    with pytest.raises(LeaseLost) as lost:
        observer.step_start(node="executor", agent="executor", attempt=1, model_input=[], model_name="m")
    waited = time.monotonic() - started
    thread.join(10)
    assert lost.value.current == S.FAILED and waited >= 0.8, waited
    assert list(AgentStep.objects.filter(run=run).values_list("step_index", "status")) == [(0, "RUNNING")]
