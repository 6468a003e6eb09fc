"""Read-side queries of the write app: runs visible to a caller, and run progress events."""

from __future__ import annotations

from diagnosis.models import DiagnosisRun, RunEvent


def run_get_for_user(*, user, run_id: str) -> DiagnosisRun | None:
    """The run if the caller may see it (its owner, or support staff), else None."""
    from diagnosis.services.access import visible_runs

    return visible_runs(user).select_related("session").filter(run_id=run_id).first()


def run_events_after(*, run: DiagnosisRun, after: int, limit: int = 200) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run_id=run.pk, seq__gt=after).order_by("seq")[:limit])


def run_status(*, run_pk: int) -> str | None:
    return DiagnosisRun.objects.filter(pk=run_pk).values_list("status", flat=True).first()


def run_suggestions(*, run: DiagnosisRun) -> list[str]:
    """The served answer's advice that was not checked against evidence (its labelled section)."""
    evaluation = run.self_evaluation if isinstance(run.self_evaluation, dict) else {}
    verifier = evaluation.get("verifier_evaluation") if isinstance(evaluation.get("verifier_evaluation"), dict) else {}
    render = verifier.get("answer_render") if isinstance(verifier.get("answer_render"), dict) else {}
    suggestions = render.get("suggestions")
    return [s for s in suggestions if isinstance(s, str)] if isinstance(suggestions, list) else []


def run_evidence_checked(*, run: DiagnosisRun) -> bool:
    """False for SIMPLE answers: no Gatekeeper ran on them."""
    return run.strategy != DiagnosisRun.Strategy.SIMPLE
