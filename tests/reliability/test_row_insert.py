"""A group's events and tool invocations written without the ORM's compiler store what bulk_create stores."""

from __future__ import annotations

import pytest
from django.forms.models import model_to_dict

from diagnosis.models import RunEvent, ToolInvocation
from diagnosis.services.row_insert import rows_insert
from tests.factories import ChatSessionFactory, DiagnosisRunFactory

pytestmark = pytest.mark.django_db(transaction=True)

AWKWARD = {"text": "naïve — ünïcode \u200b 'quotes' \"double\" \\ back", "none": None, "nested": [1, 2.5, True, {"k": []}]}


def _events(run, seq: int) -> list[RunEvent]:
    return [RunEvent(run_id=run.pk, kind="status", data={**AWKWARD, "n": n}, seq=seq + n) for n in range(3)] + [
        RunEvent(run_id=run.pk, kind="node", data={}, seq=None)]


def _invocations(run, seq: int) -> list[ToolInvocation]:
    return [ToolInvocation(run_id=run.pk, session_id=run.session.session_id, step_id=None, invocation_id=f"inv-{seq}-{n}",
                           tool_name="query_logs", arguments={"service": "payment", **AWKWARD}, status="SUCCESS",
                           result=AWKWARD if n else None, truncated=bool(n), error_message="", duration_ms=n or None,
                           retrieval_details=None, source_invocation_id=None, replay_mode="", seq=seq + n)
            for n in range(2)]


def _stored(model, run) -> list[dict]:
    rows = [model_to_dict(row) for row in model.objects.filter(run_id=run.pk).order_by("id")]
    for row in rows:
        row.pop("id", None)
        row.pop("run", None)
        row.pop("invocation_id", None)
        row.pop("session_id", None)  # each run its own session
    return rows


@pytest.mark.parametrize("build, model", [(_events, RunEvent), (_invocations, ToolInvocation)])
def test_it_stores_the_rows_bulk_create_stores(build, model):
    orm_run, raw_run = (DiagnosisRunFactory(session=ChatSessionFactory()) for _ in range(2))
    model.objects.bulk_create(build(orm_run, 10))
    rows_insert(build(raw_run, 10))
    stored = _stored(model, raw_run)
    assert stored == _stored(model, orm_run) and len(stored) == len(build(raw_run, 0))
    assert all(row.created_at is not None for row in model.objects.filter(run_id=raw_run.pk))


def test_it_writes_more_rows_than_one_statement_holds(monkeypatch):
    from django.db import connection

    run = DiagnosisRunFactory(session=ChatSessionFactory())
    monkeypatch.setattr(connection.ops, "bulk_batch_size", lambda fields, objs: 2)
    rows_insert([RunEvent(run_id=run.pk, kind="node", data={"n": n}, seq=n) for n in range(5)])
    assert list(RunEvent.objects.filter(run_id=run.pk).order_by("seq").values_list("data", flat=True)) == [
        {"n": n} for n in range(5)]
