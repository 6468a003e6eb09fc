"""Session memory (cache, rebuild from the database, compaction) and the set-up commands."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from diagnosis.models import ChatSession, DiagnosisRun, KnowledgeChunk, KnowledgeDocument
from diagnosis.services import memory
from tests.factories import ChatSessionFactory, DiagnosisRunFactory

pytestmark = pytest.mark.django_db


def finished(session, n):
    return DiagnosisRunFactory(session=session, question=f"question {n}", answer=f"answer {n}", status=DiagnosisRun.Status.SUCCESS)


def test_recent_turns_live_in_the_cache_and_are_rebuilt_from_the_database_on_a_miss():
    session = ChatSessionFactory()
    runs = [finished(session, n) for n in range(3)]
    for run in runs:
        memory.memory_append(session=session, run=run)
    assert [t["question"] for t in cache.get(f"session-memory:{session.session_id}")] == ["question 0", "question 1", "question 2"]
    cache.clear()
    assert [t["question"] for t in memory.memory_turns(session=session)] == ["question 0", "question 1", "question 2"]


def test_older_turns_are_compacted_into_the_session_summary():
    session = ChatSessionFactory()
    for n in range(memory.RECENT_TURNS + 2):
        memory.memory_append(session=session, run=finished(session, n))
    session.refresh_from_db()
    assert "question 0" in session.summary and "question 1" in session.summary
    turns = memory.memory_turns(session=session)
    assert len(turns) == memory.RECENT_TURNS and turns[0]["question"] == "question 2"
    prompt_text = memory.memory_for_prompt(session=session)
    assert "question 0" in prompt_text and f"question {memory.RECENT_TURNS + 1}" in prompt_text


def test_memory_never_holds_a_secret():
    session = ChatSessionFactory()
    run = DiagnosisRunFactory(session=session, question="login with password=hunter2now", answer="ok", status="SUCCESS")
    memory.memory_append(session=session, run=run)
    assert "hunter2now" not in memory.memory_for_prompt(session=session)


def test_create_api_client_prints_a_token_and_keeps_it_unless_rotated():
    out = StringIO()
    call_command("create_api_client", "ci-bot", stdout=out)
    token = out.getvalue().strip()
    assert Token.objects.get(user__username="ci-bot").key == token
    again = StringIO()
    call_command("create_api_client", "ci-bot", stdout=again)
    assert again.getvalue().strip() == token
    rotated = StringIO()
    call_command("create_api_client", "ci-bot", "--rotate", stdout=rotated)
    assert rotated.getvalue().strip() != token


def test_create_api_client_refuses_a_staff_account(support_user):
    with pytest.raises(CommandError, match="staff"):
        call_command("create_api_client", support_user.username, stdout=StringIO())


def test_load_runbooks_loads_markdown_and_skips_unchanged_files(tmp_path):
    (tmp_path / "pool.md").write_text("# Pool runbook\n\n## Symptoms\nConnection is not available\n\n## Fix\nStop the batch job.\n")
    out = StringIO()
    call_command("load_runbooks", str(tmp_path), "--prefix", "runbooks/", stdout=out)
    assert "loaded 1 documents" in out.getvalue()
    assert KnowledgeDocument.objects.get(path="runbooks/pool.md").title
    assert KnowledgeChunk.objects.filter(document__path="runbooks/pool.md").count() >= 2
    out = StringIO()
    call_command("load_runbooks", str(tmp_path), "--prefix", "runbooks/", stdout=out)
    assert "1 unchanged" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("load_runbooks", str(tmp_path / "missing"))


def test_bootstrap_demo_prepares_users_knowledge_and_prints_curl_commands():
    out = StringIO()
    call_command("bootstrap_demo", "--port", "8123", stdout=out)
    text = out.getvalue()
    token = Token.objects.get(user__username="demo-client").key
    assert f"Authorization: Token {token}" in text and "curl -s -X POST http://127.0.0.1:8123/api/chat" in text
    assert KnowledgeDocument.objects.count() >= 10
    support = Group.objects.get(name="support_staff").user_set.get(username="support")
    assert support.is_staff and not support.is_superuser
    assert ChatSession.objects.count() == 0  # it creates no runs by itself
