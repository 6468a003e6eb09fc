"""GET /api/diagnosis/{sessionId}/runs"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from diagnosis.models import DiagnosisRun
from tests.factories import ChatSessionFactory, DiagnosisRunFactory

pytestmark = pytest.mark.django_db


def runs_url(session_id: str) -> str:
    return reverse("diagnosis-run-list", kwargs={"session_id": session_id})


def make_runs(session, count: int) -> list[DiagnosisRun]:
    """`count` runs one minute apart, oldest first."""
    start = timezone.now() - timedelta(days=1)
    runs = []
    for i in range(count):
        run = DiagnosisRunFactory(session=session, question=f"question {i}", self_evaluation={"big": "x" * 1000},
                                  orchestration_trace={"version": "stategraph-v1"})
        DiagnosisRun.objects.filter(pk=run.pk).update(created_at=start + timedelta(minutes=i))
        runs.append(run)
    return runs


@pytest.fixture
def alice_session(alice):
    return ChatSessionFactory(owner=alice)


def test_it_lists_the_sessions_runs_newest_first(api, alice, alice_session):
    runs = make_runs(alice_session, 3)
    ChatSessionFactory(owner=alice)  # another session's runs never appear
    DiagnosisRunFactory(session=ChatSessionFactory(owner=alice))
    api.force_authenticate(alice)
    body = api.get(runs_url(alice_session.session_id)).json()
    assert body["sessionId"] == alice_session.session_id
    assert [r["runId"] for r in body["results"]] == [r.run_id for r in reversed(runs)]
    assert (body["pageSize"], body["next"], body["previous"]) == (20, None, None)


def test_its_items_leave_out_the_orchestration_trace_and_the_self_evaluation(api, alice, alice_session):
    make_runs(alice_session, 1)
    api.force_authenticate(alice)
    item = api.get(runs_url(alice_session.session_id)).json()["results"][0]
    assert set(item) == {
        "runId", "agentFlow", "strategy", "status", "question", "answer", "degraded", "effectiveVerdict",
        "feedback", "feedbackAt", "errorCode", "durationMs", "stepCount", "toolCount", "promptTokens",
        "completionTokens", "modelName", "createdAt", "startedAt", "finishedAt", "links",
    }
    trace = reverse("diagnosis-trace", kwargs={"session_id": alice_session.session_id})
    assert item["links"] == {"trace": f"{trace}?runId={item['runId']}"}


@pytest.mark.parametrize("count", [1, 100])
def test_it_costs_two_queries_and_never_reads_the_heavy_columns(api, alice, alice_session, count,
                                                                django_assert_num_queries):
    make_runs(alice_session, count)
    api.force_authenticate(alice)
    with django_assert_num_queries(2) as captured:  # session (visibility inside), one page of runs
        response = api.get(runs_url(alice_session.session_id), {"pageSize": 100})
    assert len(response.json()["results"]) == count
    sql = " ".join(q["sql"] for q in captured.captured_queries)
    assert "orchestration_trace" not in sql and "self_evaluation" not in sql


def test_it_pages_with_a_cursor_through_every_run_exactly_once(api, alice, alice_session, django_assert_num_queries):
    runs = make_runs(alice_session, 25)
    api.force_authenticate(alice)
    first = api.get(runs_url(alice_session.session_id)).json()
    assert len(first["results"]) == 20 and first["previous"] is None and first["next"]
    with django_assert_num_queries(2):
        second = api.get(first["next"]).json()
    assert len(second["results"]) == 5 and second["next"] is None and second["previous"]
    seen = [r["runId"] for r in first["results"] + second["results"]]
    assert seen == [r.run_id for r in reversed(runs)]


def test_it_honours_a_smaller_page_size(api, alice, alice_session):
    make_runs(alice_session, 5)
    api.force_authenticate(alice)
    body = api.get(runs_url(alice_session.session_id), {"pageSize": 2}).json()
    assert len(body["results"]) == 2 and body["pageSize"] == 2 and "pageSize=2" in body["next"]


@pytest.mark.parametrize("page_size", ["101", "0", "-1", "many"])
def test_it_rejects_a_page_size_outside_one_to_one_hundred_naming_page_size(api, alice, alice_session, page_size):
    api.force_authenticate(alice)
    response = api.get(runs_url(alice_session.session_id), {"pageSize": page_size})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
    assert response.json()["error"]["field"] == "pageSize"


def test_it_accepts_the_page_size_cap_itself(api, alice, alice_session):
    make_runs(alice_session, 3)
    api.force_authenticate(alice)
    response = api.get(runs_url(alice_session.session_id), {"pageSize": 100})
    assert response.status_code == 200
    assert (response.json()["pageSize"], len(response.json()["results"]), response.json()["next"]) == (100, 3, None)


def test_it_rejects_a_forged_cursor_naming_cursor(api, alice, alice_session):
    api.force_authenticate(alice)
    response = api.get(runs_url(alice_session.session_id), {"cursor": "not-a-cursor"})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "cursor"


def test_it_returns_an_empty_page_for_a_session_without_runs(api, alice, alice_session):
    api.force_authenticate(alice)
    assert api.get(runs_url(alice_session.session_id)).json()["results"] == []


def test_it_returns_404_for_another_clients_session(api, bob, alice_session):
    make_runs(alice_session, 1)
    api.force_authenticate(bob)
    response = api.get(runs_url(alice_session.session_id))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_it_returns_404_for_a_session_that_does_not_exist(api, alice):
    api.force_authenticate(alice)
    response = api.get(runs_url("no-such-session"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found" and "results" not in response.json()


def test_it_rejects_a_malformed_session_id(api, alice):
    api.force_authenticate(alice)
    response = api.get(runs_url("_bad"))
    assert response.status_code == 400 and response.json()["error"]["field"] == "sessionId"


def test_it_lets_support_staff_and_auditors_list_anyones_runs(api, support_staff, auditor, alice_session):
    make_runs(alice_session, 2)
    for user in (support_staff, auditor):
        api.force_authenticate(user)
        assert len(api.get(runs_url(alice_session.session_id)).json()["results"]) == 2


def test_it_returns_401_without_credentials(api, alice_session):
    make_runs(alice_session, 1)
    response = api.get(runs_url(alice_session.session_id))
    assert response.status_code == 401
    assert response.json() == {"error": {"code": "not_authenticated", "message": response.json()["error"]["message"]}}
