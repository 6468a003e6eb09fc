"""The run observer writes a run's audit trail in a few fenced groups, not a transaction per row.

Counted on the connection (both passes): every explicit COMMIT, plus every write statement run in
autocommit (each is a transaction of its own). A count, not a timing: `bench/run_overhead.py`
times it.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from unittest import mock

import pytest
from django.db import connection

from diagnosis.models import AgentStep, DiagnosisRun, RunEvent, ToolInvocation
from diagnosis.selectors import run_events_after
from diagnosis.services.execution import run_execute

pytestmark = pytest.mark.django_db(transaction=True)
WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


@contextmanager
def counted():
    seen = {"statements": 0, "commits": 0}

    def wrapper(execute, sql, params, many, context):
        seen["statements"] += 1
        if WRITE.match(sql) and not context["connection"].in_atomic_block:
            seen["commits"] += 1  # autocommit: the statement is its own transaction
        return execute(sql, params, many, context)

    real_commit = connection.commit

    def commit():
        seen["commits"] += 1
        return real_commit()

    with connection.execute_wrapper(wrapper), mock.patch.object(connection, "commit", commit):
        yield seen


def test_a_diagnosis_is_written_in_a_few_fenced_groups(make_run, demo_knowledge):
    run = make_run("Why is payment-service failing?")
    with counted() as seen:
        run_execute(run_id=run.run_id)
    run.refresh_from_db()
    assert run.status == DiagnosisRun.Status.SUCCESS and not run.degraded
    steps = AgentStep.objects.filter(run=run).count()
    rows = steps + ToolInvocation.objects.filter(run=run).count() + RunEvent.objects.filter(run=run).count()
    events = len(run_events_after(run_pk=run.pk, after=0))
    print(f"\n{steps} steps, {rows} rows, {events} progress events: {seen}")
    assert steps >= 5 and events >= 20
    # A step tells its start and end, an invocation its call: only the other events are rows of their own.
    assert rows == events - steps, (rows, events, steps)
    # The claim, one group before each model call, the result, the session's last-message time. Tool
    # calls and the Gatekeeper's reads commit nothing. (One transaction per row and per event was 47
    # commits for this run; a group before tool calls and each Gatekeeper read, 13.)
    assert seen["commits"] <= steps + 3, seen
    # A group is a few statements whatever it holds: an event or a row is not a statement of its own
    # (one per event would be about 30 more).
    assert seen["statements"] <= 6 * seen["commits"], seen


def test_the_run_s_log_numbers_its_events_in_the_order_they_were_given(make_run, demo_knowledge):
    run = make_run("Why is payment-service failing?")
    run_execute(run_id=run.run_id)
    log = run_events_after(run_pk=run.pk, after=0)
    assert [event.id for event in log] == list(range(1, len(log) + 1))  # places 1, 2, 3… with no gap
    events = [(event.kind, event.data) for event in log]
    assert events[0] == ("status", {"status": "RUNNING", "runId": run.run_id})
    assert events[-1][0] == "status" and events[-1][1]["status"] == "SUCCESS"
    nodes = [data["node"] for kind, data in events if kind == "node"]
    assert nodes[0] == "planner" and nodes[-1] in ("composer", "fallback")
    steps = [data for kind, data in events if kind == "step"]
    # Every step's RUNNING event precedes its end event; the step rows follow the same order.
    assert [s["status"] for s in steps][::2] == ["RUNNING"] * (len(steps) // 2)
    assert [s["stepId"] for s in steps[1::2]] == list(AgentStep.objects.filter(run=run).order_by("step_index")
                                                      .values_list("pk", flat=True))


def test_a_log_written_before_the_shared_numbering_is_read_by_primary_key_and_continued_after_it(make_run):
    """Events stored before `seq` existed (steps and tool calls among them) keep their primary key as
    their place; what is written next follows them, and a client resuming from an old id misses nothing."""
    from diagnosis.services.observer import DbRunObserver, run_event_append

    run = make_run("Why is payment-service failing?")
    old = [RunEvent.objects.create(run=run, kind=kind, data={"n": n}) for n, kind in enumerate(["status", "step", "tool"])]
    observer = DbRunObserver(run)
    assert observer.seq == old[-1].pk
    observer.event("node", {"node": "planner"})
    observer.commit(fence=False)
    end = run_event_append(run_pk=run.pk, kind="status", data={"status": "FAILED"})
    log = run_events_after(run_pk=run.pk, after=0)
    assert [(e.id, e.kind) for e in log] == [(e.pk, e.kind) for e in old] + [
        (old[-1].pk + 1, "node"), (old[-1].pk + 2, "status")]
    assert end.seq == old[-1].pk + 2
    assert [e.kind for e in run_events_after(run_pk=run.pk, after=old[0].pk)] == ["step", "tool", "node", "status"]
