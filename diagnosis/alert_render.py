"""The alert-analysis report, rendered in one place: the coverage, the alerts, and per alert only the
verified claims of the tasks that analysed it (SPEC R1), or the degraded report when the run stopped.

Framework-free, like ``answer_render`` (whose claim sentences it reuses). The served report
(``diagnosis.agents.aiops_report``) and the offline analyser's own report (``diagnosis.llm.offline.aiops``)
both render through it, from the same per-task findings: ``{"service", "alert_ids", "verified_claims"}``,
with ``"evidence"`` (the task's verified bindings) when the caller holds them, else the claims' own bindings.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from diagnosis import i18n
from diagnosis.advice import is_destructive
from diagnosis.claim_sentences import claim_sentence, claim_text, knowledge_only
from diagnosis.markdown_text import md_cell, md_code, md_inline
from diagnosis.model_text import foreign_citations
from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID

# The report's wording: English msgids, translated by diagnosis.i18n (the Chinese is in diagnosis/locale).
# A msgid a line, as answer_render and the verifier declare theirs: alike in shape only, each module owns
# the texts it writes (the alert report's wording changes without touching the answer's).
TABLE_HEAD = i18n.mark("| alert | service | severity | state | since | analysed |")
ALERTS_HEAD = i18n.mark("**Active alerts**")
NO_ALERTS = i18n.mark("No active alert.")
YES = i18n.mark("yes")
NO = i18n.mark("no")
DEGRADED = i18n.mark("**The alert analysis could not be completed (degraded report).**")
NO_ROOT = i18n.mark("No verified root cause is reported (reason: `{reason}`).")
PER_ALERT = i18n.mark("**Per alert**")
VERIFIED = i18n.mark("Verified evidence:")
NOTHING_VERIFIED = i18n.mark("No evidence was verified for this alert.")
NOT_ANALYSED = i18n.mark("Not analysed in this run.")
CONCLUSION = i18n.mark("**Conclusion**")
CONCLUSION_TEXT = i18n.mark("{n} of {total} alert(s) were analysed; {v} have verified evidence. "
                            "No root cause is stated because the analysis did not finish.")
ANALYSED_ROOTS = i18n.mark("{n} of {total} alert(s) were analysed. Root cause(s) with verified evidence: {roots}.")
ANALYSED_NONE = i18n.mark(
    "{n} of {total} alert(s) were analysed; no root cause was established from the verified evidence.")
ROOT = i18n.mark("{service} — {cause}")
RISKS = i18n.mark("**Risks**")
RISK_UNFINISHED = i18n.mark("The analysis stopped early; the alerts may have causes that were not examined.")
RISK_NOT_ANALYSED = i18n.mark("{n} alert(s) were not analysed: {names}.")
NEXT = i18n.mark("**Next steps**")
NEXT_LOGS = i18n.mark("Check the error logs and key metrics (errors, latency, saturation) of the alerting services.")
NEXT_RETRY = i18n.mark("Review the queries in the run trace and run the analysis again.")
COVERAGE = i18n.mark("Coverage: {n} of {total} alert(s) analysed.")
STOPPED_EARLY = i18n.mark("_The analysis stopped early ({reason}); this report covers only what was verified before._")
REMOVED_NOTE = i18n.mark(
    "**Unverified statements removed**: {n} statement(s) of this report cited evidence that the Gatekeeper "
    "could not verify against this run's tool output, so they were removed (reasons: {reasons}).")
ROOT_CAUSE = re.compile(r"^Root cause \((?P<kind>[a-z_.]+)\): (?P<service>\S+) — ")


def _flat(value: Any, limit: int) -> str:
    return " ".join(str(value).split())[:limit] if value is not None else ""


def _name(value: Any, limit: int = 80) -> str:
    """A name from alert or model text inside a sentence or a heading: verbatim in a code span."""
    return md_code(_flat(value, limit)) or "-"


def alert_table(alerts: list[Mapping[str, Any]], analysed: set[str], language: str) -> list[str]:
    if not alerts:
        return [i18n.text(NO_ALERTS, language)]
    rows = [i18n.text(TABLE_HEAD, language), "|---|---|---|---|---|---|"]
    for a in alerts:
        done = i18n.text(YES if a.get("alert_id") in analysed else NO, language)
        rows.append(f"| {md_cell(a.get('alertname'))} | {md_cell(a.get('service'))} | {md_cell(a.get('severity'), limit=20)} | "
                    f"{md_cell(a.get('state'), limit=20)} | {md_cell(a.get('since'), limit=40)} | {done} |")
    return rows


def _analysed(alerts: list[Mapping[str, Any]], findings: Iterable[Mapping[str, Any]]) -> set[str]:
    return {str(a) for f in findings for a in f.get("alert_ids") or []}


def coverage_line(alerts: list[Mapping[str, Any]], findings: list[Mapping[str, Any]], language: str) -> str:
    analysed = _analysed(alerts, findings) & {a["alert_id"] for a in alerts}
    return i18n.text(COVERAGE, language, n=len(analysed), total=len(alerts))


def _claims(finding: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in finding.get("verified_claims") or [] if isinstance(c, Mapping)]


def _evidence(finding: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    evidence = finding.get("evidence")
    if evidence is None:
        evidence = [b for c in _claims(finding) for b in c.get("evidence") or [] if isinstance(b, Mapping)]
    return [e for e in evidence if isinstance(e, Mapping)]


def _verified_ids(finding: Mapping[str, Any]) -> set[str]:
    return {str(e.get("source_invocation_id")) for e in _evidence(finding)}


def render_alert_findings(*, alerts: list[Mapping[str, Any]], findings: list[Mapping[str, Any]],
                          language: str) -> tuple[list[str], list[dict], list[str], list[str]]:
    """The report body: coverage, the alert table, then per task its verified claims (a runbook step that
    carries a destructive command is held back for the labelled suggestions, a sentence citing an id the
    task did not verify is dropped). Returns (lines, removed audit entries, cited ids, held-back steps)."""
    analysed = _analysed(alerts, findings)
    lines = [coverage_line(alerts, findings, language), "", i18n.text(ALERTS_HEAD, language), "",
             *alert_table(alerts, analysed, language), "", i18n.text(PER_ALERT, language), ""]
    removed: list[dict] = []
    cited: list[str] = []
    flagged: list[str] = []
    names = {a["alert_id"]: _name(a.get("alertname")) for a in alerts}
    for finding in findings:
        covered = ", ".join(names.get(str(a), md_code(str(a))) for a in finding.get("alert_ids") or []) or "-"
        head = f"**{_name(finding.get('service'))}** ({covered})"
        verified_ids = _verified_ids(finding)
        shown = []
        for claim in _claims(finding)[:8]:
            if knowledge_only(claim) and is_destructive(claim_text(claim)):
                flagged.append(str(claim.get("statement", "")))
                removed.append({"claim_id": claim.get("claim_id"), "reason": "destructive_command"})
                continue
            sentence, ids = claim_sentence(claim, language, knowledge=knowledge_only(claim))
            bad = foreign_citations(sentence, verified_ids)
            if bad:
                removed.append({"claim_id": claim.get("claim_id"), "reason": "foreign_citation", "tokens": bad[:5]})
                continue
            shown.append(sentence)
            cited.extend(ids)
        lines.append(f"- {head}:" if shown else f"- {head}: {i18n.text(NOTHING_VERIFIED, language)}")
        lines += [f"    - {sentence}" for sentence in shown]
    missing = [names[a["alert_id"]] for a in alerts if a["alert_id"] not in analysed]
    if missing:
        lines.append(f"- {', '.join(missing[:10])}: {i18n.text(NOT_ANALYSED, language)}")
    return lines, removed, cited, flagged


def conclusion_lines(*, alerts: list[Mapping[str, Any]], findings: list[Mapping[str, Any]], language: str) -> list[str]:
    """How many alerts were analysed and the root causes their verified claims name (service — kind)."""
    analysed = _analysed(alerts, findings) & {a["alert_id"] for a in alerts}
    roots = []
    for finding in findings:
        for claim in _claims(finding):
            match = ROOT_CAUSE.match(str(claim.get("statement", "")))
            kind = CAUSE_KIND_BY_ID.get(match.group("kind")) if match else None
            if match:
                label = kind.label(language) if kind else match.group("kind")
                roots.append(i18n.text(ROOT, language, service=match.group("service"), cause=label))
    if roots:
        text = i18n.text(ANALYSED_ROOTS, language, n=len(analysed), total=len(alerts),
                         roots="; ".join(dict.fromkeys(roots)))
    else:
        text = i18n.text(ANALYSED_NONE, language, n=len(analysed), total=len(alerts))
    return [i18n.text(CONCLUSION, language), md_inline(text)]


def compose_alert_fallback(*, alerts: list[dict], findings: list[Mapping[str, Any]], reason: str, language: str,
                           intake_error: str | None = None) -> str:
    """The deterministic safe report: the alerts, what was verified for each, next steps; no root cause."""
    analysed = _analysed(alerts, findings)
    lines = [i18n.text(DEGRADED, language), "", coverage_line(alerts, findings, language), "",
             i18n.text(NO_ROOT, language, reason=re.sub(r"[^a-z0-9_:.\-]", "", str(reason).lower())[:80]), ""]
    lines += [i18n.text(ALERTS_HEAD, language), "", *alert_table(alerts, analysed, language), ""]
    lines += [i18n.text(PER_ALERT, language), ""]
    by_alert: dict[str, list[Mapping]] = {}
    for finding in findings:
        for alert_id in finding.get("alert_ids") or []:
            by_alert.setdefault(str(alert_id), []).extend(_evidence(finding))
    for a in alerts:
        lines.append(f"- **{_name(a.get('alertname'))}** ({_name(a.get('service'))})")
        evidence = by_alert.get(a["alert_id"])
        if a["alert_id"] not in analysed:
            lines.append(f"  - {i18n.text(NOT_ANALYSED, language)}")
        elif not evidence:
            lines.append(f"  - {i18n.text(NOTHING_VERIFIED, language)}")
        else:
            lines.append(f"  - {i18n.text(VERIFIED, language)}")
            seen = set()
            for item in evidence:
                key = (item.get("source_invocation_id"), item.get("raw_path"))
                if key in seen or len(seen) >= 4:
                    continue
                seen.add(key)
                lines.append(f"    - “{md_inline(_flat(item.get('evidence_excerpt'), 200))}” [{item.get('source_invocation_id')}]")
    with_evidence = {str(a) for f in findings if _evidence(f) for a in f.get("alert_ids") or []}
    lines += ["", i18n.text(CONCLUSION, language),
              i18n.text(CONCLUSION_TEXT, language, n=len(analysed), total=len(alerts), v=len(with_evidence)), ""]
    lines += [i18n.text(RISKS, language), f"- {i18n.text(RISK_UNFINISHED, language)}"]
    missing = [a for a in alerts if a["alert_id"] not in analysed]
    if missing:
        names = ", ".join(_name(a.get("alertname"), 60) for a in missing[:10]) + (" …" if len(missing) > 10 else "")
        lines.append(f"- {i18n.text(RISK_NOT_ANALYSED, language, n=len(missing), names=names)}")
    if intake_error:
        lines.append(f"- {md_inline(_flat(intake_error, 300))}")
    lines += ["", i18n.text(NEXT, language), f"- {i18n.text(NEXT_LOGS, language)}", f"- {i18n.text(NEXT_RETRY, language)}"]
    return "\n".join(lines) + "\n"
