"""Who may see and rate which sessions and runs (SPEC §9): owners see their own, staff see all.

Visibility is a lazily filtered queryset, so scoping a lookup costs no extra query and a row the
caller may not see is indistinguishable from a missing one (the API answers 404 for both).
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db.models import Exists, Q, QuerySet

from diagnosis.models import ChatSession, DiagnosisRun

SUPPORT_STAFF = "support_staff"
AUDITOR = "auditor"
READ_ALL_GROUPS = (SUPPORT_STAFF, AUDITOR)
GIVE_FEEDBACK_PERMISSION = "diagnosis.give_feedback"


def _in_groups(user, names) -> Exists:
    return Exists(Group.objects.filter(user=user.pk, name__in=names).values("pk"))


def is_support_staff(user) -> bool:
    """Superusers and members of support_staff or auditor: they may read every session."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return user.is_superuser or user.groups.filter(name__in=READ_ALL_GROUPS).exists()


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


def can_give_feedback(user, run: DiagnosisRun) -> bool:
    """Owners rate their own runs; support staff, superusers and give_feedback holders rate any run."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if run.session.owner_id == user.pk or user.is_superuser:
        return True
    return user.groups.filter(name=SUPPORT_STAFF).exists() or user.has_perm(GIVE_FEEDBACK_PERMISSION)


def can_publish_cases(user) -> bool:
    """Only support staff (and superusers) publish a candidate case into the knowledge others retrieve."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return user.is_superuser or user.groups.filter(name=SUPPORT_STAFF).exists()
