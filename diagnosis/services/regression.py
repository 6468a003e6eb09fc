"""Regression sets: named sets of recorded runs, built from support feedback, published cases,
resolved reviews or an explicit list, that `manage.py regress` replays against a new prompt or model."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from diagnosis.models import DiagnosisRun, RegressionSet
from diagnosis.services.access import SUPPORT_STAFF

MAX_RUNS = 500


class RegressionSetError(Exception):
    pass


def replayable_runs():
    """Finished chat diagnoses that are not themselves replays."""
    return DiagnosisRun.objects.filter(
        agent_flow=DiagnosisRun.Flow.CHAT, strategy=DiagnosisRun.Strategy.DIAGNOSIS,
        status=DiagnosisRun.Status.SUCCESS, replay_of__isnull=True,
    )


def regression_set_build(*, name: str, useful: bool = False, cases: bool = False, reviewed: bool = False,
                         run_ids: list[str] | tuple = (), description: str = "", user=None,
                         limit: int = MAX_RUNS) -> RegressionSet:
    """Create or replace the set `name` with the runs matching any of the filters (newest first):
    rated useful by support staff, published as cases, reviewed with a resolution, or listed."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise RegressionSetError("a set needs a name of 1 to 100 characters")
    if not (useful or cases or reviewed or run_ids):
        raise RegressionSetError("choose at least one filter: --useful, --cases, --reviewed or --run")
    wanted = Q(pk__in=[])
    if useful:
        by_staff = Q(feedback_by__groups__name=SUPPORT_STAFF) | Q(feedback_by__is_superuser=True)
        wanted |= Q(feedback=DiagnosisRun.Feedback.USEFUL) & by_staff
    if cases:
        wanted |= Q(case__isnull=False)
    if reviewed:
        wanted |= Q(review__status="resolved") & ~Q(review__resolution="")
    if run_ids:
        listed = set(run_ids)
        found = set(replayable_runs().filter(run_id__in=listed).values_list("run_id", flat=True))
        if listed - found:
            raise RegressionSetError(f"not finished chat diagnoses (or missing): {', '.join(sorted(listed - found))}")
        wanted |= Q(run_id__in=listed)
    pks = list(replayable_runs().filter(wanted).order_by("-created_at", "-id").values_list("pk", flat=True).distinct()[:limit])
    filters = {"useful": useful, "cases": cases, "reviewed": reviewed, "run_ids": sorted(run_ids), "limit": limit}
    with transaction.atomic():
        regression_set, _ = RegressionSet.objects.update_or_create(
            name=name, defaults={"description": description, "filters": filters, "created_by": user})
        regression_set.runs.set(pks)
    return regression_set


def regression_set_runs(name: str) -> list[DiagnosisRun]:
    regression_set = RegressionSet.objects.filter(name=name).first()
    if regression_set is None:
        raise RegressionSetError(f"no regression set named {name!r}; build it with manage.py regression_set")
    return list(regression_set.runs.select_related("session").order_by("created_at", "id"))
