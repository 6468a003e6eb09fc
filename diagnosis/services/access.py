"""Who may see and rate which sessions and runs (SPEC §9): owners see their own, staff see all.

The predicates live here; what a caller may see is a queryset in `diagnosis/selectors.py`
(`visible_sessions`, `visible_runs`).
"""

from __future__ import annotations

from diagnosis.models import DiagnosisRun
from diagnosis.roles import AUDITOR, GIVE_FEEDBACK_PERMISSION, READ_ALL_GROUPS, SUPPORT_STAFF  # noqa: F401


def is_support_staff(user) -> bool:
    """Superusers and members of support_staff or auditor: they may read every session."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return user.is_superuser or user.groups.filter(name__in=READ_ALL_GROUPS).exists()


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
