"""POST /api/feedback"""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.crypto import get_random_string
from rest_framework.test import APIClient

from diagnosis.models import CaseLibraryEntry, DiagnosisRun
from tests.factories import ChatSessionFactory, UserFactory
from tests.traces.conftest import VERIFIED_CLAIM, make_run

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery staple"


def give(api, user, run, feedback="useful", *, session_id=None, **extra):
    api.force_authenticate(user)
    payload = {"sessionId": session_id or run.session.session_id, "runId": run.run_id, "feedback": feedback, **extra}
    return api.post(reverse("feedback"), payload, format="json")


def test_it_records_the_owners_feedback_with_author_and_time(api, alice, alice_run):
    response = give(api, alice, alice_run, "useful", comment="found it fast")
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "sessionId": alice_run.session.session_id, "runId": alice_run.run_id, "status": "SUCCESS",
        "feedback": "useful", "feedbackComment": "found it fast", "feedbackBy": "alice",
        "feedbackAt": body["feedbackAt"], "caseExists": True, "caseStatus": "CANDIDATE",
    }
    alice_run.refresh_from_db()
    assert (alice_run.feedback, alice_run.feedback_comment, alice_run.feedback_by) == ("useful", "found it fast", alice)
    assert alice_run.feedback_at is not None


def test_it_never_changes_the_run_status(api, alice):
    for status in (DiagnosisRun.Status.SUCCESS, DiagnosisRun.Status.FAILED):
        run = make_run(owner=alice, status=status)
        for feedback in ("useful", "not_useful"):
            response = give(api, alice, run, feedback)
            if status == DiagnosisRun.Status.FAILED and feedback == "useful":
                assert response.status_code == 400
            else:
                assert response.json()["status"] == status
            run.refresh_from_db()
            assert run.status == status


@pytest.mark.parametrize("status, evaluation", [
    (DiagnosisRun.Status.FAILED, None),
    (DiagnosisRun.Status.SUCCESS, {}),
    (DiagnosisRun.Status.SUCCESS, {"verifier_evaluation": {"verified_executor_output": {"claims": []}}}),
])
def test_only_a_success_run_with_a_verified_claim_can_be_rated_useful(api, alice, status, evaluation):
    fields = {} if evaluation is None else {"self_evaluation": evaluation}
    run = make_run(owner=alice, status=status, **fields)
    response = give(api, alice, run, "useful")
    assert response.status_code == 400
    assert response.json()["error"] | {"message": ""} == {"code": "not_rateable_useful", "field": "feedback", "message": ""}
    run.refresh_from_db()
    assert run.feedback is None and not CaseLibraryEntry.objects.filter(run=run).exists()
    error = response.json()["error"]
    assert error["code"] == "not_rateable_useful" and error["field"] == "feedback"
    assert "Only a SUCCESS run with at least one verified claim" in error["message"]
    assert not CaseLibraryEntry.objects.filter(run=run).exists()
    run.refresh_from_db()
    assert run.feedback is None


def test_useful_feedback_puts_the_run_in_the_case_library(api, alice, alice_run):
    give(api, alice, alice_run, "useful")
    case = CaseLibraryEntry.objects.get(run=alice_run)
    # A candidate holding only the verified claims: never the asker's question or the answer.
    assert (case.session_id, case.question, case.answer) == (alice_run.session.session_id, "", "")
    assert case.status == "CANDIDATE" and case.source_run_id == alice_run.run_id
    assert case.claims == [VERIFIED_CLAIM]
    assert case.root_cause_summary == "payment-service exhausts its DB connection pool."
    assert case.tags == ["payment-service"]
    assert case.created_by == alice


def test_only_support_staff_publish_a_case(api, alice, support_staff, alice_run):
    give(api, alice, alice_run, "useful")
    api.force_authenticate(alice)
    refused = api.post(f"/api/cases/{alice_run.run_id}/publish", {}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    api.force_authenticate(support_staff)
    published = api.post(f"/api/cases/{alice_run.run_id}/publish", {}, format="json")
    assert published.status_code == 200
    assert published.json()["status"] == "PUBLISHED" and published.json()["publishedBy"] == support_staff.username
    # The owner's later not_useful does not unpublish what staff decided.
    give(api, alice, alice_run, "not_useful")
    assert CaseLibraryEntry.objects.get(run=alice_run).status == "PUBLISHED"
    api.force_authenticate(support_staff)
    withdrawn = api.post(f"/api/cases/{alice_run.run_id}/publish", {"publish": False}, format="json")
    assert withdrawn.json()["status"] == "CANDIDATE"
    assert api.post("/api/cases/run-missing/publish", {}, format="json").status_code == 404


def test_not_useful_feedback_removes_the_case(api, alice, alice_run):
    give(api, alice, alice_run, "useful")
    response = give(api, alice, alice_run, "not_useful")
    assert response.json()["caseExists"] is False
    assert not CaseLibraryEntry.objects.filter(run=alice_run).exists()


def test_the_latest_feedback_wins(api, alice, support_staff, alice_run):
    give(api, alice, alice_run, "not_useful", comment="wrong service")
    give(api, support_staff, alice_run, "useful", comment="actually right")
    alice_run.refresh_from_db()
    assert (alice_run.feedback, alice_run.feedback_comment, alice_run.feedback_by) == (
        "useful", "actually right", support_staff)
    assert CaseLibraryEntry.objects.filter(run=alice_run).count() == 1


def test_useful_twice_keeps_one_case_and_its_first_author(api, alice, support_staff, alice_run):
    give(api, alice, alice_run, "useful")
    give(api, support_staff, alice_run, "useful")
    case = CaseLibraryEntry.objects.get(run=alice_run)
    assert case.created_by == alice


def test_a_later_feedback_without_comment_clears_the_old_comment(api, alice, alice_run):
    give(api, alice, alice_run, "useful", comment="first")
    give(api, alice, alice_run, "useful")
    alice_run.refresh_from_db()
    assert alice_run.feedback_comment == ""


@pytest.mark.parametrize("status", [DiagnosisRun.Status.PENDING, DiagnosisRun.Status.RUNNING])
def test_it_refuses_feedback_on_an_unfinished_run_with_409(api, alice, status):
    run = make_run(owner=alice, status=status, answer="")
    response = give(api, alice, run, "useful")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "run_not_finished"
    run.refresh_from_db()
    assert (run.status, run.feedback) == (status, None)
    assert not CaseLibraryEntry.objects.filter(run=run).exists()


def test_it_returns_404_for_another_clients_run(api, bob, alice_run):
    response = give(api, bob, alice_run)
    assert response.status_code == 404
    alice_run.refresh_from_db()
    assert alice_run.feedback is None


def test_it_returns_404_when_the_run_is_not_in_that_session(api, alice, alice_run):
    other = ChatSessionFactory(owner=alice)
    response = give(api, alice, alice_run, session_id=other.session_id)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    alice_run.refresh_from_db()
    assert alice_run.feedback is None and not CaseLibraryEntry.objects.filter(run=alice_run).exists()


def test_support_staff_may_rate_anyones_run(api, support_staff, alice_run):
    response = give(api, support_staff, alice_run, "useful")
    assert response.status_code == 200 and response.json()["feedbackBy"] == "charlie"
    alice_run.refresh_from_db()
    assert (alice_run.feedback, alice_run.feedback_by) == ("useful", support_staff)
    assert CaseLibraryEntry.objects.get(run=alice_run).created_by == support_staff


def test_a_superuser_may_rate_anyones_run(api, alice_run):
    root = UserFactory(username="root", is_superuser=True)
    response = give(api, root, alice_run, "not_useful")
    assert response.status_code == 200
    assert (response.json()["feedback"], response.json()["feedbackBy"]) == ("not_useful", "root")
    alice_run.refresh_from_db()
    assert (alice_run.feedback, alice_run.feedback_by) == ("not_useful", root)


def test_an_auditor_gets_403_on_another_clients_run(api, auditor, alice_run):
    response = give(api, auditor, alice_run)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    alice_run.refresh_from_db()
    assert alice_run.feedback is None


def test_an_auditor_may_still_rate_their_own_run(api, auditor):
    run = make_run(owner=auditor)
    response = give(api, auditor, run)
    assert response.status_code == 200
    assert (response.json()["runId"], response.json()["feedbackBy"]) == (run.run_id, "dana")
    run.refresh_from_db()
    assert (run.feedback, run.feedback_by) == ("useful", auditor)


def test_it_rejects_a_comment_longer_than_2000_characters_naming_comment(api, alice, alice_run):
    response = give(api, alice, alice_run, comment="x" * 2001)
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "comment"
    assert give(api, alice, alice_run, comment="x" * 2000).status_code == 200


def test_it_treats_a_null_comment_as_empty(api, alice, alice_run):
    assert give(api, alice, alice_run, comment=None).json()["feedbackComment"] == ""


@pytest.mark.parametrize(("payload", "field"), [
    ({"feedback": "great"}, "feedback"),
    ({"feedback": None}, "feedback"),
    ({"runId": "run-nope"}, "runId"),
    ({"runId": None}, "runId"),
    ({"sessionId": "/etc/passwd"}, "sessionId"),
])
def test_it_rejects_invalid_input_naming_the_field(api, alice, alice_run, payload, field):
    api.force_authenticate(alice)
    body = {"sessionId": alice_run.session.session_id, "runId": alice_run.run_id, "feedback": "useful", **payload}
    response = api.post(reverse("feedback"), body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
    assert response.json()["error"]["field"] == field
    alice_run.refresh_from_db()
    assert alice_run.feedback is None


def test_it_rejects_a_request_without_feedback(api, alice, alice_run):
    api.force_authenticate(alice)
    response = api.post(reverse("feedback"), {"sessionId": alice_run.session.session_id, "runId": alice_run.run_id},
                        format="json")
    assert response.status_code == 400 and response.json()["error"]["field"] == "feedback"
    alice_run.refresh_from_db()
    assert alice_run.feedback is None


def test_it_returns_401_without_credentials(api, alice_run):
    body = {"sessionId": alice_run.session.session_id, "runId": alice_run.run_id, "feedback": "useful"}
    response = api.post(reverse("feedback"), body, format="json")
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    alice_run.refresh_from_db()
    assert alice_run.feedback is None and not CaseLibraryEntry.objects.filter(run=alice_run).exists()


def test_a_session_authenticated_post_without_a_csrf_token_gets_403(alice, alice_run):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="alice", password=PASSWORD)
    body = {"sessionId": alice_run.session.session_id, "runId": alice_run.run_id, "feedback": "useful"}
    response = client.post(reverse("feedback"), body, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    alice_run.refresh_from_db()
    assert alice_run.feedback is None


def test_a_session_authenticated_post_with_a_csrf_token_is_accepted(alice, alice_run):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="alice", password=PASSWORD)
    secret = get_random_string(32)
    client.cookies["csrftoken"] = secret
    body = {"sessionId": alice_run.session.session_id, "runId": alice_run.run_id, "feedback": "useful"}
    response = client.post(reverse("feedback"), body, format="json", HTTP_X_CSRFTOKEN=secret)
    assert response.status_code == 200
