"""Columns written by a plain UPDATE without the ORM's compiler store what the ORM's `update` stores, match
the rows it matches and count them as it counts them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import F
from django.forms.models import model_to_dict
from django.utils import timezone

from diagnosis.models import AgentStep, ChatSession, DiagnosisRun
from diagnosis.services.row_update import rows_update
from tests.factories import ChatSessionFactory, DiagnosisRunFactory

pytestmark = pytest.mark.django_db(transaction=True)

AWKWARD = {"text": "naïve — ünïcode \u200b 'quotes' \"double\" \\ back", "none": None, "nested": [1, 2.5, True, {"k": []}]}
Status = DiagnosisRun.Status


def _result_columns() -> dict:
    now = timezone.now()
    return {"status": Status.SUCCESS, "answer": "**Root cause** 'x' \"y\" \\ 中文", "finished_at": now,
            "heartbeat_at": now - timedelta(seconds=3), "duration_ms": 1234, "degraded": True,
            "effective_verdict": "PASS", "diagnosis": AWKWARD, "root_service": "payment-service", "root_summary": "",
            "answer_terms": "root cause payment", "self_evaluation": None, "orchestration_trace": [AWKWARD, "x"],
            "step_count": 6, "tool_count": 4, "prompt_tokens": 0, "completion_tokens": 99, "model_name": "m",
            "prompt_version": "v1", "error_message": ""}


def _stored(model, pk) -> dict:
    row = model_to_dict(model.objects.get(pk=pk))
    for name in ("id", "run_id", "session", "claim_token", "question", "owner", "session_id"):
        row.pop(name, None)
    return row


def _running(token: str) -> DiagnosisRun:
    run = DiagnosisRunFactory(session=ChatSessionFactory(), status=Status.RUNNING)
    DiagnosisRun.objects.filter(pk=run.pk).update(claim_token=token)
    return run


def test_a_run_s_result_is_stored_as_the_orm_stores_it():
    orm, raw = _running("t" * 32), _running("t" * 32)
    columns = _result_columns()
    assert DiagnosisRun.objects.filter(run_id=orm.run_id, status__in={Status.RUNNING}, claim_token="t" * 32).update(
        **columns) == 1
    assert rows_update(DiagnosisRun, {"run_id": raw.run_id, "status": {Status.RUNNING}, "claim_token": "t" * 32},
                       columns) == 1
    assert _stored(DiagnosisRun, raw.pk) == _stored(DiagnosisRun, orm.pk)
    assert _stored(DiagnosisRun, raw.pk)["diagnosis"] == AWKWARD


def test_a_condition_that_does_not_match_writes_nothing_and_counts_nothing():
    run = _running("a" * 32)
    before = _stored(DiagnosisRun, run.pk)
    assert rows_update(DiagnosisRun, {"run_id": run.run_id, "status": [Status.RUNNING], "claim_token": "b" * 32},
                       {"status": Status.FAILED}) == 0
    assert rows_update(DiagnosisRun, {"run_id": run.run_id, "status": [Status.PENDING, Status.SUCCESS]},
                       {"status": Status.FAILED}) == 0
    assert rows_update(DiagnosisRun, {"run_id": run.run_id, "status": []}, {"status": Status.FAILED}) == 0
    assert _stored(DiagnosisRun, run.pk) == before


def test_a_row_matched_with_the_values_it_already_holds_counts_as_the_orm_counts_it():
    run = _running("c" * 32)
    same = {"status": Status.RUNNING}
    assert rows_update(DiagnosisRun, {"run_id": run.run_id}, same) == DiagnosisRun.objects.filter(
        run_id=run.run_id).update(**same) == 1


def test_a_step_s_end_and_a_session_s_memory_columns_are_stored_as_the_orm_stores_them():
    run = _running("d" * 32)
    steps = [AgentStep.objects.create(run=run, session_id=run.session.session_id, step_index=n, node="planner", agent="planner", attempt=1,
                                      status="RUNNING", model_input=[{"role": "user", "content": "q"}]) for n in (1, 2)]
    end = {"status": "COMPLETED", "model_output": AWKWARD, "duration_ms": 7, "prompt_tokens": 3, "completion_tokens": 4,
           "has_tool_call": True, "error": "", "finished_at": timezone.now()}
    AgentStep.objects.filter(pk=steps[0].pk).update(**end)
    assert rows_update(AgentStep, {"pk": steps[1].pk}, end) == 1
    orm_step, raw_step = (_stored(AgentStep, step.pk) for step in steps)
    assert orm_step.pop("step_index") == 1 and raw_step.pop("step_index") == 2
    assert raw_step == orm_step

    sessions = [ChatSessionFactory(), ChatSessionFactory()]
    memory = {"summary": "- Q: 中文 -> A: 'x'", "last_message_at": timezone.now()}
    ChatSession.objects.filter(pk=sessions[0].pk).update(**memory)
    assert rows_update(ChatSession, {"pk": sessions[1].pk}, memory) == 1
    orm_session, raw_session = (_stored(ChatSession, s.pk) for s in sessions)
    assert raw_session == orm_session


def test_it_refuses_what_it_does_not_write_as_the_orm_would():
    run = _running("e" * 32)
    with pytest.raises(TypeError):
        rows_update(DiagnosisRun, {"run_id": run.run_id}, {"step_count": F("step_count") + 1})
    with pytest.raises(ValueError):
        rows_update(DiagnosisRun, {"run_id": run.run_id}, {"replays": None})
    with pytest.raises(ValueError):
        rows_update(DiagnosisRun, {}, {"status": Status.FAILED})
