"""The reaper and redelivery rules, on database rows: a run whose worker died is recorded FAILED
(worker_lost) with its partial steps and trace; live, finished and queued runs are never touched;
the same task message delivered twice executes the run once."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command
from django.utils import timezone

from diagnosis.models import AgentStep, DiagnosisRun, RunEvent, ToolInvocation
from diagnosis.services import wiring
from diagnosis.services.reaper import runs_reap_stale, runs_stale
from diagnosis.services.execution import run_execute
from diagnosis.tasks import execute_run, reap_stale_runs
from tests.factories import AgentStepFactory

pytestmark = pytest.mark.django_db
S = DiagnosisRun.Status


class WorkerDies(BaseException):
    """What a SIGKILL looks like from inside the run: nothing after this line runs, no handler fires."""


class DiesAt:
    """The offline model, except that the process 'dies' in the middle of the call of one role."""

    def __init__(self, model, role: str):
        self.model, self.role = model, role

    def __getattr__(self, name):
        return getattr(self.model, name)

    def complete(self, request):
        if request.role == self.role:
            raise WorkerDies(self.role)
        return self.model.complete(request)


def crash_mid_run(run: DiagnosisRun, *, role: str = "verifier") -> DiagnosisRun:
    real = wiring.chat_model
    with mock.patch.object(wiring, "chat_model", lambda: DiesAt(real(), role)), pytest.raises(WorkerDies):
        run_execute(run_id=run.run_id)
    run.refresh_from_db()
    assert run.status == S.RUNNING  # nothing recorded the death: this is what the reaper is for
    return run


def age_heartbeat(run: DiagnosisRun, seconds: float) -> None:
    DiagnosisRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_a_run_whose_worker_died_mid_verifier_is_reaped_keeping_its_steps_and_partial_trace(make_run, demo_knowledge, settings):
    run = crash_mid_run(make_run("Why is payment-service failing?"))
    steps_before = list(AgentStep.objects.filter(run=run).order_by("step_index").values_list("step_index", "node", "status"))
    assert steps_before[-1][1:] == ("verifier", "RUNNING")
    invocations = ToolInvocation.objects.filter(run=run).count()

    age_heartbeat(run, settings.RUN_LEASE_SECONDS + 1)
    reaped = runs_reap_stale()

    assert [r.run_id for r in reaped] == [run.run_id]
    run.refresh_from_db()
    assert (run.status, run.error_code) == (S.FAILED, "worker_lost")
    assert "heartbeat" in run.error_message and run.finished_at and run.duration_ms is not None
    assert not run.answer and run.effective_verdict == ""  # nothing is made up for the part that never ran
    steps = list(AgentStep.objects.filter(run=run).order_by("step_index").values_list("step_index", "node", "status"))
    assert [s[:2] for s in steps] == [s[:2] for s in steps_before]  # every partial step kept, none added
    assert steps[-1][2] == "FAILED" and AgentStep.objects.get(run=run, node="verifier").error.startswith("worker_lost")
    assert (run.step_count, run.tool_count) == (len(steps), invocations) and invocations > 0
    trace = run.orchestration_trace
    assert trace["version"] == "stategraph-v1"
    assert [(t["from"], t["to"]) for t in trace["transitions"]][-1] == ("verified_input", "verifier")
    assert (trace["final_node"], trace["termination_reason"]) == ("verifier", "verifier_interrupted")
    last_event = RunEvent.objects.filter(run=run).order_by("-id").first()
    assert last_event.kind == "status" and last_event.data["errorCode"] == "worker_lost"
    print(f"\nreaper: 1 crashed run reaped FAILED worker_lost, {len(steps)} steps and {invocations} tool invocations kept, "
          f"trace ends {trace['termination_reason']}")


def test_a_run_that_died_before_any_node_finished_keeps_its_step_and_has_no_trace(make_run, demo_knowledge, settings):
    run = crash_mid_run(make_run("Why is payment-service failing?"), role="planner")
    age_heartbeat(run, settings.RUN_LEASE_SECONDS + 1)
    runs_reap_stale()
    run.refresh_from_db()
    assert (run.status, run.error_code, run.orchestration_trace, run.step_count) == (S.FAILED, "worker_lost", None, 1)
    assert AgentStep.objects.get(run=run).status == "FAILED"
    print("\nreaper: run killed in its first model call -> FAILED worker_lost, 1 step kept, no trace (no node finished)")


def test_live_finished_and_queued_runs_are_never_reaped(make_run, settings):
    lease = settings.RUN_LEASE_SECONDS
    old = timezone.now() - timedelta(seconds=lease * 10)
    live = make_run("q", status=S.RUNNING, started_at=old, heartbeat_at=timezone.now() - timedelta(seconds=lease - 5))
    AgentStepFactory(run=live, step_index=0)
    done = make_run("q", status=S.SUCCESS, answer="a", heartbeat_at=old, started_at=old)
    failed = make_run("q", status=S.FAILED, error_code="model_timeout", heartbeat_at=old, started_at=old)
    queued = make_run("q")
    DiagnosisRun.objects.filter(pk=queued.pk).update(created_at=old)
    stale = make_run("q", status=S.RUNNING, started_at=old, heartbeat_at=old)
    before = {r.pk: (r.status, r.error_code, r.heartbeat_at) for r in DiagnosisRun.objects.all()}

    reaped = runs_reap_stale()

    assert [r.run_id for r in reaped] == [stale.run_id]
    after = {r.pk: (r.status, r.error_code, r.heartbeat_at) for r in DiagnosisRun.objects.all()}
    for run in (live, done, failed, queued):
        assert after[run.pk] == before[run.pk], run
    assert AgentStep.objects.get(run=live).status == "RUNNING"
    assert runs_reap_stale() == []  # a second pass finds nothing: reaping is idempotent
    print(f"\nreaper: 5 runs checked (live, SUCCESS, FAILED, PENDING, stale), 1 reaped, 4 untouched")


def test_a_heartbeat_that_is_exactly_fresh_wins_against_a_short_lease_override(make_run):
    run = make_run("q", status=S.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now() - timedelta(seconds=30))
    assert runs_stale(lease_seconds=60) == []
    assert runs_stale(lease_seconds=10) == [run.run_id]
    print("\nreaper: heartbeat 30s old -> fresh under a 60s lease, stale under a 10s lease")


def test_a_redelivered_message_for_a_stale_run_records_worker_lost_with_the_partial_trace(make_run, demo_knowledge, settings):
    run = crash_mid_run(make_run("Why is payment-service failing?"))
    steps = AgentStep.objects.filter(run=run).count()
    age_heartbeat(run, settings.RUN_LEASE_SECONDS + 1)

    result = execute_run.apply(args=[run.run_id]).get()  # the message Redis hands out again

    run.refresh_from_db()
    assert result == S.FAILED and (run.status, run.error_code) == (S.FAILED, "worker_lost")
    assert AgentStep.objects.filter(run=run).count() == steps  # not executed a second time
    assert run.orchestration_trace["termination_reason"] == "verifier_interrupted" and run.step_count == steps
    print(f"\nredelivery of a stale run: FAILED worker_lost by the task itself, {steps} steps kept, 0 added, trace kept")


def test_a_redelivered_message_for_a_live_run_waits_for_the_lease_then_reaps_it(make_run, demo_knowledge, settings):
    """Never acknowledged while the run may be lost: the delivery waits while the lease is live, and once
    it lapses records the run FAILED worker_lost itself, adding no step."""
    from diagnosis.services import execution as runs

    run = crash_mid_run(make_run("Why is payment-service failing?"))  # heartbeat still fresh: its worker may be alive
    steps = list(AgentStep.objects.filter(run=run).values_list("pk", "status"))
    settings.RUN_LEASE_SECONDS = 2
    checks = []
    real_reap = runs.run_reap

    def spy(**kwargs):
        checks.append(real_reap(**kwargs))
        return checks[-1]

    with mock.patch.object(runs, "run_reap", spy):
        result = execute_run.apply(args=[run.run_id]).get()

    run.refresh_from_db()
    assert result == S.FAILED and (run.status, run.error_code) == (S.FAILED, "worker_lost")
    assert checks[0] is None and checks[-1] is not None  # live at first: waited; reaped once the lease lapsed
    assert sorted(AgentStep.objects.filter(run=run).values_list("pk", flat=True)) == sorted(pk for pk, _ in steps)
    print(f"\nredelivery of a live run: waited through {len(checks) - 1} live-lease checks, then FAILED worker_lost; "
          f"0 steps added to {len(steps)}")


def test_a_redelivered_message_for_a_run_that_finishes_meanwhile_returns_its_status(make_run, demo_knowledge):
    from diagnosis.services import execution as runs

    run = crash_mid_run(make_run("Why is payment-service failing?"))

    def holder_finishes(_seconds):  # the other worker saves its result while this delivery waits
        DiagnosisRun.objects.filter(pk=run.pk).update(status=S.SUCCESS, answer="done")

    with mock.patch.object(runs.time, "sleep", holder_finishes):
        result = execute_run.apply(args=[run.run_id]).get()
    run.refresh_from_db()
    assert result == S.SUCCESS and run.answer == "done"


def test_the_same_task_message_delivered_twice_executes_the_run_once(make_run, demo_knowledge):
    run = make_run("Why is payment-service failing?")

    first = execute_run.apply(args=[run.run_id], task_id="delivery-1").get()
    steps = list(AgentStep.objects.filter(run=run).order_by("step_index").values_list("pk", "step_index", "node", "attempt"))
    events = RunEvent.objects.filter(run=run).count()
    second = execute_run.apply(args=[run.run_id], task_id="delivery-1").get()

    run.refresh_from_db()
    assert first == second == S.SUCCESS and run.celery_task_id == "delivery-1"
    assert list(AgentStep.objects.filter(run=run).order_by("step_index").values_list("pk", "step_index", "node", "attempt")) == steps
    assert RunEvent.objects.filter(run=run).count() == events
    assert sum(1 for s in steps if s[2] == "planner" and s[3] == 1) == 1
    assert [s[1] for s in steps] == list(range(len(steps)))
    print(f"\nduplicate delivery (embedded): 2 deliveries, 1 execution, {len(steps)} steps, 0 duplicated")


def test_the_reap_runs_command_lists_then_reaps_stale_runs(make_run, settings):
    old = timezone.now() - timedelta(seconds=settings.RUN_LEASE_SECONDS + 1)
    stale = make_run("q", status=S.RUNNING, started_at=old, heartbeat_at=old)
    AgentStepFactory(run=stale, step_index=0, status="COMPLETED", prompt_tokens=7, completion_tokens=3)
    AgentStepFactory(run=stale, step_index=1, node="executor", agent="executor")
    fresh = make_run("q", status=S.RUNNING, started_at=old, heartbeat_at=timezone.now())

    out = StringIO()
    call_command("reap_runs", "--dry-run", stdout=out)
    assert stale.run_id in out.getvalue() and "1 stale run(s); dry run" in out.getvalue()
    assert DiagnosisRun.objects.get(pk=stale.pk).status == S.RUNNING

    out = StringIO()
    call_command("reap_runs", stdout=out)
    assert f"{stale.run_id} FAILED worker_lost (2 steps kept)" in out.getvalue() and "reaped 1 run(s)" in out.getvalue()
    stale.refresh_from_db()
    assert (stale.status, stale.error_code, stale.prompt_tokens, stale.completion_tokens) == (S.FAILED, "worker_lost", 7, 3)
    assert DiagnosisRun.objects.get(pk=fresh.pk).status == S.RUNNING

    out = StringIO()
    call_command("reap_runs", "--lease-seconds", "0.001", stdout=out)  # an explicit lease overrides the setting
    assert "reaped 1 run(s)" in out.getvalue() and DiagnosisRun.objects.get(pk=fresh.pk).status == S.FAILED
    print("\nreap_runs: --dry-run lists 1 stale run and changes nothing; run reaps 1 (2 steps, 7+3 tokens kept), "
          "leaves the fresh one; --lease-seconds 0.001 reaps it")


def test_beat_runs_the_reaper_every_half_lease_on_the_maintenance_queue(make_run, settings):
    from config.celery import app

    entry = app.conf.beat_schedule["reap-stale-runs"]
    assert entry["task"] == reap_stale_runs.name == "diagnosis.tasks.reap_stale_runs"
    assert entry["schedule"] == settings.RUN_LEASE_SECONDS / 2
    assert app.amqp.router.route({}, reap_stale_runs.name)["queue"].name == "maintenance"
    old = timezone.now() - timedelta(seconds=settings.RUN_LEASE_SECONDS + 1)
    stale = make_run("q", status=S.RUNNING, started_at=old, heartbeat_at=old)
    assert reap_stale_runs.apply().get() == [stale.run_id]
    print(f"\nbeat: reap_stale_runs every {entry['schedule']:g}s (RUN_LEASE_SECONDS/2) on the maintenance queue; 1 stale run reaped")
