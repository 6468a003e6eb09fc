"""Who may enter the console and what they may do there: every audit row is read-only for everyone,
feedback is the only write and needs the give-feedback right."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse
from rest_framework.authtoken.models import Token

from diagnosis.models import AgentStep, CaseLibraryEntry, ChatSession, DiagnosisRun, ToolInvocation
from tests.console.scenarios import happy_run

pytestmark = pytest.mark.django_db

AUDIT_MODELS = (ChatSession, DiagnosisRun, AgentStep, ToolInvocation, CaseLibraryEntry)


@pytest.fixture
def run(alice):
    return happy_run(owner=alice)


def detail_url(run):
    return reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk])


def feedback_url(run):
    return reverse("admin:diagnosis_diagnosisrun_feedback", args=[run.pk])


def test_an_anonymous_visitor_is_sent_to_the_login_page(client, run):
    response = client.get(detail_url(run))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_an_outsider_who_is_logged_in_but_not_staff_is_redirected_to_the_login_page(client, outsider, run):
    client.force_login(outsider)
    for url in (reverse("admin:index"), reverse("admin:diagnosis_diagnosisrun_changelist"), detail_url(run)):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url


def test_an_api_client_token_does_not_open_the_admin(client, outsider, run):
    token = Token.objects.create(user=outsider)
    response = client.get(reverse("admin:diagnosis_diagnosisrun_changelist"), HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_an_outsider_cannot_post_feedback_through_the_console(client, outsider, run):
    client.force_login(outsider)
    response = client.post(feedback_url(run), {"feedback": "useful"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login"))
    assert DiagnosisRun.objects.get(pk=run.pk).feedback is None


def test_a_staff_account_without_a_role_sees_no_audit_data(client, db, run):
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="temp", is_staff=True))
    assert client.get(reverse("admin:diagnosis_diagnosisrun_changelist")).status_code == 403
    assert client.get(detail_url(run)).status_code == 403


@pytest.mark.parametrize("role", ["support_staff", "auditor"])
def test_both_roles_read_the_run_list_and_the_run_detail_page(client, request, run, role):
    client.force_login(request.getfixturevalue(role))
    assert client.get(reverse("admin:diagnosis_diagnosisrun_changelist")).status_code == 200
    response = client.get(detail_url(run))
    assert response.status_code == 200
    assert run.run_id in response.content.decode()


def test_the_auditor_sees_no_feedback_form(auditor_client, run):
    page = auditor_client.get(detail_url(run)).content.decode()
    assert 'id="feedback-form"' not in page
    assert "Your role can read runs but not rate them." in page


def test_an_auditor_cannot_submit_feedback(auditor_client, run):
    response = auditor_client.post(feedback_url(run), {"feedback": "useful", "comment": "looks right"})
    assert response.status_code == 403
    stored = DiagnosisRun.objects.get(pk=run.pk)
    assert stored.feedback is None and stored.feedback_comment == ""
    assert not CaseLibraryEntry.objects.filter(run=run).exists()


def test_support_staff_give_feedback_through_the_feedback_service(staff_client, support_staff, run):
    response = staff_client.post(feedback_url(run), {"feedback": "useful", "comment": "pool exhausted indeed"})
    assert response.status_code == 302
    assert response["Location"].endswith(detail_url(run) + "#feedback")
    stored = DiagnosisRun.objects.get(pk=run.pk)
    assert (stored.feedback, stored.feedback_comment, stored.feedback_by) == ("useful", "pool exhausted indeed", support_staff)
    assert stored.status == DiagnosisRun.Status.SUCCESS
    case = CaseLibraryEntry.objects.get(run=run)  # the same service as POST /api/feedback upserts the case
    assert case.created_by == support_staff
    page = staff_client.get(response["Location"]).content.decode()
    assert "Feedback saved: Useful. Its case is candidate; support staff publish candidates." in page


def test_the_latest_feedback_wins_and_not_useful_removes_the_case(staff_client, run):
    staff_client.post(feedback_url(run), {"feedback": "useful"})
    staff_client.post(feedback_url(run), {"feedback": "not_useful", "comment": "wrong service"})
    stored = DiagnosisRun.objects.get(pk=run.pk)
    assert (stored.feedback, stored.feedback_comment) == ("not_useful", "wrong service")
    assert not CaseLibraryEntry.objects.filter(run=run).exists()


def test_feedback_is_logged_in_the_admin_history(staff_client, support_staff, run):
    from django.contrib.admin.models import LogEntry

    staff_client.post(feedback_url(run), {"feedback": "useful"})
    entry = LogEntry.objects.get(object_id=str(run.pk))
    assert entry.user == support_staff and entry.change_message == "Feedback: useful"


def test_feedback_on_an_unfinished_run_is_refused_and_nothing_is_stored(staff_client, alice):
    from tests.factories import DiagnosisRunFactory

    running = DiagnosisRunFactory(session__owner=alice, status=DiagnosisRun.Status.RUNNING)
    page = staff_client.get(detail_url(running)).content.decode()
    assert "Feedback opens once the run has finished" in page and 'id="feedback-form"' not in page
    response = staff_client.post(feedback_url(running), {"feedback": "useful"}, follow=True)
    assert "Feedback not saved: run " in response.content.decode()
    assert DiagnosisRun.objects.get(pk=running.pk).feedback is None


def test_an_invalid_feedback_value_is_refused(staff_client, run):
    response = staff_client.post(feedback_url(run), {"feedback": "brilliant"}, follow=True)
    assert "Feedback not saved (feedback:" in response.content.decode()
    assert DiagnosisRun.objects.get(pk=run.pk).feedback is None


def test_the_feedback_url_only_accepts_post(staff_client, run):
    assert staff_client.get(feedback_url(run)).status_code == 405


def test_support_staff_cannot_change_a_run(staff_client, run):
    before = DiagnosisRun.objects.values().get(pk=run.pk)
    response = staff_client.post(detail_url(run), {"status": "FAILED", "answer": "tampered", "degraded": "on"})
    assert response.status_code == 405
    assert DiagnosisRun.objects.values().get(pk=run.pk) == before


@pytest.mark.parametrize("model", [AgentStep, ToolInvocation, ChatSession, CaseLibraryEntry])
def test_support_staff_cannot_change_a_step_an_invocation_a_session_or_a_case(staff_client, run, model):
    from diagnosis.services.feedback import case_upsert

    case_upsert(run=run, user=None)
    obj = model.objects.filter(**({"run": run} if model is not ChatSession else {"pk": run.session_id})).first()
    before = model.objects.values().get(pk=obj.pk)
    name = model._meta.model_name
    change = reverse(f"admin:diagnosis_{name}_change", args=[obj.pk])
    page = staff_client.get(change)
    assert page.status_code == 200  # readable …
    assert 'name="_save"' not in page.content.decode()  # … with no save button
    assert staff_client.post(change, {"node": "tampered", "status": "ERROR", "title": "x"}).status_code == 403
    assert model.objects.values().get(pk=obj.pk) == before


@pytest.mark.parametrize("model", AUDIT_MODELS)
def test_nobody_can_add_or_delete_audit_rows_in_the_admin_not_even_a_superuser(client, superuser, run, model):
    from diagnosis.services.feedback import case_upsert

    case_upsert(run=run, user=None)
    client.force_login(superuser)
    name = model._meta.model_name
    obj = model.objects.first()
    assert client.get(reverse(f"admin:diagnosis_{name}_add")).status_code == 403
    assert client.post(reverse(f"admin:diagnosis_{name}_delete", args=[obj.pk]), {"post": "yes"}).status_code == 403
    assert model.objects.filter(pk=obj.pk).exists()


@pytest.mark.parametrize("model", AUDIT_MODELS)
def test_every_audit_admin_refuses_add_change_and_delete_for_every_role(support_staff, auditor, superuser, model):
    model_admin = admin.site._registry[model]
    for user in (support_staff, auditor, superuser):
        request = RequestFactory().get("/admin/")
        request.user = user
        assert not model_admin.has_add_permission(request)
        assert not model_admin.has_change_permission(request)
        assert not model_admin.has_delete_permission(request)
        assert model_admin.has_view_permission(request)
        actions = set(model_admin.get_actions(request))  # no bulk delete either
        if model is CaseLibraryEntry and user is not auditor:
            assert actions == {"publish_cases", "withdraw_cases"}  # publishing is the one write on cases
        else:
            assert not actions


def test_the_tokens_and_cost_page_needs_a_staff_account_with_view_permission(client, outsider, auditor_client):
    url = reverse("admin:diagnosis_diagnosisrun_usage")
    assert auditor_client.get(url).status_code == 200
    client.force_login(outsider)  # the same test client, now as an API client
    assert client.get(url).status_code == 302  # to the login page
