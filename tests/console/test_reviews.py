"""The review queue: which runs need review, reviews as recorded rows (who, when) written through the
reviews service from a run's page, visible to auditors, refused to them as writers."""

from __future__ import annotations

import pytest
from django.urls import reverse

from diagnosis.models import DiagnosisRun, RunReview, RunReviewEntry
from diagnosis.services import reviews
from tests.console.scenarios import evidence_retry_run, fallback_run, happy_run
from tests.factories import DiagnosisRunFactory

pytestmark = pytest.mark.django_db
QUEUE = reverse("admin:diagnosis_diagnosisrun_review_queue")


@pytest.fixture
def runs(alice, settings):
    settings.REVIEW_SAMPLE_EVERY = 10_000  # no run falls in the sample unless a test says so
    return {
        "happy": happy_run(owner=alice),
        "low": evidence_retry_run(owner=alice),  # degraded, verdict LOW_CONFID
        "fallback": fallback_run(owner=alice),  # degraded
        "failed": DiagnosisRunFactory(session__owner=alice, status="FAILED", error_code="missing_answer"),
        "not_useful": happy_run(owner=alice, question="Why is checkout slow?"),
        "running": DiagnosisRunFactory(session__owner=alice, status="RUNNING", degraded=True),
    }


def queued(client, query="") -> list[str]:
    response = client.get(QUEUE + query)
    assert response.status_code == 200
    return [run.run_id for run in response.context["rows"]]


def review_url(run) -> str:
    return reverse("admin:diagnosis_diagnosisrun_review", args=[run.pk])


def test_the_queue_lists_degraded_failed_low_confidence_not_useful_and_sampled_runs(staff_client, runs, settings):
    DiagnosisRun.objects.filter(pk=runs["not_useful"].pk).update(feedback="not_useful")
    listed = set(queued(staff_client))
    assert listed == {runs[k].run_id for k in ("low", "fallback", "failed", "not_useful")}
    settings.REVIEW_SAMPLE_EVERY = runs["happy"].pk  # the happy run's id is now a multiple: sampled
    assert runs["happy"].run_id in queued(staff_client)
    assert runs["running"].run_id not in queued(staff_client)  # not finished: nothing to review yet


def test_a_review_is_assigned_labelled_and_resolved_with_every_change_recorded(staff_client, support_staff, runs):
    run = runs["fallback"]
    response = staff_client.post(review_url(run), {"assignee": support_staff.pk, "reasons": ["missing_evidence"],
                                                   "resolution": "", "note": "looks like the pool again"})
    assert response.status_code == 302 and response["Location"].endswith("#review")
    review = RunReview.objects.get(run=run)
    assert review.status == "open" and review.trigger == "degraded" and review.assignee == support_staff
    assert review.reasons == ["missing_evidence"] and review.created_by == support_staff
    assert queued(staff_client, "?state=mine") == [run.run_id]
    staff_client.post(review_url(run), {"assignee": support_staff.pk, "reasons": ["wrong_root_cause", "bad_citation"],
                                        "resolution": "answer_wrong", "note": "looks like the pool again"})
    review.refresh_from_db()
    assert review.status == "resolved" and review.resolution == "answer_wrong" and review.resolved_by == support_staff
    assert review.resolved_at is not None
    assert review.reasons == ["wrong_root_cause", "bad_citation"]
    entries = list(RunReviewEntry.objects.filter(review=review).order_by("id"))
    assert [e.action for e in entries] == ["opened", "updated", "resolved"]
    assert all(e.actor == support_staff and e.created_at for e in entries)
    assert entries[2].changes == {"reasons": ["wrong_root_cause", "bad_citation"], "resolution": "answer_wrong"}
    assert run.run_id not in queued(staff_client) and queued(staff_client, "?state=resolved") == [run.run_id]
    # reopening puts it back in the queue
    staff_client.post(review_url(run), {"assignee": "", "reasons": ["wrong_root_cause"], "resolution": "", "note": ""})
    review.refresh_from_db()
    assert review.status == "open" and review.assignee is None and review.resolved_at is None
    assert run.run_id in queued(staff_client, "?state=unassigned")


def test_bad_review_input_is_refused_and_nothing_changes(staff_client, runs):
    run = runs["low"]
    response = staff_client.post(review_url(run), {"reasons": ["made_up"], "resolution": ""}, follow=True)
    assert "Review not saved (reasons:" in response.content.decode()
    response = staff_client.post(review_url(run), {"reasons": [], "resolution": "answer_wrong"}, follow=True)
    assert "say why the answer is wrong" in response.content.decode()
    assert not RunReview.objects.filter(run=run, status="resolved").exists()
    assert staff_client.get(review_url(run)).status_code == 405


def test_auditors_see_reviews_and_their_history_but_cannot_write(auditor, support_staff, runs):
    from django.test import Client

    staff_client, auditor_client = Client(), Client()
    staff_client.force_login(support_staff)
    auditor_client.force_login(auditor)
    run = runs["failed"]
    staff_client.post(review_url(run), {"reasons": ["other"], "resolution": "not_actionable", "note": "broker blip"})
    page = auditor_client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk])).content.decode()
    assert 'id="review-history"' in page and "charlie" in page and 'id="review-form"' not in page
    assert auditor_client.post(review_url(run), {"reasons": ["other"], "resolution": ""}).status_code == 403
    review = RunReview.objects.get(run=run)
    listing = auditor_client.get(reverse("admin:diagnosis_runreview_changelist"))
    assert listing.status_code == 200 and run.run_id in listing.content.decode()
    detail = auditor_client.get(reverse("admin:diagnosis_runreview_change", args=[review.pk])).content.decode()
    assert "resolved" in detail and "not_actionable" in detail
    assert auditor_client.get(QUEUE).status_code == 200


def test_the_service_refuses_non_reviewers_and_inactive_assignees(auditor, support_staff, runs):
    with pytest.raises(reviews.ReviewNotAllowed):
        reviews.review_open(run=runs["low"], user=auditor)
    support_staff.is_active = False
    support_staff.save()
    from tests.factories import UserFactory
    from django.contrib.auth.models import Group

    lead = UserFactory(username="lead", is_staff=True)
    lead.groups.add(Group.objects.get(name="support_staff"))
    with pytest.raises(reviews.ReviewError) as error:
        reviews.review_update(run=runs["low"], user=lead, assignee=support_staff)
    assert error.value.field == "assignee"
