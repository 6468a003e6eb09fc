"""Every model constraint, proven by inserting a violating row."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from diagnosis.models import AgentStep, CaseLibraryEntry, ChatSession, DiagnosisRun, KnowledgeChunk, KnowledgeDocument, ToolInvocation
from tests.factories import AgentStepFactory, ChatSessionFactory, DiagnosisRunFactory, ToolInvocationFactory, UserFactory

pytestmark = pytest.mark.django_db


def violates(fn) -> bool:
    try:
        with transaction.atomic():
            fn()
    except IntegrityError:
        return True
    return False


def test_tables_carry_the_seed_names():
    assert ChatSession._meta.db_table == "chat_session"
    assert DiagnosisRun._meta.db_table == "diagnosis_run"
    assert AgentStep._meta.db_table == "agent_step"
    assert ToolInvocation._meta.db_table == "tool_invocation"
    assert CaseLibraryEntry._meta.db_table == "case_library"


def test_a_new_run_gets_a_run_id_in_the_public_format():
    run = DiagnosisRunFactory()
    assert run.run_id.startswith("run-") and len(run.run_id) == 36
    assert run.status == DiagnosisRun.Status.PENDING


def test_it_rejects_a_duplicate_session_id():
    ChatSessionFactory(session_id="dup")
    assert violates(lambda: ChatSessionFactory(session_id="dup"))


def test_it_rejects_a_duplicate_run_id():
    run = DiagnosisRunFactory()
    assert violates(lambda: DiagnosisRun.objects.create(session=run.session, question="q", run_id=run.run_id))


def test_it_rejects_a_duplicate_step_index_in_one_run_but_not_across_runs():
    step = AgentStepFactory(step_index=0)
    assert violates(lambda: AgentStepFactory(run=step.run, step_index=0))
    assert not violates(lambda: AgentStepFactory(step_index=0))


def test_it_rejects_a_duplicate_invocation_id_in_one_run_but_not_across_runs():
    inv = ToolInvocationFactory(invocation_id="inv-0000abcd")
    assert violates(lambda: ToolInvocationFactory(run=inv.run, invocation_id="inv-0000abcd"))
    assert not violates(lambda: ToolInvocationFactory(invocation_id="inv-0000abcd"))


def test_it_keeps_one_case_per_run():
    run = DiagnosisRunFactory()
    CaseLibraryEntry.objects.create(run=run, session_id=run.session.session_id, question="q", answer="a")
    assert violates(lambda: CaseLibraryEntry.objects.create(run=run, session_id="x", question="q", answer="a"))


def test_the_same_request_id_twice_in_a_session_is_rejected_but_null_ids_are_not():
    session = ChatSessionFactory()
    DiagnosisRunFactory(session=session, request_id="req-1")
    assert violates(lambda: DiagnosisRunFactory(session=session, request_id="req-1"))
    assert not violates(lambda: DiagnosisRunFactory(session=ChatSessionFactory(), request_id="req-1"))
    DiagnosisRunFactory(session=session, request_id=None)
    assert not violates(lambda: DiagnosisRunFactory(session=session, request_id=None))


def test_knowledge_chunks_are_unique_per_document_position_and_id():
    doc = KnowledgeDocument.objects.create(path="runbooks/a.md", title="A", content="x", sha256="0" * 64)
    KnowledgeChunk.objects.create(document=doc, chunk_id="a#0", ordinal=0, content="x")
    assert violates(lambda: KnowledgeChunk.objects.create(document=doc, chunk_id="a#1", ordinal=0, content="y"))
    assert violates(lambda: KnowledgeChunk.objects.create(document=doc, chunk_id="a#0", ordinal=5, content="y"))
    assert violates(lambda: KnowledgeDocument.objects.create(path="runbooks/a.md", title="B", content="", sha256=""))


def test_a_session_with_runs_cannot_be_deleted_by_accident():
    run = DiagnosisRunFactory()
    from django.db.models import ProtectedError

    with pytest.raises(ProtectedError):
        run.session.delete()


def test_a_user_owning_sessions_cannot_be_deleted_by_accident():
    user = UserFactory()
    ChatSessionFactory(owner=user)
    from django.db.models import ProtectedError

    with pytest.raises(ProtectedError):
        user.delete()


def test_json_columns_round_trip_nested_values():
    value = {"claims": [{"id": "c1", "evidence": [{"path": "$.records[3]", "n": 1.5, "ok": True, "none": None}]}], "中文": "连接池耗尽 🔥"}
    run = DiagnosisRunFactory(self_evaluation=value, orchestration_trace={"version": "stategraph-v1", "transitions": []})
    run.refresh_from_db()
    assert run.self_evaluation == value
    assert run.orchestration_trace["version"] == "stategraph-v1"
