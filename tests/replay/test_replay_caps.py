"""Replays and regression replays count against CHAT_MAX_ACTIVE_RUNS like every other path that starts a run."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from diagnosis.models import ChatSession, DiagnosisRun
from tests.factories import ChatSessionFactory, DiagnosisRunFactory
from tests.replay.test_regress import rate_useful, staff  # noqa: F401
from traces.regress import regression_user

pytestmark = pytest.mark.django_db(transaction=True)


def fill_the_cap(user, settings) -> None:
    settings.CHAT_MAX_ACTIVE_RUNS = 2
    for i in range(2):
        DiagnosisRunFactory(session=ChatSessionFactory(owner=user), question=f"in progress {i}")  # PENDING, fresh


def test_a_replay_over_the_cap_is_a_429_and_creates_no_run(alice_api, alice, recorded, settings):
    original = recorded("payment-db-pool-exhaustion")
    fill_the_cap(alice, settings)
    runs_before, sessions_before = DiagnosisRun.objects.count(), ChatSession.objects.count()
    response = alice_api.post(f"/api/runs/{original.run_id}/replay", {"model": "offline"}, format="json")
    assert response.status_code == 429, response.content
    error = response.json()["error"]
    assert error["code"] == "too_many_active_runs" and error["field"] == "runId"
    assert "at most 2 may run at once" in error["message"]
    assert response["Retry-After"]
    assert (DiagnosisRun.objects.count(), ChatSession.objects.count()) == (runs_before, sessions_before)


def test_a_replay_under_the_cap_is_accepted(alice_api, alice, recorded, settings, eager_tasks):
    original = recorded("payment-db-pool-exhaustion")
    settings.CHAT_MAX_ACTIVE_RUNS = 2
    DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), question="one in progress")
    response = alice_api.post(f"/api/runs/{original.run_id}/replay", {"model": "offline"}, format="json")
    assert response.status_code == 202, response.content


def test_the_replay_command_over_the_cap_is_a_one_line_refusal(alice, recorded, settings):
    original = recorded("payment-db-pool-exhaustion")
    fill_the_cap(alice, settings)
    with pytest.raises(CommandError, match="runId: 2 runs are still in progress; at most 2 may run at once"):
        call_command("replay_run", original.run_id, "--model", "offline", "--wait", "1")
    assert not DiagnosisRun.objects.filter(replay_of=original).exists()


def test_regress_waits_for_a_slot_and_gives_up_when_none_frees(staff, recorded, settings, tmp_path):  # noqa: F811
    source = recorded("payment-db-pool-exhaustion")
    rate_useful(source, staff)
    call_command("regression_set", "capped", "--useful")
    fill_the_cap(regression_user(), settings)
    with pytest.raises(CommandError, match="at most 2 may run at once"):
        call_command("regress", "capped", "--model", "offline", "--wait", "1.5", "--out", str(tmp_path))
    assert not DiagnosisRun.objects.filter(replay_of=source).exists()
