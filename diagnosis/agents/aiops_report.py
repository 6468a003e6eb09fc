"""The alert-analysis report on the server: the check of the reporter's cited lines, and the served report
and its degraded fallback, rendered by ``diagnosis.alert_render`` from the verified task evidence only
(SPEC R1) with the reporter's own prose as labelled, unchecked suggestions."""

from __future__ import annotations

import re
from typing import Any, Mapping

from diagnosis.agents.aiops import CITATION_RE, PROBE_PATH, ReportCheck, TaskResult, _text
from diagnosis.agents.catalog import prompt_echoed
from diagnosis import i18n
from diagnosis.advice import is_destructive
from diagnosis.alert_render import compose_alert_fallback as render_fallback
from diagnosis.alert_render import render_alert_findings
from diagnosis.alert_render import REMOVED_NOTE
from diagnosis.answer_render import DESTRUCTIVE_WARNING, SUGGESTIONS_HEADING
from diagnosis.claim_sentences import clean_suggestion
from diagnosis.contracts import EXECUTOR_EVIDENCE_VERSION, BindingReason
from diagnosis.gatekeeper import verify_bindings
from diagnosis.model_text import id_like_tokens


# --------------------------------------------------------------------------- the report check


def check_report(markdown: str, *, run_id: str, lookup, verified_evidence: list[dict],
                 tool_names: Mapping[str, str], language: str) -> ReportCheck:
    """Every line of the report that cites an invocation is a claim checked by `verify_bindings`: it
    keeps the verified bindings of the ids it cites, or a probe binding for an id with none. A line is
    kept only when every id it cites carries evidence the Gatekeeper verifies again now."""
    pool: dict[str, list[dict]] = {}
    for item in verified_evidence:
        binding = {k: item.get(k) for k in ("source_invocation_id", "tool_name", "raw_path", "evidence_excerpt")}
        if binding not in pool.setdefault(str(item.get("source_invocation_id")), []):
            pool[str(item.get("source_invocation_id"))].append(binding)
    lines = markdown.splitlines()
    claims, cited_lines = [], []
    for number, line in enumerate(lines):
        ids = list(dict.fromkeys(CITATION_RE.findall(line)))
        if not ids:
            continue
        bindings, owners = [], []
        for invocation_id in ids:
            found = pool.get(invocation_id, [])[:2] or [{
                "source_invocation_id": invocation_id, "tool_name": tool_names.get(invocation_id, "unknown"),
                "raw_path": PROBE_PATH, "evidence_excerpt": "",
            }]
            bindings += found
            owners += [invocation_id] * len(found)
        claims.append({"claim_id": f"r{len(claims) + 1}", "statement": _text(line, 500) or "-", "evidence": bindings})
        cited_lines.append((number, ids, owners))
    result = verify_bindings(executor_output={"version": EXECUTOR_EVIDENCE_VERSION, "summary": "report", "claims": claims},
                             run_id=run_id, lookup=lookup) if claims else None
    removed, dropped, kept_ids = [], set(), set()
    for (number, ids, owners), audit in zip(cited_lines, result.claims if result else ()):
        verified_ids = {owner for owner, b in zip(owners, audit.bindings) if b.verified}
        reasons = {}
        for owner, b in zip(owners, audit.bindings):
            if owner not in verified_ids and owner not in reasons:
                probe = b.raw_path == PROBE_PATH and b.evidence_excerpt == ""
                reasons[owner] = "no_verified_evidence" if probe and b.reason_code == BindingReason.EXCERPT_TOO_SHORT else str(b.reason_code)
        if reasons:
            dropped.add(number)
            removed.append({"line": number + 1, "statement": _text(lines[number], 300), "invocation_ids": ids,
                            "reasons": reasons})
        else:
            kept_ids.update(ids)
    kept = [line for i, line in enumerate(lines) if i not in dropped]
    if removed:
        why = ", ".join(sorted({r for item in removed for r in item["reasons"].values()}))
        kept += ["", i18n.text(REMOVED_NOTE, language, n=len(removed), reasons=why)]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n"
    gatekeeper = result.to_dict() if result else {"verdict": None, "citation_validity": 0.0, "total_claim_count": 0,
                                                 "verified_claim_count": 0, "audit": []}
    return ReportCheck(markdown=text, gatekeeper=gatekeeper, statements_total=len(cited_lines),
                       statements_verified=len(cited_lines) - len(removed), removed=removed,
                       cited_invocation_ids=sorted(kept_ids))


# --------------------------------------------------------------------------- the served report


def findings_of(results: list[TaskResult]) -> list[dict[str, Any]]:
    """The tasks' results in the shape the report renderer reads (``diagnosis.alert_render``)."""
    return [{**r.finding(for_planner=False), "evidence": r.verified_evidence} for r in results]


def compose_alert_fallback(*, alerts: list[dict], results: list[TaskResult], reason: str, language: str,
                           intake_error: str | None = None) -> str:
    """The deterministic safe report: the alerts, what was verified for each, next steps; no root cause."""
    return render_fallback(alerts=alerts, findings=findings_of(results), reason=reason, language=language,
                           intake_error=intake_error)


def report_suggestions(markdown: str | None, limit: int = 5) -> list[str]:
    """The reporter's own prose lines, candidates for the labelled unchecked-suggestions section:
    tables, headings, emphasis-only lines and any line carrying a citation-like token are left out."""
    picked = []
    for line in (markdown or "").splitlines():
        stripped = line.strip()
        text = _bare(stripped)
        if len(text) < 12 or stripped.startswith(("|", "#", "_", "**")) or id_like_tokens(text):
            continue
        picked.append(text)
        if len(picked) >= limit:
            break
    return picked


def _bare(line: str) -> str:
    return re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", line.strip()).strip()


def render_aiops_report(*, alerts: list[dict], results: list[TaskResult], language: str,
                        suggestions: list[str]) -> tuple[str, list[dict], list[str], list[dict]]:
    """The served report (SPEC R1): the body ``diagnosis.alert_render`` renders from the verified task evidence,
    then labelled unchecked suggestions (a destructive one with a warning; a line the body already says is
    not a suggestion). Returns (markdown, removed audit entries, cited invocation ids, advice with its flags)."""
    lines, removed, cited, flagged = render_alert_findings(alerts=alerts, findings=findings_of(results),
                                                           language=language)
    said = {_bare(line) for line in lines}
    kept: list[str] = []
    advice: list[dict] = []
    for raw, from_knowledge in [(f, True) for f in flagged] + [(s, False) for s in suggestions if _bare(s) not in said]:
        cleaned, why = clean_suggestion(raw, prompt_echoed)
        if cleaned is None:
            removed.append({"where": "suggestions", "reason": why})
            continue
        destructive = from_knowledge or is_destructive(raw)
        shown_text = f"{i18n.text(DESTRUCTIVE_WARNING, language)}{cleaned}" if destructive else cleaned
        if shown_text not in kept and len(kept) < 5:
            kept.append(shown_text)
            advice.append({"text": shown_text, "verified": False, "destructive": destructive, "claimId": None})
    if kept:
        lines += ["", i18n.text(SUGGESTIONS_HEADING, language)] + [f"- {s}" for s in kept]
    return "\n".join(lines) + "\n", removed, sorted(set(cited)), advice
