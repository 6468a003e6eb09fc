"""The alert-analysis supervisor (F-60, seed 004 §8): a bounded loop in which a planner decides PLAN,
EXECUTE or FINISH each round and an executor investigates one task with the recorded tools; the
Gatekeeper verifies every citation, and the reporter's Markdown is checked again by the same Gatekeeper.

Framework-free: it runs on an `AgentContext` (model, ToolBox, step recorder, invocation lookup). Every
expected failure (a model fault, a bad output, a failing tool, a spent budget) becomes a recorded
status and, at worst, a deterministic degraded report: `AlertSupervisor.run` never raises for them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Mapping

from diagnosis.agents.catalog import prompt, prompt_echoed
from diagnosis.agents.nodes import run_inputs
from diagnosis.agents.runtime import AgentContext, fence_tool_output, question_language
from diagnosis.answer_render import claim_sentence, clean_suggestion, knowledge_only
from diagnosis.answer_render import text as render_text
from diagnosis.contracts import EXECUTOR_EVIDENCE_VERSION, BindingReason
from diagnosis.gatekeeper import project_verified_input, verify_bindings
from diagnosis.llm.base import ModelError, ModelInvalidOutputError
from diagnosis.model_text import foreign_citations, id_like_tokens
from diagnosis.tools.registry import ALLOWED_TOOLS, BLOCKED, SUCCESS, ToolOutcome, openai_tool_specs

ROLE = "aiops"
MAX_ROUNDS = 4
MAX_ALERTS = 50
MAX_TASKS = 10
MAX_CLAIMS_PER_TASK = 30
MIN_TASK_TOOL_CALLS = 2
REPORT_MAX_CHARS = 40_000
ACTIVE_STATES = ("firing", "pending")
INACTIVE_STATES = ("resolved", "inactive")
SERVICE_LABELS = ("service", "app", "application", "app_kubernetes_io_name", "job", "container")
SEVERITY_RANK = {"critical": 0, "page": 0, "error": 1, "high": 1, "warning": 2, "medium": 2, "info": 3, "low": 3}
# Anything that looks like an invocation citation is checked, not only well-formed ids: a fabricated
# `[inv-fake]` must not slip through as plain text.
CITATION_RE = re.compile(r"\binv-[\w-]*\w")
TASK_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,16}$")
PROBE_PATH = "$"

EventSink = Callable[[str, dict], None]


class Node(StrEnum):
    INTAKE = "aiops_intake"
    PLANNER = "aiops_planner"
    EXECUTOR = "aiops_executor"
    GATEKEEPER = "aiops_gatekeeper"
    REPORTER = "aiops_reporter"
    REPORT_CHECK = "aiops_report_check"


class Decision(StrEnum):
    PLAN = "PLAN"
    EXECUTE = "EXECUTE"
    FINISH = "FINISH"


EXECUTOR_STATUSES = ("COMPLETED", "PARTIAL", "FAILED")


def _invalid(message: str, where: str | None = None) -> ModelInvalidOutputError:
    return ModelInvalidOutputError(message, field=where)


def _text(value: Any, limit: int) -> str:
    return " ".join(str(value).split())[:limit] if value is not None else ""


# --------------------------------------------------------------------------- alerts


def alert_service(labels: Mapping[str, str]) -> str:
    """The service an alert is about: the first of the usual labels that is set."""
    for name in SERVICE_LABELS:
        value = labels.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def alert_record(raw: Mapping[str, Any], *, alert_id: str, source: str, invocation_id: str | None = None,
                 index: int | None = None) -> dict[str, Any]:
    """One alert in the shape every phase sees, from a request, a webhook or a `query_alerts` result."""
    labels = {str(k): str(v) for k, v in (raw.get("labels") or {}).items()} if isinstance(raw.get("labels"), Mapping) else {}
    notes = raw.get("annotations")
    annotations = {str(k): str(v) for k, v in notes.items()} if isinstance(notes, Mapping) else {}
    state = str(raw.get("state") or raw.get("status") or "firing").strip().lower()
    record = {
        "alert_id": alert_id, "alertname": labels.get("alertname", ""), "service": alert_service(labels),
        "severity": labels.get("severity", ""), "state": state,
        "since": str(raw.get("activeAt") or raw.get("startsAt") or ""),
        "summary": annotations.get("summary", ""), "description": annotations.get("description", ""),
        "labels": labels, "annotations": annotations, "source": source,
    }
    if raw.get("fingerprint"):
        record["fingerprint"] = str(raw["fingerprint"])
    if invocation_id:
        record["invocation_id"], record["raw_path"] = invocation_id, f"$.alerts[{index}]"
    return record


def alert_priority(alert: Mapping[str, Any]) -> tuple:
    """Firing before pending, most severe first, oldest first."""
    return (0 if alert.get("state") == "firing" else 1,
            SEVERITY_RANK.get(str(alert.get("severity", "")).lower(), 4), str(alert.get("since", "")))


def alerts_language(alerts: list[Mapping[str, Any]]) -> str:
    """`zh` when most alerts are written in Chinese, else `en` (the default)."""
    votes = Counter(question_language(f"{a.get('summary', '')} {a.get('description', '')}") for a in alerts)
    return "zh" if votes["zh"] > votes["en"] else "en"


def compact_alert(alert: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("alert_id", "alertname", "service", "severity", "state", "since", "summary", "description")
    return {k: alert.get(k, "") for k in keys}


# --------------------------------------------------------------------------- tasks and results


@dataclass
class Task:
    task_id: str
    service: str
    alert_ids: list[str]
    goal: str
    status: str = "pending"  # pending | done

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "service": self.service, "alert_ids": list(self.alert_ids),
                "goal": self.goal, "status": self.status}


@dataclass
class TaskResult:
    task: Task
    round: int
    status: str  # COMPLETED | PARTIAL | FAILED (from the executor) | INVALID_OUTPUT | TOOL_BLOCKED
    summary: str = ""
    next_hint: str = ""
    claims: list = field(default_factory=list)
    gatekeeper: dict = field(default_factory=dict)
    verified_claims: list = field(default_factory=list)
    verified_evidence: list = field(default_factory=list)
    invocation_ids: list = field(default_factory=list)
    error: dict | None = None

    def finding(self, *, for_planner: bool) -> dict[str, Any]:
        """What later phases see: verified claims only. The executor's own summary is never passed on
        (unverified); its hint is a planning aid, so only the planner gets it."""
        found = {
            "task_id": self.task.task_id, "service": self.task.service, "alert_ids": list(self.task.alert_ids),
            "status": self.status, "verdict": self.gatekeeper.get("verdict"),
            "verified_claims": self.verified_claims,
            "claims_verified": self.gatekeeper.get("verified_claim_count", 0),
            "claims_total": self.gatekeeper.get("total_claim_count", 0),
        }
        if for_planner:
            found["next_hint"] = self.next_hint
        return found

    def audit(self) -> dict[str, Any]:
        return {"task": self.task.to_dict(), "round": self.round, "status": self.status, "summary": self.summary,
                "next_hint": self.next_hint, "error": self.error, "invocation_ids": self.invocation_ids,
                "gatekeeper": self.gatekeeper}


@dataclass
class ReportCheck:
    markdown: str
    gatekeeper: dict
    statements_total: int
    statements_verified: int
    removed: list[dict]
    cited_invocation_ids: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"statements_total": self.statements_total, "statements_verified": self.statements_verified,
                "removed": self.removed, "cited_invocation_ids": self.cited_invocation_ids,
                "gatekeeper": self.gatekeeper}


@dataclass
class AiOpsOutcome:
    report_markdown: str
    degraded: bool
    language: str
    alerts: list[dict]
    alerts_source: str
    intake: dict
    tasks: list[Task]
    results: list[TaskResult]
    decisions: list[dict]
    rounds: int
    max_rounds: int
    termination_reason: str
    fallback_used: bool
    fallback_reason: str | None
    report_check: ReportCheck

    @property
    def cited_invocation_ids(self) -> list[str]:
        return self.report_check.cited_invocation_ids

    def rule_evaluation(self, *, outcomes: list[ToolOutcome], budget: dict, alerts_ignored: int = 0) -> dict[str, Any]:
        """`aiops_rule_evaluation`: deterministic figures about this run, no model judgement."""
        executed = self.results
        analysed = {a for r in executed for a in r.task.alert_ids}
        with_findings = {a for r in executed if r.verified_claims for a in r.task.alert_ids}
        verified_bindings = sum(r.gatekeeper.get("verified_binding_count", 0) for r in executed)
        total_bindings = sum(r.gatekeeper.get("total_binding_count", 0) for r in executed)
        by_status = Counter(o.status for o in outcomes)
        report_gk = self.report_check.gatekeeper
        return {
            "version": "aiops-rules-v1",
            "alerts_total": len(self.alerts), "alerts_ignored": alerts_ignored, "alerts_source": self.alerts_source,
            "alerts_analysed": len(analysed), "alerts_with_verified_findings": len(with_findings),
            "rounds": self.rounds, "max_rounds": self.max_rounds,
            "decisions": [d["decision"] for d in self.decisions],
            "tasks_planned": len(self.tasks), "tasks_executed": len(executed),
            "citation_validity": round(verified_bindings / total_bindings, 4) if total_bindings else 0.0,
            "bindings_verified": verified_bindings, "bindings_total": total_bindings,
            "claims_verified": sum(r.gatekeeper.get("verified_claim_count", 0) for r in executed),
            "claims_total": sum(r.gatekeeper.get("total_claim_count", 0) for r in executed),
            "report_citation_validity": report_gk.get("citation_validity", 0.0),
            "report_statements_total": self.report_check.statements_total,
            "report_statements_verified": self.report_check.statements_verified,
            "report_statements_removed": len(self.report_check.removed),
            "tool_calls": len(outcomes), "tool_calls_by_status": dict(by_status),
            "tool_success_rate": round(by_status.get(SUCCESS, 0) / len(outcomes), 4) if outcomes else None,
            "fallback_used": self.fallback_used, "fallback_reason": self.fallback_reason,
            "degraded": self.degraded, "termination_reason": self.termination_reason,
            "budget": budget,
        }

    def audit(self) -> dict[str, Any]:
        """The per-task and report Gatekeeper audits and the planner's decisions, for the trace."""
        return {"alerts_source": self.alerts_source, "intake": self.intake, "language": self.language,
                "decisions": self.decisions, "tasks": [r.audit() for r in self.results],
                "plan": [t.to_dict() for t in self.tasks], "report_check": self.report_check.to_dict()}


# --------------------------------------------------------------------------- output validation


def _plan_item(item: Any, index: int, alert_ids: set[str], where: str) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise _invalid(f"{where}[{index}] must be an object", f"{where}[{index}]")
    service = item.get("service")
    if not isinstance(service, str) or not service.strip() or len(service) > 128:
        raise _invalid(f"{where}[{index}].service must be a service name", f"{where}[{index}].service")
    ids = [a for a in item.get("alert_ids") or [] if isinstance(a, str) and a in alert_ids] \
        if isinstance(item.get("alert_ids"), list) else []
    task_id = item.get("task_id")
    return {"task_id": task_id if isinstance(task_id, str) and TASK_ID_RE.match(task_id) else None,
            "service": service.strip(), "alert_ids": list(dict.fromkeys(ids)), "goal": _text(item.get("goal", ""), 300)}


def validate_decision(output: Any, alert_ids: set[str]) -> dict[str, Any]:
    """The planner's answer: a decision, and the plan / task it needs."""
    if not isinstance(output, Mapping):
        raise _invalid("planner output must be a JSON object", "decision")
    decision = str(output.get("decision", "")).strip().upper()
    if decision not in Decision.__members__:
        raise _invalid("planner 'decision' must be PLAN, EXECUTE or FINISH", "decision")
    plan = output.get("plan")
    if plan is not None and not isinstance(plan, list):
        raise _invalid("planner 'plan' must be a list of tasks", "plan")
    items = [_plan_item(item, i, alert_ids, "plan") for i, item in enumerate((plan or [])[:MAX_TASKS])]
    if decision == Decision.PLAN and not items:
        raise _invalid("a PLAN decision needs a non-empty 'plan'", "plan")
    inline = output.get("task")
    budget = output.get("tool_budget")
    return {
        "decision": decision, "rationale": _text(output.get("rationale", ""), 500), "plan": items,
        "task_id": output.get("task_id") if isinstance(output.get("task_id"), str) else None,
        "task": _plan_item(inline, 0, alert_ids, "task") if isinstance(inline, Mapping) else None,
        "tool_budget": budget if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0 else None,
    }


def validate_execution(output: Any) -> dict[str, Any]:
    """The executor's answer: {status, summary, evidence: [executor_evidence_v2 claims], nextHint}."""
    if not isinstance(output, Mapping):
        raise _invalid("executor output must be a JSON object", "status")
    status = str(output.get("status", "")).strip().upper()
    if status not in EXECUTOR_STATUSES:
        raise _invalid("executor 'status' must be COMPLETED, PARTIAL or FAILED", "status")
    evidence = output.get("evidence", [])
    if not isinstance(evidence, list):
        raise _invalid("executor 'evidence' must be a list of claims", "evidence")
    hint = output.get("nextHint", output.get("next_hint", ""))
    return {"status": status, "summary": _text(output.get("summary", ""), 2000), "evidence": evidence[:MAX_CLAIMS_PER_TASK],
            "next_hint": _text(hint, 500) if isinstance(hint, str) else ""}


def validate_report(output: Any) -> str:
    if not isinstance(output, Mapping) or not isinstance(output.get("report_markdown"), str) \
            or not output["report_markdown"].strip():
        raise _invalid("reporter output needs a non-empty 'report_markdown'", "report_markdown")
    status = output.get("status", "FINISH")
    if str(status).upper() != "FINISH":
        raise _invalid("reporter 'status' must be FINISH", "status")
    return output["report_markdown"].strip()[:REPORT_MAX_CHARS]


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
    "stopped_early": {"en": "_The analysis stopped early ({reason}); this report covers only what was verified before._",
                      "zh": "_分析提前终止（{reason}）；本报告只包含此前已验证的内容。_"},
}


def _t(key: str, language: str, **values: Any) -> str:
    return TEXT[key]["zh" if language == "zh" else "en"].format(**values)


def _cell(value: Any, limit: int = 80) -> str:
    return _text(value, limit).replace("|", "\\|") or "-"


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
    return _text(text, 200).replace("`", "'")


def compose_alert_fallback(*, alerts: list[dict], results: list[TaskResult], reason: str, language: str,
                           intake_error: str | None = None) -> str:
    """The deterministic safe report: the alerts, what was verified for each, next steps; no root cause."""
    analysed = {a for r in results for a in r.task.alert_ids}
    lines = [_t("degraded", language), "", _t("no_root", language, reason=reason), ""]
    lines += [_t("alerts_head", language), "", *alert_table(alerts, analysed, language), ""]
    lines += [_t("per_alert", language), ""]
    by_alert: dict[str, list[dict]] = {}
    for result in results:
        for alert_id in result.task.alert_ids:
            by_alert.setdefault(alert_id, []).extend(result.verified_evidence)
    for a in alerts:
        lines.append(f"- **{_cell(a.get('alertname'))}** ({_cell(a.get('service'))})")
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
                lines.append(f"    - `{_excerpt(item.get('evidence_excerpt'))}` [{item.get('source_invocation_id')}]")
    with_evidence = {a for r in results if r.verified_evidence for a in r.task.alert_ids}
    lines += ["", _t("conclusion", language),
              _t("conclusion_text", language, n=len(analysed), total=len(alerts), v=len(with_evidence)), ""]
    lines += [_t("risks", language), f"- {_t('risk_unfinished', language)}"]
    missing = [a for a in alerts if a["alert_id"] not in analysed]
    if missing:
        names = ", ".join(_text(a.get("alertname"), 60) for a in missing[:10]) + (" …" if len(missing) > 10 else "")
        lines.append(f"- {_t('risk_not_analysed', language, n=len(missing), names=names)}")
    if intake_error:
        lines.append(f"- {_text(intake_error, 300)}")
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


def render_aiops_report(*, alerts: list[dict], results: list[TaskResult], language: str,
                        suggestions: list[str]) -> tuple[str, list[dict], list[str]]:
    """The served report (SPEC R1): the alerts, then per alert only the verified claims of the tasks that
    analysed it, each with its quoted excerpts and citations, then labelled unchecked suggestions.
    Returns (markdown, removed audit entries, cited invocation ids)."""
    analysed = {a for r in results for a in r.task.alert_ids}
    lines = [_t("alerts_head", language), "", *alert_table(alerts, analysed, language), "", _t("per_alert", language), ""]
    removed: list[dict] = []
    cited: list[str] = []
    names = {a["alert_id"]: _cell(a.get("alertname")) for a in alerts}
    for result in results:
        covered = ", ".join(names.get(a, a) for a in result.task.alert_ids) or "-"
        head = f"**{_cell(result.task.service)}** ({covered})"
        verified_ids = {str(e.get("source_invocation_id")) for e in result.verified_evidence}
        claims = list(result.verified_claims)
        shown = []
        for claim in claims[:8]:
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
    for raw in suggestions:
        cleaned, why = clean_suggestion(raw, prompt_echoed)
        if cleaned is None:
            removed.append({"where": "suggestions", "reason": why})
        elif cleaned not in kept:
            kept.append(cleaned)
    if kept:
        lines += ["", render_text("suggestions", language)] + [f"- {s}" for s in kept[:5]]
    return "\n".join(lines) + "\n", removed, sorted(set(cited))


def has_alert_table(markdown: str) -> bool:
    return any(line.lstrip().startswith("|") and line.count("|") >= 3 for line in markdown.splitlines())


# --------------------------------------------------------------------------- the supervisor


class AlertSupervisor:
    """One AI_OPS run: intake, planner/executor rounds, report, report check."""

    def __init__(self, ctx: AgentContext, *, max_rounds: int = MAX_ROUNDS, on_event: EventSink | None = None,
                 heartbeat: Callable[[], Any] | None = None):
        self.ctx = ctx
        self.max_rounds = max(1, int(max_rounds))
        self.on_event = on_event or (lambda kind, data: None)
        self.heartbeat = heartbeat or (lambda: None)
        self.fault: str | None = None

    def _event(self, node: str, outcome: str, reason_code: str, attempt: int = 1, **extra: Any) -> None:
        self.heartbeat()
        self.on_event("node", {"node": node, "outcome": outcome, "reason_code": reason_code, "attempt": attempt, **extra})

    # -- intake ------------------------------------------------------------------------------------
    def _intake(self, alerts: list[dict] | None) -> tuple[list[dict], str, dict, ToolOutcome | None]:
        if alerts:
            self._event(Node.INTAKE, "request", "alerts_given", alerts=len(alerts))
            return list(alerts)[:MAX_ALERTS], "request", {"source": "request", "status": SUCCESS}, None
        outcome = self.ctx.tools.call("query_alerts", {})
        intake = {"source": "query_alerts", "status": outcome.status, "invocation_id": outcome.invocation_id,
                  "error": outcome.error or None}
        found: list[dict] = []
        if outcome.status == SUCCESS and isinstance(outcome.result, Mapping):
            raws = outcome.result.get("alerts") if isinstance(outcome.result.get("alerts"), list) else []
            for index, raw in enumerate(raws):
                if not isinstance(raw, Mapping):
                    continue
                record = alert_record(raw, alert_id=f"a{len(found) + 1}", source="query_alerts",
                                      invocation_id=outcome.invocation_id, index=index)
                if record["state"] in ACTIVE_STATES and len(found) < MAX_ALERTS:
                    found.append(record)
        self._event(Node.INTAKE, outcome.status, "query_alerts", alerts=len(found), invocation_id=outcome.invocation_id)
        return found, "query_alerts", intake, outcome

    # -- run ----------------------------------------------------------------------------------------
    def run(self, *, alerts: list[dict] | None, language: str | None = None) -> AiOpsOutcome:
        alerts, source, intake, intake_outcome = self._intake(alerts)
        language = language if language in ("en", "zh") else alerts_language(alerts)
        by_id = {a["alert_id"]: a for a in alerts}
        tasks: list[Task] = []
        results: list[TaskResult] = []
        decisions: list[dict] = []
        rounds, termination = 0, "max_rounds"
        if not alerts:
            termination = "no_active_alerts" if intake.get("status") == SUCCESS else "alerts_unavailable"
        else:
            for round_no in range(1, self.max_rounds + 1):
                if self.ctx.tools.remaining <= 0:
                    termination = "tool_budget_spent"
                    break
                rounds = round_no
                decision = self._plan(round_no, alerts, tasks, results, language)
                if decision is None:
                    termination = "planner_failed"
                    break
                decisions.append({"round": round_no, "decision": decision["decision"], "rationale": decision["rationale"],
                                  "task_id": decision["task_id"]})
                if decision["decision"] == Decision.FINISH:
                    termination = "finished"
                    break
                self._apply_plan(tasks, decision["plan"], by_id)
                if decision["decision"] == Decision.PLAN:
                    continue
                task = self._pick(tasks, decision, by_id)
                if task is None:
                    termination = "nothing_to_execute"
                    break
                pending = sum(1 for t in tasks if t.status == "pending")
                share = max(MIN_TASK_TOOL_CALLS, self.ctx.tools.remaining // max(1, pending))
                budget = min(self.ctx.tools.remaining, decision["tool_budget"] or share)
                task.status = "done"
                results.append(self._execute(task, round_no, by_id, intake_outcome, language, budget))
        intake_error = None if intake.get("status") == SUCCESS else f"query_alerts: {intake.get('error') or intake.get('status')}"
        markdown, check, fallback_reason = self._report(alerts, results, termination, language, intake, intake_error)
        degraded = fallback_reason is not None or self.fault is not None or intake_error is not None
        return AiOpsOutcome(
            report_markdown=markdown, degraded=degraded, language=language, alerts=alerts, alerts_source=source,
            intake=intake, tasks=tasks, results=results, decisions=decisions, rounds=rounds,
            max_rounds=self.max_rounds, termination_reason=termination, fallback_used=fallback_reason is not None,
            fallback_reason=fallback_reason, report_check=check,
        )

    # -- planner ------------------------------------------------------------------------------------
    def _plan(self, round_no: int, alerts: list[dict], tasks: list[Task], results: list[TaskResult],
              language: str) -> dict | None:
        payload = {
            "phase": "plan", "round": round_no, "max_rounds": self.max_rounds, "language": language,
            "alerts": [compact_alert(a) for a in alerts], "plan": [t.to_dict() for t in tasks],
            "findings": [r.finding(for_planner=True) for r in results],
            "tool_budget": self.ctx.tools.remaining, "allowed_tools": sorted(ALLOWED_TOOLS),
        }
        last: ModelError | None = None
        for attempt in (1, 2):  # one technical retry, as for the chat planner
            try:
                reply = self.ctx.call_model(node=Node.PLANNER, role=ROLE, attempt=attempt, system=prompt(ROLE).text,
                                            user=payload, structured_input=payload)
                decision = validate_decision(reply.parse_json(), {a["alert_id"] for a in alerts})
            except ModelError as exc:
                last = exc
                self._event(Node.PLANNER, "ERROR", exc.code, attempt, round=round_no)
                if exc.kind == "non_retryable":
                    break
                continue
            self._event(Node.PLANNER, decision["decision"], "decision", attempt, round=round_no,
                        task_id=decision["task_id"])
            return decision
        self.fault = f"{Node.PLANNER}:{last.code if last else 'unknown'}"
        return None

    def _apply_plan(self, tasks: list[Task], items: list[dict], by_id: Mapping[str, dict]) -> None:
        """A new plan replaces the pending tasks; finished ones stay. Ids are made unique."""
        if not items:
            return
        tasks[:] = [t for t in tasks if t.status != "pending"]
        for item in items:
            self._add_task(tasks, item, by_id)

    def _add_task(self, tasks: list[Task], item: dict, by_id: Mapping[str, dict]) -> Task | None:
        if len(tasks) >= MAX_TASKS:
            return None
        used = {t.task_id for t in tasks}
        task_id = item.get("task_id")
        if not task_id or task_id in used:
            task_id = next(f"t{n}" for n in range(1, MAX_TASKS * 4) if f"t{n}" not in used)
        alert_ids = item["alert_ids"] or [a for a, alert in by_id.items() if alert.get("service") == item["service"]]
        task = Task(task_id=task_id, service=item["service"], alert_ids=alert_ids, goal=item["goal"])
        tasks.append(task)
        return task

    def _pick(self, tasks: list[Task], decision: dict, by_id: Mapping[str, dict]) -> Task | None:
        pending = [t for t in tasks if t.status == "pending"]
        named = next((t for t in pending if t.task_id == decision["task_id"]), None)
        if named is not None:
            return named
        if decision["task"] is not None:
            return self._add_task(tasks, decision["task"], by_id)
        return pending[0] if pending else None

    # -- executor -----------------------------------------------------------------------------------
    def _execute(self, task: Task, round_no: int, by_id: Mapping[str, dict], intake: ToolOutcome | None,
                 language: str, tool_budget: int) -> TaskResult:
        ctx = self.ctx
        payload = {
            "phase": "execute", "round": round_no, "language": language, "task": task.to_dict(),
            "alerts": [compact_alert(by_id[a]) for a in task.alert_ids if a in by_id],
            "tool_budget": tool_budget, "allowed_tools": sorted(ALLOWED_TOOLS),
        }
        user = json.dumps(payload, ensure_ascii=False, default=str)
        context = []
        if intake is not None and intake.status == SUCCESS:
            user += "\n\nThe active alerts as returned by query_alerts (citable):\n" + fence_tool_output(intake)
            context = [intake.to_dict()]
        messages = [{"role": "system", "content": prompt(ROLE).text}, {"role": "user", "content": user}]
        results: list[dict] = []
        used = 0
        try:
            for _ in range(tool_budget + 3):
                offer = used < tool_budget and ctx.tools.remaining > 0
                reply = ctx.call_model(
                    node=Node.EXECUTOR, role=ROLE, attempt=1, system="", user=None, messages=messages,
                    tools=openai_tool_specs() if offer else None, json_output=not offer,
                    structured_input={**payload, "tool_budget": max(0, tool_budget - used), "tool_results": results,
                                      "context_results": context},
                )
                if not reply.tool_calls:
                    output = validate_execution(reply.parse_json())
                    break
                messages.append(reply.as_assistant_message())
                for call in reply.tool_calls:
                    outcome = ctx.tools.call(call.name, call.arguments)
                    used += 1
                    if outcome.status == BLOCKED and call.name not in ALLOWED_TOOLS:
                        self._event(Node.EXECUTOR, "TOOL_BLOCKED", "tool_blocked", round=round_no, task_id=task.task_id)
                        return TaskResult(task, round_no, "TOOL_BLOCKED", invocation_ids=[r["invocation_id"] for r in results] + [outcome.invocation_id],
                                          error={"code": "tool_blocked", "tool": call.name[:64], "invocation_id": outcome.invocation_id},
                                          gatekeeper={})
                    results.append(outcome.to_dict())
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": fence_tool_output(outcome)})
            else:
                raise _invalid("the executor never produced its final report")
        except ModelError as exc:
            status = "INVALID_OUTPUT" if exc.kind == "invalid_output" else "FAILED"
            self._event(Node.EXECUTOR, status, exc.code, round=round_no, task_id=task.task_id)
            return TaskResult(task, round_no, status, error=exc.to_dict(), invocation_ids=[r["invocation_id"] for r in results])
        self._event(Node.EXECUTOR, output["status"], "executed", round=round_no, task_id=task.task_id, tool_calls=used)
        claims = [_namespaced(claim, task.task_id) for claim in output["evidence"]]
        executor_output = {"version": EXECUTOR_EVIDENCE_VERSION, "summary": output["summary"], "claims": claims,
                           "open_questions": []}
        gatekeeper = verify_bindings(executor_output=executor_output, run_id=ctx.run_id, lookup=ctx.lookup,
                                     echo_sources=run_inputs("", ctx.tools.outcomes))
        verified_output, verified_evidence = project_verified_input(executor_output=executor_output, gatekeeper_result=gatekeeper)
        self._event(Node.GATEKEEPER, str(gatekeeper.verdict), str(gatekeeper.reason_code), round=round_no,
                    task_id=task.task_id, claims_verified=gatekeeper.verified_claim_count,
                    claims_total=gatekeeper.total_claim_count)
        return TaskResult(task, round_no, output["status"], summary=output["summary"], next_hint=output["next_hint"],
                          claims=claims, gatekeeper=gatekeeper.to_dict(), verified_claims=verified_output["claims"],
                          verified_evidence=verified_evidence, invocation_ids=[r["invocation_id"] for r in results])

    # -- report -------------------------------------------------------------------------------------
    def _report(self, alerts: list[dict], results: list[TaskResult], termination: str, language: str, intake: dict,
                intake_error: str | None) -> tuple[str, ReportCheck, str | None]:
        analysed = {a: r.task.task_id for r in results for a in r.task.alert_ids}
        payload = {
            "phase": "report", "language": language, "termination_reason": termination,
            "alerts": [{**compact_alert(a), "analysed": a["alert_id"] in analysed, "task_id": analysed.get(a["alert_id"])}
                       for a in alerts],
            "findings": [r.finding(for_planner=False) for r in results],
            "not_analysed": [a["alert_id"] for a in alerts if a["alert_id"] not in analysed],
            "intake": {k: v for k, v in intake.items() if k in ("source", "status", "error")},
            "tool_calls": {"used": self.ctx.tools.calls, "max": self.ctx.tools.max_calls},
        }
        evidence = [e for r in results for e in r.verified_evidence]
        tool_names = {o.invocation_id: o.tool_name for o in self.ctx.tools.outcomes}

        def checked(markdown: str) -> ReportCheck:
            return check_report(markdown, run_id=self.ctx.run_id, lookup=self.ctx.lookup, verified_evidence=evidence,
                                tool_names=tool_names, language=language)

        reason: str | None = None
        markdown: str | None = None
        for attempt in (1, 2):
            try:
                reply = self.ctx.call_model(node=Node.REPORTER, role=ROLE, attempt=attempt, system=prompt(ROLE).text,
                                            user=payload, structured_input=payload)
                markdown = validate_report(reply.parse_json())
                break
            except ModelError as exc:
                reason = f"{Node.REPORTER}:{exc.code}"
                self._event(Node.REPORTER, "ERROR", exc.code, attempt)
                if exc.kind == "non_retryable":
                    break
        if markdown is not None:
            self._event(Node.REPORTER, "COMPLETED", "report_written")
            # The reporter's text is audited (which of its cited lines would verify) but never served as
            # is: the server renders the report from the verified task evidence (SPEC R1).
            check = checked(markdown)
            emptied = check.removed and check.statements_verified == 0 and evidence
            if not emptied:
                text, removed, cited = render_aiops_report(alerts=alerts, results=results, language=language,
                                                           suggestions=report_suggestions(markdown))
                if self.fault or intake_error:  # the reporter may not say so itself: the run does
                    text = _t("stopped_early", language, reason=self.fault or intake_error) + "\n\n" + text
                if check.removed:  # say that the reporter cited evidence that did not verify
                    why = ", ".join(sorted({r for item in check.removed for r in item["reasons"].values()}))
                    text += "\n" + REMOVED_NOTE["zh" if language == "zh" else "en"].format(n=len(check.removed),
                                                                                         reasons=why) + "\n"
                check.markdown, check.cited_invocation_ids = text, cited
                check.removed = check.removed + [{"rendered": True, **r} for r in removed]
                self._event(Node.REPORT_CHECK, "PASS" if not check.removed else "STATEMENTS_REMOVED", "report_checked",
                            statements_verified=check.statements_verified, statements_removed=len(check.removed))
                return text, check, None  # an earlier planner fault still marks the run degraded (see run())
            reason = f"{Node.REPORT_CHECK}:no_verified_statement"
        reason = reason or "aiops_reporter:unknown"
        why = self.fault or reason
        fallback = compose_alert_fallback(alerts=alerts, results=results, reason=why, language=language,
                                          intake_error=intake_error)
        check = checked(fallback)
        self._event(Node.REPORT_CHECK, "FALLBACK", reason, statements_verified=check.statements_verified,
                    statements_removed=len(check.removed))
        return check.markdown, check, reason


def _namespaced(claim: Any, task_id: str) -> Any:
    """Claim ids unique across tasks (`t1.c1`), so one run's audits never collide."""
    if isinstance(claim, Mapping) and isinstance(claim.get("claim_id"), str) and claim["claim_id"].strip():
        return {**claim, "claim_id": f"{task_id}.{claim['claim_id']}"[:64]}
    return claim
