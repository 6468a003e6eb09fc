"""Feedback on a finished run and the case library it feeds (SPEC §2, §7; seed 004 §4).

Feedback never moves a run's status: only the feedback columns are updated, and the latest
feedback wins. A run rated `useful` has exactly one case; `not_useful` removes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from diagnosis.models import CaseLibraryEntry, DiagnosisRun, ToolInvocation
from diagnosis.redaction import redact_text

Feedback = DiagnosisRun.Feedback
SUMMARY_MAX_CHARS = 500
COMMENT_MAX_CHARS = 2000
MAX_TAGS = 10


class RunNotFinished(Exception):
    """Feedback on a PENDING or RUNNING run: there is no answer to rate yet."""

    code = "run_not_finished"

    def __init__(self, run_id: str, status: str):
        self.run_id, self.status = run_id, status
        super().__init__(f"run {run_id} is {status}; feedback is accepted once it is SUCCESS or FAILED")


@dataclass(frozen=True)
class FeedbackGiven:
    run: DiagnosisRun
    case: CaseLibraryEntry | None


def _verified_statements(self_evaluation) -> list[str]:
    verifier = self_evaluation.get("verifier_evaluation") if isinstance(self_evaluation, dict) else None
    verified = verifier.get("verified_executor_output") if isinstance(verifier, dict) else None
    claims = verified.get("claims") if isinstance(verified, dict) else None
    if not isinstance(claims, list):
        return []
    return [c["statement"].strip() for c in claims if isinstance(c, dict) and isinstance(c.get("statement"), str)
            and c["statement"].strip()]


def _first_paragraph(answer: str) -> str:
    for block in re.split(r"\n\s*\n", answer or ""):
        lines = [line.strip() for line in block.strip().splitlines()]
        # Markdown headings and table rows say little on their own; the first prose paragraph does.
        text = " ".join(line for line in lines if line and not line.startswith(("#", "|")))
        if text:
            return text
    return ""


def root_cause_summary(*, run: DiagnosisRun) -> str:
    """The verified claims when the gatekeeper let any through, else the answer's first paragraph."""
    summary = " ".join(_verified_statements(run.self_evaluation)) or _first_paragraph(run.answer)
    return summary if len(summary) <= SUMMARY_MAX_CHARS else summary[: SUMMARY_MAX_CHARS - 1].rstrip() + "…"


def _service_tags(*, run: DiagnosisRun) -> list[str]:
    tags: list[str] = []
    for arguments in ToolInvocation.objects.filter(run=run).values_list("arguments", flat=True):
        service = arguments.get("service") if isinstance(arguments, dict) else None
        if isinstance(service, str) and service.strip() and service.strip() not in tags:
            tags.append(service.strip())
    return tags[:MAX_TAGS]


def case_upsert(*, run: DiagnosisRun, user) -> CaseLibraryEntry:
    """Create or refresh the case of a useful run; the first author stays its creator."""
    fields = {
        "session_id": run.session.session_id, "question": run.question, "answer": run.answer,
        "root_cause_summary": root_cause_summary(run=run), "tags": _service_tags(run=run),
    }
    case, _ = CaseLibraryEntry.objects.update_or_create(
        run=run, defaults=fields, create_defaults={**fields, "created_by": user},
    )
    return case


@transaction.atomic
def run_feedback_give(*, user, run: DiagnosisRun, feedback: str, comment: str = "") -> FeedbackGiven:
    """Record `user`'s feedback on a finished run and keep the case library in step with it."""
    feedback = Feedback(feedback)
    if len(comment) > COMMENT_MAX_CHARS:
        raise ValueError(f"comment is longer than {COMMENT_MAX_CHARS} characters")
    comment = redact_text(comment)  # free text from a user: secrets are masked before it is stored
    now = timezone.now()
    # Conditional UPDATE of the feedback columns only: the status is neither read-modified-written
    # nor changed, and a run that is not finished (even after a concurrent move) is refused.
    updated = DiagnosisRun.objects.filter(pk=run.pk, status__in=DiagnosisRun.TERMINAL).update(
        feedback=feedback, feedback_comment=comment, feedback_by=user, feedback_at=now,
    )
    if updated != 1:
        status = DiagnosisRun.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        raise RunNotFinished(run.run_id, status or "missing")
    run.feedback, run.feedback_comment, run.feedback_by, run.feedback_at = feedback, comment, user, now
    if feedback == Feedback.USEFUL:
        return FeedbackGiven(run=run, case=case_upsert(run=run, user=user))
    CaseLibraryEntry.objects.filter(run=run).delete()
    return FeedbackGiven(run=run, case=None)
