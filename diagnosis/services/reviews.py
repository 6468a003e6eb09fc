"""The review queue: which finished runs a person should look at, and the reviews they record.

A run needs review when it is degraded, its verdict is LOW_CONFID, it was rated not useful, or it
falls in the random sample (one run in `REVIEW_SAMPLE_EVERY`, by primary key, so the sample is
stable and costs no column). Reviews are rows: each change (opened, assigned, labelled, resolved,
reopened) adds a `RunReviewEntry` with who and when, so auditors can read the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Mod
from django.utils import timezone

from diagnosis.models import DiagnosisRun, RunReview, RunReviewEntry
from diagnosis.services.access import SUPPORT_STAFF

Trigger = RunReview.Trigger
NOTE_MAX_CHARS = 4000


def sample_every() -> int:
    return max(int(getattr(settings, "REVIEW_SAMPLE_EVERY", 50)), 1)


class ReviewError(ValueError):
    """Input a review cannot take; `field` names the offending field."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


class ReviewNotAllowed(PermissionError):
    pass


def can_review(user) -> bool:
    """Support staff and superusers review runs; auditors only read the reviews."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return user.is_superuser or user.groups.filter(name=SUPPORT_STAFF).exists()


def review_trigger(run: DiagnosisRun) -> str | None:
    """Why `run` is in the queue (the first reason that holds), or None when it is not."""
    if run.status not in DiagnosisRun.TERMINAL:
        return None
    if run.degraded or run.status == DiagnosisRun.Status.FAILED:
        return Trigger.DEGRADED
    if run.effective_verdict == DiagnosisRun.Verdict.LOW_CONFID:
        return Trigger.LOW_CONFIDENCE
    if run.feedback == DiagnosisRun.Feedback.NOT_USEFUL:
        return Trigger.NOT_USEFUL
    if run.pk and run.pk % sample_every() == 0:
        return Trigger.SAMPLED
    return None


def review_candidates(queryset: QuerySet[DiagnosisRun] | None = None) -> QuerySet[DiagnosisRun]:
    """Finished runs that need review (lazy; the caller orders and paginates)."""
    queryset = DiagnosisRun.objects.all() if queryset is None else queryset
    return queryset.annotate(review_sample=Mod(F("id"), sample_every())).filter(
        Q(status__in=DiagnosisRun.TERMINAL)
        & (Q(degraded=True) | Q(status=DiagnosisRun.Status.FAILED)
           | Q(effective_verdict=DiagnosisRun.Verdict.LOW_CONFID)
           | Q(feedback=DiagnosisRun.Feedback.NOT_USEFUL) | Q(review_sample=0))
    )


@dataclass(frozen=True)
class ReviewChange:
    review: RunReview
    entry: RunReviewEntry | None  # None when nothing changed


def _record(review: RunReview, user, action: str, changes: dict) -> RunReviewEntry:
    return RunReviewEntry.objects.create(review=review, actor=user, action=action, changes=changes)


@transaction.atomic
def review_open(*, run: DiagnosisRun, user) -> RunReview:
    """The run's review, opened now (with its queue trigger, else `manual`) when it has none."""
    if not can_review(user):
        raise ReviewNotAllowed("only support staff review runs")
    review, created = RunReview.objects.select_for_update().get_or_create(
        run=run, defaults={"trigger": review_trigger(run) or Trigger.MANUAL, "created_by": user, "updated_by": user},
    )
    if created:
        _record(review, user, "opened", {"trigger": review.trigger})
    return review


@transaction.atomic
def review_update(
    *, run: DiagnosisRun, user, assignee=None, reasons: list[str] | None = None, resolution: str | None = None,
    note: str | None = None, unassign: bool = False,
) -> ReviewChange:
    """Assign, label, annotate, resolve (a non-empty `resolution`) or reopen (`resolution=""`) a review.

    Arguments left at None keep their value. Every effective change is one `RunReviewEntry`.
    """
    if not can_review(user):
        raise ReviewNotAllowed("only support staff review runs")
    if assignee is not None and not (assignee.is_active and assignee.is_staff and can_review(assignee)):
        raise ReviewError("assignee", "the assignee must be an active support-staff account")
    if reasons is not None:
        unknown = sorted(set(reasons) - set(RunReview.Reason.values))
        if unknown:
            raise ReviewError("reasons", f"unknown reason label(s): {', '.join(unknown)}")
        reasons = [r for r in RunReview.Reason.values if r in set(reasons)]
    if resolution is not None and resolution and resolution not in RunReview.Resolution.values:
        raise ReviewError("resolution", f"unknown resolution {resolution!r}")
    if note is not None and len(note) > NOTE_MAX_CHARS:
        raise ReviewError("note", f"at most {NOTE_MAX_CHARS} characters")

    review = review_open(run=run, user=user)
    review = RunReview.objects.select_for_update().get(pk=review.pk)
    changes: dict = {}
    if unassign and review.assignee_id is not None:
        changes["assignee"] = None
        review.assignee = None
    elif assignee is not None and review.assignee_id != assignee.pk:
        changes["assignee"] = assignee.get_username()
        review.assignee = assignee
    if reasons is not None and reasons != list(review.reasons or []):
        changes["reasons"] = reasons
        review.reasons = reasons
    if note is not None and note != review.note:
        changes["note"] = note
        review.note = note
    action = "updated"
    if resolution is not None and resolution != review.resolution:
        changes["resolution"] = resolution
        review.resolution = resolution
        if resolution:
            if resolution == RunReview.Resolution.ANSWER_WRONG and not review.reasons:
                raise ReviewError("reasons", "say why the answer is wrong: pick at least one reason label")
            action = "resolved"
            review.status, review.resolved_by, review.resolved_at = RunReview.Status.RESOLVED, user, timezone.now()
        else:
            action = "reopened"
            review.status, review.resolved_by, review.resolved_at = RunReview.Status.OPEN, None, None
    if not changes:
        return ReviewChange(review=review, entry=None)
    review.updated_by = user
    review.save()
    return ReviewChange(review=review, entry=_record(review, user, action, changes))
