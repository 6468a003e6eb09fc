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
    seen = {"statements": 0, "commits": 0, "sql": []}

    def wrapper(execute, sql, params, many, context):
        seen["statements"] += 1
        seen["sql"].append(sql)
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
    print(f"\n{steps} steps, {rows} rows, {events} progress events: {seen['statements']} statements, {seen['commits']} commits")
    assert steps >= 5 and events >= 20
    # A step tells its start and end, an invocation its call: only the other events are rows of their own.
    assert rows == events - steps, (rows, events, steps)
    # The claim, one group before each model call, the result (with the session's memory). Tool calls
    # and the Gatekeeper's reads commit nothing. (One transaction per row and per event was 47 commits
    # for this run; a group before tool calls and each Gatekeeper read, 13.)
    assert seen["commits"] <= steps + 2, seen
    # A group is a few statements whatever it holds: an event or a row is not a statement of its own
    # (one per event would be about 30 more).
    assert seen["statements"] <= 6 * seen["commits"], seen
    # The run row is written twice, by the claim and by the result: a group before a model call has no
    # heartbeat UPDATE, its step's INSERT is its fence (a heartbeat each was 6 more statements).
    def written(table: str, verb: str) -> int:
        return sum(1 for sql in seen["sql"] if re.match(rf"{verb} (INTO )?\W?{table}\W? ", sql))
    assert (written("diagnosis_run", "UPDATE"), written("agent_step", "INSERT")) == (2, steps), seen["sql"]


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


def _observer_with_one_call(run, result):
    from diagnosis.services.lifecycle import run_claim
    from diagnosis.services.observer import DbRunObserver, RunLease

    run = run_claim(run_id=run.run_id)
    observer = DbRunObserver(run, lease=RunLease(run.run_id, run.claim_token))
    step = observer.step_start(node="executor", agent="executor", attempt=1, model_input=[], model_name="m")
    invocation_id = observer.record(tool_name="query_logs", arguments={}, status="SUCCESS", result=result,
                                    truncated=False, error_message="", duration_ms=1, retrieval_details=None)
    return observer, step, invocation_id


def test_the_gatekeeper_reads_the_run_s_own_calls_from_memory_as_the_database_would_return_them(make_run):
    """No commit and no read for the run's own invocation; its result has the stored JSON's shape; an id
    the run does not hold is still read (another run's record, for the Gatekeeper's other-run check)."""
    other, _, other_id = _observer_with_one_call(make_run("q1"), {"n": 1})
    other.commit()
    observer, _, own_id = _observer_with_one_call(make_run("q2"), {"pair": (1, 2), 3: "x"})
    with counted() as seen:
        [record] = observer.lookup([own_id, own_id, 7])
    assert (seen["statements"], seen["commits"]) == (0, 0)
    assert (record.invocation_id, record.run_id, record.tool_name, record.status) == (
        own_id, observer.run_id, "query_logs", "SUCCESS")
    assert record.result == {"pair": [1, 2], "3": "x"}  # tuples as lists, keys as strings: the JSON
    assert observer._invocations, "looking up wrote nothing"
    with counted() as seen:
        records = observer.lookup([own_id, other_id])
    assert seen["statements"] == 1 and seen["commits"] == 0
    assert {(r.invocation_id, r.run_id) for r in records} >= {(own_id, observer.run_id), (other_id, other.run_id)}


@pytest.mark.parametrize("returns_ids", [True, False], ids=["upsert", "update-then-insert"])
def test_a_step_s_end_and_the_next_step_s_start_are_written_together(make_run, returns_ids):
    """Where the database returns a multi-row INSERT's ids, one upsert writes the ended step's end
    columns (its id, start and input kept) and the new step; elsewhere an INSERT and an UPDATE. The
    INSERT is the group's fence: no heartbeat UPDATE before it."""
    observer, first, _ = _observer_with_one_call(make_run("q"), {"n": 1})
    before = AgentStep.objects.values("pk", "started_at", "model_input", "seq").get(pk=first)
    observer.step_finish(first, status="COMPLETED", model_output={"ok": True}, duration_ms=5, usage=None,
                         has_tool_call=True, error="", model_name="m")
    features = connection.features
    with mock.patch.object(type(features), "can_return_rows_from_bulk_insert",
                           new=returns_ids and features.can_return_rows_from_bulk_insert), counted() as seen:
        second = observer.step_start(node="verifier", agent="verifier", attempt=1, model_input=["p"], model_name="m")
    steps = (["INSERT agent_step"] if returns_ids and features.can_return_rows_from_bulk_insert
             else ["INSERT agent_step", "UPDATE agent_step"])
    sqls = [sql for sql in seen["sql"] if not sql.startswith("BEGIN")]  # SQLite's BEGIN IMMEDIATE starts its transaction
    written = [" ".join(re.findall(r"^(\w+)\s+(?:INTO\s+)?\W?(\w+)", sql)[0]) for sql in sqls]
    # No heartbeat UPDATE: the step's INSERT is the group's fence, reading the run row (locked on MySQL).
    assert written == [*steps, "INSERT tool_invocation"] and seen["commits"] == 1, seen
    fence = re.search(r"FROM \W?diagnosis_run\W? .*claim_token\W? = %s( ORDER BY \S+)?( FOR UPDATE)?", sqls[0])
    assert fence and bool(fence[2]) == (connection.vendor == "mysql"), sqls[0]
    ended = AgentStep.objects.get(pk=first)
    assert {k: getattr(ended, k) for k in before} == before  # the same row, its start untouched
    assert (ended.status, ended.model_output, ended.duration_ms, ended.has_tool_call) == ("COMPLETED", {"ok": True}, 5, True)
    assert ended.end_seq is not None and ended.end_seq > ended.seq
    started = AgentStep.objects.get(pk=second)
    assert second != first and (started.step_index, started.status, started.model_input) == (1, "RUNNING", ["p"])
    assert ToolInvocation.objects.get(run=observer.run).step_id == first


@pytest.mark.parametrize("between", [0, 1, 2, 3])
def test_a_reader_gets_the_log_up_to_a_place_when_a_group_lands_between_its_reads(make_run, between):
    """The writer commits a group (a node event, a tool call, the next step's start: places 2, 3, 4) after
    the reader's `between`-th statement. A step, a call and the events before them are read by separate
    statements, but the reader gives a whole prefix of the log, never a later event without an earlier
    one (a live stream would then pass the earlier one by for good), and the next read gives the rest."""
    from diagnosis.services.observer import DbRunObserver

    run = make_run("Why is payment-service failing?")
    observer = DbRunObserver(run)
    observer.event("status", {"status": "RUNNING", "runId": run.run_id})
    observer.commit(fence=False)
    seen = {"statements": 0}

    def land_the_group():
        observer.event("node", {"node": "planner"})
        observer.record(tool_name="query_logs", arguments={}, status="SUCCESS", result={"n": 1}, truncated=False,
                        error_message="", duration_ms=1, retrieval_details=None)
        observer.step_start(node="executor", agent="executor", attempt=1, model_input=[], model_name="m")

    def wrapper(execute, sql, params, many, context):
        if seen["statements"] == between:
            seen["statements"] = None  # once; the group's own statements pass through
            land_the_group()
        result = execute(sql, params, many, context)
        if seen["statements"] is not None:
            seen["statements"] += 1
        return result

    with connection.execute_wrapper(wrapper):
        first = run_events_after(run_pk=run.pk, after=0)
    assert seen["statements"] is None, "the group landed during the read"
    places = [event.id for event in first]
    assert places == list(range(1, len(places) + 1)), [(e.id, e.kind) for e in first]
    rest = run_events_after(run_pk=run.pk, after=places[-1])
    assert [(e.id, e.kind) for e in first + rest] == [(1, "status"), (2, "node"), (3, "tool"), (4, "step")]
