"""Read-side queries of the write app: what a caller may see (sessions and runs), and run progress events.

Visibility is a lazily filtered queryset, so scoping a lookup costs no extra query and a row the
caller may not see is indistinguishable from a missing one (the API answers 404 for both).
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db.models import Exists, Q, QuerySet

from diagnosis.contracts import SelfEvaluation
from diagnosis.models import ChatSession, DiagnosisRun, RunEvent
from diagnosis.roles import READ_ALL_GROUPS


def _in_groups(user, names) -> Exists:
    return Exists(Group.objects.filter(user=user.pk, name__in=names).values("pk"))


def visible_sessions(user) -> QuerySet[ChatSession]:
    """The sessions `user` may read: its own, or all of them for staff (no query until evaluated)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return ChatSession.objects.none()
    if user.is_superuser:
        return ChatSession.objects.all()
    # An uncorrelated EXISTS keeps the staff check inside the lookup query itself.
    return ChatSession.objects.filter(Q(owner=user.pk) | Q(_in_groups(user, READ_ALL_GROUPS)))


def visible_runs(user) -> QuerySet[DiagnosisRun]:
    """The runs of the sessions `user` may read."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return DiagnosisRun.objects.none()
    if user.is_superuser:
        return DiagnosisRun.objects.all()
    return DiagnosisRun.objects.filter(Q(session__owner=user.pk) | Q(_in_groups(user, READ_ALL_GROUPS)))


def run_get_for_user(*, user, run_id: str) -> DiagnosisRun | None:
    """The run if the caller may see it (its owner, or support staff), else None."""
    return visible_runs(user).select_related("session").filter(run_id=run_id).first()


def run_events_after(*, run: DiagnosisRun, after: int, limit: int = 200) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run_id=run.pk, id__gt=after).order_by("id")[:limit])


def run_status(*, run_pk: int) -> str | None:
    return DiagnosisRun.objects.filter(pk=run_pk).values_list("status", flat=True).first()


def run_suggestions(*, run: DiagnosisRun) -> list[str]:
    """The served answer's advice that was not checked against evidence (its labelled section)."""
    return list(SelfEvaluation.read(run.self_evaluation).verifier.suggestions)


def run_evidence_checked(*, run: DiagnosisRun) -> bool:
    """False for SIMPLE answers: no Gatekeeper ran on them."""
    return run.strategy != DiagnosisRun.Strategy.SIMPLE
