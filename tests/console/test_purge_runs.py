"""`manage.py purge_runs`: the documented retention command, the only way audit rows are deleted."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from diagnosis.models import AgentStep, CaseLibraryEntry, ChatSession, DiagnosisRun, RunEvent, ToolInvocation
from diagnosis.services.feedback import case_upsert
from tests.console.scenarios import evidence_retry_run, happy_run
from tests.factories import ChatSessionFactory, DiagnosisRunFactory

pytestmark = pytest.mark.django_db


def age(run, days):
    DiagnosisRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=days))
    ChatSession.objects.filter(pk=run.session_id).update(created_at=timezone.now() - timedelta(days=days),
                                                          last_message_at=timezone.now() - timedelta(days=days))


@pytest.fixture
def history(alice):
    old = evidence_retry_run(owner=alice)
    age(old, 100)
    case_upsert(run=old, user=None)
    RunEvent.objects.create(run=old, kind="status", data={"status": "SUCCESS"})
    recent = happy_run(owner=alice)
    stuck = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), status=DiagnosisRun.Status.RUNNING)
    age(stuck, 100)
    shared = ChatSessionFactory(owner=alice)
    old_in_shared = happy_run(owner=alice, session=shared)
    age(old_in_shared, 100)
    happy_run(owner=alice, session=shared)  # a recent run keeps the shared session alive
    return {"old": old, "recent": recent, "stuck": stuck, "old_in_shared": old_in_shared, "shared": shared}


def purge(*args) -> str:
    out = StringIO()
    call_command("purge_runs", *args, stdout=out)
    return out.getvalue()


def test_a_dry_run_counts_and_deletes_nothing(history):
    before = (DiagnosisRun.objects.count(), AgentStep.objects.count(), ToolInvocation.objects.count())
    output = purge("--older-than-days", "90", "--dry-run")
    assert "  2 runs" in output and "  14 agent steps" in output and "  3 tool invocations" in output
    assert "  1 run events" in output and "  1 cases" in output and "  1 sessions left without runs" in output
    assert "Nothing was deleted." in output
    assert (DiagnosisRun.objects.count(), AgentStep.objects.count(), ToolInvocation.objects.count()) == before


def test_it_deletes_finished_runs_older_than_n_days_with_their_audit_rows(history):
    output = purge("--older-than-days", "90", "--batch-size", "1")
    assert "  2 runs" in output and "  1 sessions left without runs" in output
    old, old_in_shared = history["old"], history["old_in_shared"]
    assert not DiagnosisRun.objects.filter(pk__in=[old.pk, old_in_shared.pk]).exists()
    assert not AgentStep.objects.filter(run_id__in=[old.pk, old_in_shared.pk]).exists()
    assert not ToolInvocation.objects.filter(run_id__in=[old.pk, old_in_shared.pk]).exists()
    assert not RunEvent.objects.exists() and not CaseLibraryEntry.objects.exists()
    assert not ChatSession.objects.filter(pk=old.session_id).exists()
    # kept: the recent run, a run still RUNNING however old, and a session with a recent run
    assert DiagnosisRun.objects.filter(pk__in=[history["recent"].pk, history["stuck"].pk]).count() == 2
    assert ChatSession.objects.filter(pk=history["shared"].pk).exists()
    assert history["recent"].steps.count() == 5


def test_keep_sessions_leaves_emptied_sessions(history):
    purge("--older-than-days", "90", "--keep-sessions")
    assert ChatSession.objects.filter(pk=history["old"].session_id).exists()


@pytest.mark.parametrize("args", [["--older-than-days", "0"], ["--older-than-days", "30", "--batch-size", "0"]])
def test_it_refuses_nonsense_arguments(db, args):
    with pytest.raises(CommandError):
        purge(*args)
