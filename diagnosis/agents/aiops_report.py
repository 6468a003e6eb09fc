"""The alert-analysis report: the check of the reporter's cited lines, and the deterministic parts of the
served report (SPEC R1: rendered from the verified task evidence only) and of its degraded fallback."""

from __future__ import annotations

import re
from typing import Any, Mapping

from diagnosis.agents.aiops import CITATION_RE, PROBE_PATH, ReportCheck, TaskResult, _text
from diagnosis.agents.catalog import prompt_echoed
from diagnosis.advice import is_destructive
from diagnosis.answer_render import claim_sentence, claim_text, clean_suggestion, knowledge_only
from diagnosis.answer_render import text as render_text
from diagnosis.contracts import EXECUTOR_EVIDENCE_VERSION, BindingReason
from diagnosis.gatekeeper import verify_bindings
from diagnosis.markdown_text import md_cell, md_code, md_inline
from diagnosis.model_text import foreign_citations, id_like_tokens


# --------------------------------------------------------------------------- the report check


REMOVED_NOTE = {
    "en": "**Unverified statements removed**: {n} statement(s) of this report cited evidence that the Gatekeeper "
          "could not verify against this run's tool output, so they were removed (reasons: {reasons}).",
    "zh": "**已删除未经验证的陈述**：本报告中有 {n} 条陈述引用的证据未能通过校验（与本次运行的工具输出不符），已被删除（原因：{reasons}）。",
}


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
        kept += ["", REMOVED_NOTE["zh" if language == "zh" else "en"].format(n=len(removed), reasons=why)]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n"
    gatekeeper = result.to_dict() if result else {"verdict": None, "citation_validity": 0.0, "total_claim_count": 0,
                                                 "verified_claim_count": 0, "audit": []}
    return ReportCheck(markdown=text, gatekeeper=gatekeeper, statements_total=len(cited_lines),
                       statements_verified=len(cited_lines) - len(removed), removed=removed,
                       cited_invocation_ids=sorted(kept_ids))


# --------------------------------------------------------------------------- deterministic report parts


TEXT = {
    "table_head": {"en": "| alert | service | severity | state | since | analysed |",
                   "zh": "| 告警 | 服务 | 级别 | 状态 | 开始时间 | 已分析 |"},
    "alerts_head": {"en": "**Active alerts**", "zh": "**活跃告警**"},
    "no_alerts": {"en": "No active alert.", "zh": "当前没有活跃告警。"},
    "yes": {"en": "yes", "zh": "是"},
    "no": {"en": "no", "zh": "否"},
    "degraded": {"en": "**The alert analysis could not be completed (degraded report).**",
                 "zh": "**告警分析未能完整完成（降级报告）。**"},
    "no_root": {"en": "No verified root cause is reported (reason: `{reason}`).",
                "zh": "没有给出经过验证的根因结论（原因：`{reason}`）。"},
    "per_alert": {"en": "**Per alert**", "zh": "**逐条分析**"},
    "verified": {"en": "Verified evidence:", "zh": "已验证的证据："},
    "nothing_verified": {"en": "No evidence was verified for this alert.", "zh": "该告警没有任何证据通过校验。"},
    "not_analysed": {"en": "Not analysed in this run.", "zh": "本次运行未分析该告警。"},
    "conclusion": {"en": "**Conclusion**", "zh": "**结论**"},
    "conclusion_text": {"en": "{n} of {total} alert(s) were analysed; {v} have verified evidence. No root cause is "
                              "stated because the analysis did not finish.",
                        "zh": "共 {total} 条告警，已分析 {n} 条，其中 {v} 条有经过验证的证据。由于分析未完成，不给出根因结论。"},
    "risks": {"en": "**Risks**", "zh": "**风险**"},
    "risk_unfinished": {"en": "The analysis stopped early; the alerts may have causes that were not examined.",
                        "zh": "分析提前终止，告警可能存在尚未检查到的原因。"},
    "risk_not_analysed": {"en": "{n} alert(s) were not analysed: {names}.", "zh": "{n} 条告警未被分析：{names}。"},
    "next": {"en": "**Next steps**", "zh": "**建议的下一步**"},
    "next_logs": {"en": "Check the error logs and key metrics (errors, latency, saturation) of the alerting services.",
                  "zh": "检查告警服务的错误日志和关键指标（错误率、延迟、资源饱和度）。"},
    "next_retry": {"en": "Review the queries in the run trace and run the analysis again.",
                   "zh": "在运行追踪中查看已执行的查询，然后重新发起分析。"},
    "coverage": {"en": "Coverage: {n} of {total} alert(s) analysed.", "zh": "覆盖范围：共 {total} 条告警，已分析 {n} 条。"},
    "stopped_early": {"en": "_The analysis stopped early ({reason}); this report covers only what was verified before._",
                      "zh": "_分析提前终止（{reason}）；本报告只包含此前已验证的内容。_"},
}


def _t(key: str, language: str, **values: Any) -> str:
    return TEXT[key]["zh" if language == "zh" else "en"].format(**values)


def _cell(value: Any, limit: int = 80) -> str:
    """A table cell from alert or model text: a code span whose `|` cannot split the row."""
    return md_cell(value, limit=limit)


def _name(value: Any, limit: int = 80) -> str:
    """A name from alert or model text inside a sentence or a heading: verbatim in a code span."""
    return md_code(_text(value, limit)) or "-"


def alert_table(alerts: list[Mapping[str, Any]], analysed: set[str], language: str) -> list[str]:
    if not alerts:
        return [_t("no_alerts", language)]
    rows = [_t("table_head", language), "|---|---|---|---|---|---|"]
    for a in alerts:
        done = _t("yes" if a.get("alert_id") in analysed else "no", language)
        rows.append(f"| {_cell(a.get('alertname'))} | {_cell(a.get('service'))} | {_cell(a.get('severity'), 20)} | "
                    f"{_cell(a.get('state'), 20)} | {_cell(a.get('since'), 40)} | {done} |")
    return rows


def _excerpt(text: Any) -> str:
    return md_inline(_text(text, 200))


def compose_alert_fallback(*, alerts: list[dict], results: list[TaskResult], reason: str, language: str,
                           intake_error: str | None = None) -> str:
    """The deterministic safe report: the alerts, what was verified for each, next steps; no root cause."""
    analysed = {a for r in results for a in r.task.alert_ids}
    lines = [_t("degraded", language), "", coverage_line(alerts, results, language), "",
             _t("no_root", language, reason=re.sub(r"[^a-z0-9_:.\-]", "", str(reason).lower())[:80]), ""]
    lines += [_t("alerts_head", language), "", *alert_table(alerts, analysed, language), ""]
    lines += [_t("per_alert", language), ""]
    by_alert: dict[str, list[dict]] = {}
    for result in results:
        for alert_id in result.task.alert_ids:
            by_alert.setdefault(alert_id, []).extend(result.verified_evidence)
    for a in alerts:
        lines.append(f"- **{_name(a.get('alertname'))}** ({_name(a.get('service'))})")
        evidence = by_alert.get(a["alert_id"])
        if a["alert_id"] not in analysed:
            lines.append(f"  - {_t('not_analysed', language)}")
        elif not evidence:
            lines.append(f"  - {_t('nothing_verified', language)}")
        else:
            lines.append(f"  - {_t('verified', language)}")
            seen = set()
            for item in evidence:
                key = (item.get("source_invocation_id"), item.get("raw_path"))
                if key in seen or len(seen) >= 4:
                    continue
                seen.add(key)
                lines.append(f"    - “{_excerpt(item.get('evidence_excerpt'))}” [{item.get('source_invocation_id')}]")
    with_evidence = {a for r in results if r.verified_evidence for a in r.task.alert_ids}
    lines += ["", _t("conclusion", language),
              _t("conclusion_text", language, n=len(analysed), total=len(alerts), v=len(with_evidence)), ""]
    lines += [_t("risks", language), f"- {_t('risk_unfinished', language)}"]
    missing = [a for a in alerts if a["alert_id"] not in analysed]
    if missing:
        names = ", ".join(_name(a.get("alertname"), 60) for a in missing[:10]) + (" …" if len(missing) > 10 else "")
        lines.append(f"- {_t('risk_not_analysed', language, n=len(missing), names=names)}")
    if intake_error:
        lines.append(f"- {md_inline(_text(intake_error, 300))}")
    lines += ["", _t("next", language), f"- {_t('next_logs', language)}", f"- {_t('next_retry', language)}"]
    return "\n".join(lines) + "\n"


def report_suggestions(markdown: str | None, limit: int = 5) -> list[str]:
    """The reporter's own prose lines, candidates for the labelled unchecked-suggestions section:
    tables, headings, emphasis-only lines and any line carrying a citation-like token are left out."""
    picked = []
    for line in (markdown or "").splitlines():
        stripped = line.strip()
        text = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", stripped).strip()
        if len(text) < 12 or stripped.startswith(("|", "#", "_", "**")) or id_like_tokens(text):
            continue
        picked.append(text)
        if len(picked) >= limit:
            break
    return picked


def coverage_line(alerts: list[Mapping[str, Any]], results: list[TaskResult], language: str) -> str:
    analysed = {a for r in results for a in r.task.alert_ids} & {a["alert_id"] for a in alerts}
    return _t("coverage", language, n=len(analysed), total=len(alerts))


def render_aiops_report(*, alerts: list[dict], results: list[TaskResult], language: str,
                        suggestions: list[str]) -> tuple[str, list[dict], list[str], list[dict]]:
    """The served report (SPEC R1): the coverage, the alerts, then per alert only the verified claims of the
    tasks that analysed it, each with its quoted excerpts and citations, then labelled unchecked suggestions
    (a destructive one with a warning). Returns (markdown, removed audit entries, cited invocation ids,
    advice with its flags)."""
    analysed = {a for r in results for a in r.task.alert_ids}
    lines = [coverage_line(alerts, results, language), "", _t("alerts_head", language), "",
             *alert_table(alerts, analysed, language), "", _t("per_alert", language), ""]
    removed: list[dict] = []
    cited: list[str] = []
    flagged: list[str] = []
    names = {a["alert_id"]: _name(a.get("alertname")) for a in alerts}
    for result in results:
        covered = ", ".join(names.get(a, md_code(a)) for a in result.task.alert_ids) or "-"
        head = f"**{_name(result.task.service)}** ({covered})"
        verified_ids = {str(e.get("source_invocation_id")) for e in result.verified_evidence}
        claims = list(result.verified_claims)
        shown = []
        for claim in claims[:8]:
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
        lines.append(f"- {head}:" if shown else f"- {head}: {_t('nothing_verified', language)}")
        lines += [f"    - {sentence}" for sentence in shown]
    missing = [names[a["alert_id"]] for a in alerts if a["alert_id"] not in analysed]
    if missing:
        lines.append(f"- {', '.join(missing[:10])}: {_t('not_analysed', language)}")
    kept: list[str] = []
    advice: list[dict] = []
    for raw, from_knowledge in [(f, True) for f in flagged] + [(s, False) for s in suggestions]:
        cleaned, why = clean_suggestion(raw, prompt_echoed)
        if cleaned is None:
            removed.append({"where": "suggestions", "reason": why})
            continue
        destructive = from_knowledge or is_destructive(raw)
        shown_text = f"{render_text('destructive', language)}{cleaned}" if destructive else cleaned
        if shown_text not in kept and len(kept) < 5:
            kept.append(shown_text)
            advice.append({"text": shown_text, "verified": False, "destructive": destructive, "claimId": None})
    if kept:
        lines += ["", render_text("suggestions", language)] + [f"- {s}" for s in kept]
    return "\n".join(lines) + "\n", removed, sorted(set(cited)), advice


def has_alert_table(markdown: str) -> bool:
    return any(line.lstrip().startswith("|") and line.count("|") >= 3 for line in markdown.splitlines())
