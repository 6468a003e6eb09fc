"""Feedback on a finished run and the case library it feeds (SPEC §2, §7, R3).

Feedback never moves a run's status: only the feedback columns are updated, and the latest
feedback wins. Only a SUCCESS run with at least one verified claim can be rated `useful`; that makes
its case a CANDIDATE holding only the verified claims (never the question or the answer).
`not_useful` removes a candidate. Only support staff publish a candidate (`case_publish`), and only
published cases are retrieved by later diagnoses.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from diagnosis.claim_sentences import plain_statement
from diagnosis.contracts import BINDING_FIELDS, SelfEvaluation
from diagnosis.models import CaseLibraryEntry, DiagnosisRun, ToolInvocation
from diagnosis.redaction import redact_text
from diagnosis.services.access import can_publish_cases

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


class NotRateableUseful(Exception):
    """`useful` on a run that has nothing verified to keep (FAILED, or no verified claim)."""

    code = "not_rateable_useful"

    def __init__(self, run_id: str, reason: str):
        self.run_id = run_id
        super().__init__(f"run {run_id} cannot be rated useful: {reason}. Only a SUCCESS run with at least one "
                         "verified claim can be rated useful; rate it not_useful instead.")


class CasePublishRefused(Exception):
    code = "permission_denied"


@dataclass(frozen=True)
class FeedbackGiven:
    run: DiagnosisRun
    case: CaseLibraryEntry | None


MAX_CASE_CLAIMS = 20


def verified_claims(self_evaluation) -> list[dict]:
    """The claims a reader was shown: verified by the Gatekeeper *and* rendered in the served answer (its
    sections, minus anything the renderer removed), each with only its verified bindings and with the
    statement as shown. A degraded answer shows no statement, so it keeps none."""
    evaluation = SelfEvaluation.read(self_evaluation)
    render = evaluation.verifier.raw.get("answer_render") if isinstance(evaluation.verifier.raw, dict) else None
    render = render if isinstance(render, dict) else {}
    sections = render.get("sections") if isinstance(render.get("sections"), dict) else {}
    shown = {c for ids in sections.values() if isinstance(ids, list) for c in ids if isinstance(c, str)}
    shown -= {r.get("claim_id") for r in render.get("removed") or () if isinstance(r, dict) and r.get("where") == "render"}
    legacy = "sections" not in render  # stored before answers recorded what they showed: every verified claim
    kept = []
    for claim in evaluation.verified_claims:
        if not legacy and str(claim.claim_id) not in shown:
            continue
        evidence = [{k: str(b.get(k, ""))[:2000] for k in BINDING_FIELDS} for b in claim.evidence]
        if evidence:
            kept.append({"claim_id": str(claim.claim_id)[:64], "statement": plain_statement(claim.statement),
                         "evidence": evidence})
        if len(kept) >= MAX_CASE_CLAIMS:
            break
    return kept


def root_cause_summary(*, run: DiagnosisRun) -> str:
    """The verified claims' statements (never the answer's free text)."""
    summary = " ".join(c["statement"] for c in verified_claims(run.self_evaluation))
    return summary if len(summary) <= SUMMARY_MAX_CHARS else summary[: SUMMARY_MAX_CHARS - 1].rstrip() + "…"


def _service_tags(*, run: DiagnosisRun) -> list[str]:
    tags: list[str] = []
    for arguments in ToolInvocation.objects.filter(run=run).values_list("arguments", flat=True):
        service = arguments.get("service") if isinstance(arguments, dict) else None
        if isinstance(service, str) and service.strip() and service.strip() not in tags:
            tags.append(service.strip())
    return tags[:MAX_TAGS]


def case_upsert(*, run: DiagnosisRun, user) -> CaseLibraryEntry:
    """Create or refresh the candidate case of a useful run; the first author stays its creator and a
    published case stays published."""
    fields = {
        "session_id": run.session.session_id, "question": "", "answer": "", "source_run_id": run.run_id,
        "claims": verified_claims(run.self_evaluation),
        "root_cause_summary": root_cause_summary(run=run), "tags": _service_tags(run=run),
    }
    case = CaseLibraryEntry.objects.filter(run=run).first()
    if case is None:
        return CaseLibraryEntry.objects.create(run=run, created_by=user, **fields)
    changed = case.claims != fields["claims"]
    for name, value in fields.items():
        setattr(case, name, value)
    if changed:
        case.version += 1
    case.save()
    return case


@transaction.atomic
def run_feedback_give(*, user, run: DiagnosisRun, feedback: str, comment: str = "") -> FeedbackGiven:
    """Record `user`'s feedback on a finished run and keep the case library in step with it."""
    feedback = Feedback(feedback)
    if len(comment) > COMMENT_MAX_CHARS:
        raise ValueError(f"comment is longer than {COMMENT_MAX_CHARS} characters")
    comment = redact_text(comment)  # free text from a user: secrets are masked before it is stored
    if feedback == Feedback.USEFUL and run.status in DiagnosisRun.TERMINAL:
        if run.status != DiagnosisRun.Status.SUCCESS:
            raise NotRateableUseful(run.run_id, f"it ended {run.status}")
        if not verified_claims(run.self_evaluation):
            raise NotRateableUseful(run.run_id, "no claim of it passed the Gatekeeper")
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
    CaseLibraryEntry.objects.filter(run=run, status=CaseLibraryEntry.Status.CANDIDATE).delete()
    return FeedbackGiven(run=run, case=CaseLibraryEntry.objects.filter(run=run).first())


def case_publish(*, user, case: CaseLibraryEntry, publish: bool = True) -> CaseLibraryEntry:
    """Support staff publish a candidate (or withdraw a published case back to candidate)."""
    if not can_publish_cases(user):
        raise CasePublishRefused("only support staff publish cases")
    if publish:
        if case.status != CaseLibraryEntry.Status.PUBLISHED:
            case.version += 1  # what is published now is a new version, whatever was withdrawn before
        case.status, case.published_by, case.published_at = CaseLibraryEntry.Status.PUBLISHED, user, timezone.now()
        case.withdrawn_at = None
    else:
        # Withdrawn: out of retrieval at once (the index is keyed on the published set) and shown as
        # withdrawn in the diff of any replay of a run that used it.
        if case.status == CaseLibraryEntry.Status.PUBLISHED:
            case.withdrawn_at = timezone.now()
        case.status, case.published_by, case.published_at = CaseLibraryEntry.Status.CANDIDATE, None, None
    case.save(update_fields=["status", "published_by", "published_at", "version", "withdrawn_at", "updated_at"])
    return case
