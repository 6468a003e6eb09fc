"""The composer role: arranges the verified claims into an answer plan; the server renders the words.

It reads claims as typed findings (``findings.read_finding``) and returns a typed ``AnswerPlan``
(answer_plan_v1 as a dict at the boundary).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from diagnosis import i18n
from diagnosis.llm.offline.findings import (
    AlertFiring,
    Change,
    LogPattern,
    MetricMove,
    NothingWrong,
    NoTelemetry,
    RootCause,
    RunbookAdvice,
    finding_of,
)
from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID
from diagnosis.llm.offline.lexicon import question_language
from diagnosis.llm.offline.taxonomy import generic_actions

# The composer's own next steps: English msgids, translated by diagnosis.i18n.
NOTHING_ACTION = i18n.mark("No action is needed now. If users still report failures, ask again with the exact symptom, "
                           "time and endpoint.")
NO_DATA_ACTION = i18n.mark("Check the service's name: the log and metric backends of this run returned nothing for it. "
                           "Ask again with the name its records carry, or add its telemetry.")
REJECT_ACTION = i18n.mark("Check the error logs and the key metrics (errors, latency, saturation) of the services involved, "
                          "and ask again naming the failing service.")


# A field list of lists, alike in shape to other such dataclasses (localisation.records.Evidence): no logic to share.
@dataclass
class AnswerPlan:
    """The composer's output: claim ids by section, next steps, and the structured outcome it names."""

    root_cause: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    impact: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    next_steps: list[dict[str, str]] = field(default_factory=list)
    diagnosis: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"version": "answer_plan_v1", "root_cause": self.root_cause, "evidence": self.evidence[:8],
                "impact": self.impact, "timeline": self.timeline, "next_steps": self.next_steps, "diagnosis": self.diagnosis}


def compose(si: Mapping[str, Any]) -> AnswerPlan:
    """Which verified claims are the root cause, evidence, impact and timeline, and the next steps.
    The server renders the words (diagnosis/answer_render.py)."""
    language = si.get("language") if si.get("language") in ("en", "zh") else "en"
    claims = [c for c in (si.get("verified_executor_output") or {}).get("claims") or [] if isinstance(c, Mapping)]
    verdict = si.get("effective_verdict") if si.get("effective_verdict") in ("PASS", "LOW_CONFID", "REJECT") else "REJECT"
    verifier = si.get("verifier") or {}
    unsupported = {c.get("claim_id") for c in verifier.get("claim_checks") or [] if isinstance(c, Mapping) and c.get("supported") is False}
    claims = [c for c in claims if c.get("claim_id") not in unsupported]
    found = [(c, finding_of(c)) for c in claims]
    plan = AnswerPlan()
    root = next(((c, f) for c, f in found if isinstance(f, RootCause)), None)
    nothing = next((c for c, f in found if isinstance(f, NothingWrong)), None)
    actions: list[str] = []
    if verdict in ("PASS", "LOW_CONFID") and root is not None:
        plan.root_cause.append(root[0]["claim_id"])
        actions += generic_actions(language)  # the runbook steps come first (below); these are checks
    elif verdict in ("PASS", "LOW_CONFID") and nothing is not None:
        plan.evidence.append(nothing["claim_id"])
        actions.append(i18n.text(NOTHING_ACTION, language))
    elif verdict == "LOW_CONFID" and any(isinstance(f, NoTelemetry) for _c, f in found):
        actions.append(i18n.text(NO_DATA_ACTION, language))  # nothing to diagnose: the name is what to check
    elif verdict == "LOW_CONFID":
        # A problem without an established cause: what to check next. A how-to answer (runbook steps only) has none.
        if not (found and all(isinstance(f, RunbookAdvice) for _c, f in found)):
            actions += generic_actions(language)
    else:
        actions.append(i18n.text(REJECT_ACTION, language))

    def excerpt_language(claim) -> str:
        return question_language(str((claim.get("evidence") or [{}])[0].get("evidence_excerpt", "")))

    runbooks = [c for c, f in found if isinstance(f, RunbookAdvice)]
    # Advice in the reader's language first; a runbook in the other language is still quoted as is.
    if any(excerpt_language(c) == language for c in runbooks):
        runbooks = [c for c in runbooks if excerpt_language(c) == language]
    if verdict != "REJECT":
        plan.next_steps += [{"claim_id": c["claim_id"]} for c in runbooks[:3]]
    for claim, finding in found:
        if (root is not None and claim is root[0]) or claim is nothing or isinstance(finding, RunbookAdvice):
            continue
        if isinstance(finding, Change):
            plan.timeline.append(claim["claim_id"])
        elif isinstance(finding, AlertFiring):
            plan.impact.append(claim["claim_id"])
        else:
            plan.evidence.append(claim["claim_id"])
    plan.next_steps += [{"text": a} for a in actions[: max(1, 3 - len(plan.next_steps))]]
    plan.diagnosis = _diagnosis_hint(found, root[1] if root else None, nothing, verdict)
    return plan


def _diagnosis_hint(found: list[tuple[Mapping[str, Any], Any]], root: RootCause | None,
                    nothing: Mapping[str, Any] | None, verdict: str) -> dict[str, Any]:
    """The composer's choice for the structured diagnosis: an outcome, a cause-kind id, the root service
    (kept only when a cited record names it) and symptom claim ids; the server derives the onset and the
    rest (diagnosis/structured_diagnosis.py)."""
    concluded = verdict in ("PASS", "LOW_CONFID")
    hint: dict[str, Any] = {"outcome": "undetermined", "cause": None, "symptoms": []}
    root_service = None
    if concluded and root is not None:
        root_service = root.service
        if root.cause in CAUSE_KIND_BY_ID:
            hint.update(outcome="root_cause", cause=root.cause, service=root_service)
    elif concluded and nothing is not None:
        hint["outcome"] = "nothing_wrong"
    seen = {root_service}
    for claim, finding in found:
        if isinstance(finding, (MetricMove, LogPattern, AlertFiring)) and finding.service not in seen:
            seen.add(finding.service)
            hint["symptoms"].append(claim["claim_id"])
    return hint
