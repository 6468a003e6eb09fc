"""Alert analysis (role aiops): the supervisor's plan, execution and report."""

from __future__ import annotations

import re
from typing import Any, Mapping
from diagnosis.llm.base import ChatRequest, ToolCall

from diagnosis.llm.offline.lexicon import (
    BADGE,
    CAUSES,
    CAUSE_BY_KEY,
    Cause,
    KNOWLEDGE_TOP_K,
    LOG_LIMIT,
    _json,
    _short,
    question_language,
)
from diagnosis.llm.offline.observations import Observations
from diagnosis.llm.offline.hypotheses import diagnose
from diagnosis.llm.offline.claims import ClaimBook, build_claims, follow_up_calls
from diagnosis.llm.offline.composer import _evidence_line, _t
from diagnosis.llm.offline.findings import NothingWrong, RootCause, RunbookAdvice, finding_of
from diagnosis.llm.offline.taxonomy import GENERIC_ACTIONS
from diagnosis.llm.offline.roles import _last_round_services, _offered_tools, _tool_calls, _tool_rounds


# --------------------------------------------------------------------------- alert analysis (role aiops)

AIOPS_MIN_TASK_CALLS = 3  # logs, metrics and runbooks of one service
AIOPS_SEVERITY = {"critical": 0, "page": 0, "error": 1, "high": 1, "warning": 2, "medium": 2, "info": 3, "low": 3}
CITATION_LIKE = re.compile(r"\binv-[\w-]*\w")
A = {  # the alert report, in the language of the alerts
    "alerts_head": {"en": "**Active alerts**", "zh": "**活跃告警**"},
    "table_head": {"en": "| alert | service | severity | state | since | analysed |",
                   "zh": "| 告警 | 服务 | 级别 | 状态 | 开始时间 | 已分析 |"},
    "no_alerts": {"en": "No active alert.", "zh": "当前没有活跃告警。"},
    "yes": {"en": "yes", "zh": "是"},
    "no": {"en": "no", "zh": "否"},
    "per_alert": {"en": "**Per alert**", "zh": "**逐条分析**"},
    "root": {"en": "Root cause: **{service}** — {label}.", "zh": "根因：**{service}**：{label}。"},
    "affected": {"en": " It also explains {services}.", "zh": "它同时导致了 {services} 的问题。"},
    "trigger": {"en": " It began after: `{excerpt}`.", "zh": "问题始于：`{excerpt}`。"},
    "nothing": {"en": "No anomaly found for {service}: its metrics stay near baseline and its logs show no errors; the "
                      "alert may be noise or its threshold too tight.",
                "zh": "未发现 {service} 的异常：指标保持在基线附近，日志中没有错误；该告警可能是误报或阈值过紧。"},
    "observations": {"en": "No verified root cause; verified observations:", "zh": "没有经过验证的根因；已验证的观察结果："},
    "no_evidence": {"en": "No evidence was verified for this alert (investigation status: {status}).",
                    "zh": "该告警没有任何证据通过校验（调查状态：{status}）。"},
    "not_analysed": {"en": "Not analysed in this run", "zh": "本次运行未分析的告警"},
    "hint": {"en": "the alert text points to {label}; no tool evidence verified this",
             "zh": "告警文本指向{label}，但没有工具证据验证这一点"},
    "conclusion": {"en": "**Conclusion**", "zh": "**结论**"},
    "analysed": {"en": "{n} of {total} alert(s) were analysed.", "zh": "共 {total} 条告警，已分析 {n} 条。"},
    "roots": {"en": "Verified root cause(s): {roots}.", "zh": "经过验证的根因：{roots}。"},
    "shared": {"en": " The alerts of {services} share one root cause in {root}.",
               "zh": "{services} 的告警源于同一个根因：{root}。"},
    "urgent": {"en": " Most urgent: {root} — {label}, behind the {severity} alert {alert}.",
               "zh": "最紧急的是 {root}（{label}），对应 {severity} 级告警 {alert}。"},
    "no_roots": {"en": "No root cause could be verified for the analysed alerts.",
                 "zh": "已分析的告警均未能验证出根因。"},
    "actions": {"en": "**Recommended actions**", "zh": "**建议措施**"},
    "risks": {"en": "**Risks**", "zh": "**风险**"},
    "risk_missing": {"en": "{n} alert(s) were not analysed within the round and tool budget: {names}.",
                     "zh": "在轮次和工具调用预算内，有 {n} 条告警未被分析：{names}。"},
    "risk_no_root": {"en": "No verified root cause for {services}; another incident may be hiding there.",
                     "zh": "{services} 没有经过验证的根因，可能还隐藏着其他故障。"},
    "risk_single": {"en": "The root cause in {service} rests on {tools} evidence only.",
                    "zh": "{service} 的根因只有 {tools} 的证据支持。"},
    "risk_failed": {"en": "The investigation of {service} did not complete ({status}).",
                    "zh": "对 {service} 的调查没有完成（{status}）。"},
    "risk_intake": {"en": "The active alerts could not be fetched: {error}.", "zh": "无法获取活跃告警：{error}。"},
}


def _a(key: str, language: str, **values: Any) -> str:
    return A[key][language].format(**values)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _alert_rows(si: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The alerts of an aiops request in the supervisor's compact shape; raw alerts (labels/annotations) too."""
    rows = []
    for i, raw in enumerate(si.get("alerts") or []):
        if not isinstance(raw, Mapping):
            continue
        labels = raw.get("labels") if isinstance(raw.get("labels"), Mapping) else {}
        notes = raw.get("annotations") if isinstance(raw.get("annotations"), Mapping) else {}
        rows.append({
            "alert_id": str(raw.get("alert_id") or f"a{i + 1}"),
            "alertname": str(raw.get("alertname") or labels.get("alertname", "")),
            "service": str(raw.get("service") or labels.get("service", "")),
            "severity": str(raw.get("severity") or labels.get("severity", "")),
            "state": str(raw.get("state") or raw.get("status") or "firing"),
            "since": str(raw.get("since") or raw.get("activeAt") or raw.get("startsAt") or ""),
            "summary": str(raw.get("summary") or notes.get("summary", "")),
            "description": str(raw.get("description") or notes.get("description", "")),
            "analysed": bool(raw.get("analysed")),
        })
    return rows


# Alert labels that name a Kubernetes object (kube-state-metrics and the kubernetes-mixin alerts); the
# Prometheus `job` label is the scrape job, not a Kubernetes Job, so `job_name` is read instead.
K8S_LABELS = (("pod", "pod"), ("deployment", "deployment"), ("statefulset", "statefulset"),
              ("daemonset", "daemonset"), ("job_name", "job"), ("cronjob", "cronjob"))


def kubernetes_target(si: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, str] | None:
    """``{kind, name, namespace}`` for query_kubernetes when an alert of the task names a pod or workload."""
    wanted = {str(i) for i in task.get("alert_ids") or []}
    for i, raw in enumerate(si.get("alerts") or []):
        if not isinstance(raw, Mapping) or (wanted and str(raw.get("alert_id") or f"a{i + 1}") not in wanted):
            continue
        labels = raw.get("labels") if isinstance(raw.get("labels"), Mapping) else {}
        for label, kind in K8S_LABELS:
            name = labels.get(label)
            if isinstance(name, str) and re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name):
                target = {"kind": kind, "name": name}
                namespace = labels.get("namespace")
                if isinstance(namespace, str) and re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", namespace):
                    target["namespace"] = namespace
                return target
    return None


def _row_priority(row: Mapping[str, Any]) -> tuple:
    return (row["state"] != "firing", AIOPS_SEVERITY.get(row["severity"].lower(), 4), row["since"])


def _aiops_plan(si: Mapping[str, Any], language: str) -> dict[str, Any]:
    """PLAN one task per alerting service (most urgent first, as many as rounds and tools allow), then
    EXECUTE them one per round, then FINISH."""
    zh = language == "zh"
    alerts = _alert_rows(si)
    plan = [t for t in si.get("plan") or [] if isinstance(t, Mapping)]
    rounds_left = _int(si.get("max_rounds"), 4) - _int(si.get("round"), 1)
    budget = _int(si.get("tool_budget"), 0)
    if not alerts:
        return {"decision": "FINISH", "rationale": "没有需要分析的活跃告警。" if zh else "No active alert to analyse."}
    if not plan:
        groups: dict[str, list[dict]] = {}
        for row in sorted(alerts, key=_row_priority):
            if row["service"] and row["state"] in ("firing", "pending"):
                groups.setdefault(row["service"], []).append(row)
        capacity = min(rounds_left, budget // AIOPS_MIN_TASK_CALLS)
        if not groups or capacity < 1:
            return {"decision": "FINISH", "rationale": "没有可调查的服务或预算已用完。" if zh
                    else "No alert names a service that could be investigated within the budget."}
        tasks = []
        for n, (service, rows) in enumerate(list(groups.items())[:capacity], start=1):
            names = ", ".join(dict.fromkeys(r["alertname"] for r in rows))
            goal = (f"查明 {service} 的告警（{names}）的原因。" if zh
                    else f"Find why {names} {'fires' if len(rows) == 1 else 'fire'} for {service}.")
            tasks.append({"task_id": f"t{n}", "service": service, "alert_ids": [r["alert_id"] for r in rows], "goal": goal})
        left = len(groups) - len(tasks)
        rationale = (f"按紧急程度为 {len(tasks)} 个服务制定调查任务" + (f"，另有 {left} 个服务超出预算。" if left else "。")) if zh else \
            (f"One task per alerting service, most urgent first: {len(tasks)} task(s)"
             + (f"; {left} more service(s) do not fit the round and tool budget." if left else "."))
        return {"decision": "PLAN", "rationale": rationale, "plan": tasks}
    pending = [t for t in plan if t.get("status") == "pending"]
    if pending and budget > 0:
        task = pending[0]
        return {"decision": "EXECUTE", "task_id": task.get("task_id"), "tool_budget": max(1, budget // len(pending)),
                "rationale": (f"调查 {task.get('service')}。" if zh else f"Investigate {task.get('service')} next.")}
    return {"decision": "FINISH", "rationale": "计划中的任务已全部执行。" if zh else "Every planned task was executed."}


def _aiops_execute(request: ChatRequest, si: Mapping[str, Any], language: str) -> tuple[str | None, list[ToolCall]]:
    """Investigate one service: its logs, metrics and runbooks, then where they point; then cite what they show."""
    task = si.get("task") if isinstance(si.get("task"), Mapping) else {}
    service = str(task.get("service") or "")
    alerts = _alert_rows(si)
    results = list(si.get("tool_results") or [])
    context = list(si.get("context_results") or [])
    budget = _int(si.get("tool_budget"), 0)
    offered = _offered_tools(request)
    rounds = _tool_rounds(request)
    alert_text = " ".join(f"{a['alertname']} {a['summary']}" for a in alerts)
    if offered and budget > 0 and service:
        calls: list[tuple[str, dict]] = []
        if rounds == 0:
            calls = [("query_logs", {"service": service, "limit": LOG_LIMIT}), ("query_metrics", {"service": service})]
            target = kubernetes_target(si, task)
            if target is not None:
                calls.append(("query_kubernetes", target))  # the alert names a pod or workload: its events and states
            calls.append(("lookup_knowledge", {"query": f"{service} {alert_text}"[:500], "top_k": KNOWLEDGE_TOP_K}))
            calls = [(t, a) for t, a in calls if t in offered]
        elif rounds == 1:
            calls = follow_up_calls(Observations(context + results), [service], offered, alert_text)
        elif rounds == 2:  # one more hop: the lead named by a dependency that shows trouble itself
            calls = follow_up_calls(Observations(context + results), [service], offered, alert_text,
                                    frontier=_last_round_services(request, results))
        if calls:
            return None, _tool_calls(calls[:budget], len(results) + 1)
    obs = Observations(context + results)
    found = diagnose(obs, [service] if service else [])
    book = ClaimBook()
    summary = build_claims(obs, found, book, language)
    if (found.root and found.cause) or found.nothing_wrong:
        status = "COMPLETED"
    else:
        status = "PARTIAL" if book.claims else "FAILED"
    if found.root and found.root != service and not obs.has(found.root):
        hint = f"Query the logs and metrics of {found.root}."
    elif obs.failed:
        hint = f"A tool call failed: {obs.failed[0]}"
    elif not found.root and not found.nothing_wrong:
        hint = f"No telemetry of {service or 'the alert'} was found; check the service name of the alert."
    else:
        hint = ""
    return _json({"status": status, "summary": summary, "evidence": book.claims, "nextHint": hint}), []


def _aiops_report(si: Mapping[str, Any], language: str) -> str:
    """The Markdown alert-analysis report from the verified findings only."""
    alerts = _alert_rows(si)
    findings = [f for f in si.get("findings") or [] if isinstance(f, Mapping)]
    claims_of = {id(f): [c for c in f.get("verified_claims") or [] if isinstance(c, Mapping)] for f in findings}
    verified_ids = {str(b.get("source_invocation_id")) for claims in claims_of.values() for c in claims
                    for b in c.get("evidence") or [] if isinstance(b, Mapping)}
    legacy = Observations(si.get("tool_results") or []) if si.get("tool_results") else None

    def safe(text: str) -> str:
        text = CITATION_LIKE.sub(lambda m: m.group(0) if m.group(0) in verified_ids else "inv-…", str(text))
        return _short(text.replace("`", "'"), 220)

    def cite(claim: Mapping[str, Any]) -> str:
        ids = dict.fromkeys(str(b.get("source_invocation_id")) for b in claim.get("evidence") or []
                            if isinstance(b, Mapping) and str(b.get("source_invocation_id")) in verified_ids)
        return " ".join(f"[{i}]" for i in list(ids)[:4])

    def cell(value: str, limit: int = 80) -> str:
        return _short(value, limit).replace("|", "\\|") or "-"

    by_id = {a["alert_id"]: a for a in alerts}
    analysed = {a["alert_id"] for a in alerts if a["analysed"]} | {
        str(i) for f in findings for i in f.get("alert_ids") or []}
    lines = [BADGE[language], "", _a("alerts_head", language), ""]
    if alerts:
        lines += [_a("table_head", language), "|---|---|---|---|---|---|"]
        for a in alerts:
            lines.append(f"| {cell(a['alertname'])} | {cell(a['service'])} | {cell(a['severity'], 20)} | {cell(a['state'], 20)} "
                         f"| {cell(a['since'], 40)} | {_a('yes' if a['alert_id'] in analysed else 'no', language)} |")
    else:
        lines.append(_a("no_alerts", language))
    roots: list[tuple[Mapping, Mapping, str, Cause | None]] = []  # (finding, root claim, root service, cause)
    risks: list[str] = []
    lines += ["", _a("per_alert", language), ""]
    kinds = {"query_logs": ("Log", "日志"), "query_metrics": ("Metric", "指标"), "query_alerts": ("Alert", "告警"),
             "lookup_knowledge": ("Runbook", "运维手册")}
    for finding in findings:
        claims = claims_of[id(finding)]
        service = str(finding.get("service", ""))
        names = ", ".join(dict.fromkeys(by_id[i]["alertname"] for i in finding.get("alert_ids") or [] if i in by_id))
        lines.append(f"**{safe(names or service)}** ({safe(service)})")
        root = next((c for c in claims if isinstance(finding_of(c), RootCause)), None)
        nothing = next((c for c in claims if isinstance(finding_of(c), NothingWrong)), None)
        others = [c for c in claims if c is not root and c is not nothing and not isinstance(finding_of(c), RunbookAdvice)]
        if root is not None:
            found = finding_of(root)
            cause = CAUSE_BY_KEY.get(found.cause)
            label = cause.label(language) if cause else ("未归类的故障" if language == "zh" else "unclassified failure")
            sentence = _a("root", language, service=found.service, label=label)
            if found.affected:
                sentence += _a("affected", language, services=found.affected)
            if found.trigger:
                sentence += _a("trigger", language, excerpt=safe(found.trigger))
            lines.append(f"- {sentence} {cite(root)}".rstrip())
            for b in [b for b in root.get("evidence") or [] if isinstance(b, Mapping)][:3]:
                kind = kinds.get(str(b.get("tool_name")), ("Evidence", "证据"))[language == "zh"]
                lines.append(f"  - {kind}{'：' if language == 'zh' else ': '}`{safe(str(b.get('evidence_excerpt', '')))}` "
                             f"[{b.get('source_invocation_id')}]")
            roots.append((finding, root, found.service, cause))
            tools = {str(b.get("tool_name")) for b in root.get("evidence") or [] if isinstance(b, Mapping)}
            if not {"query_logs", "query_metrics"} <= tools:
                risks.append(_a("risk_single", language, service=found.service,
                                tools=", ".join(sorted(tools & {"query_logs", "query_metrics", "query_alerts"})) or "lookup_knowledge"))
        elif nothing is not None:
            lines.append(f"- {_a('nothing', language, service=service)} {cite(nothing)}".rstrip())
        elif claims:
            lines.append(f"- {_a('observations', language)}")
            others = claims
            risks.append(_a("risk_no_root", language, services=service))
        else:
            lines.append(f"- {_a('no_evidence', language, status=str(finding.get('status', '?')))}")
            risks.append(_a("risk_failed", language, service=service, status=str(finding.get("status", "?"))))
        for claim in others[:3]:
            lines.append(f"  - {_evidence_line(claim, language, safe)} {cite(claim)}".rstrip())
        lines.append("")
    missing = [a for a in alerts if a["alert_id"] not in analysed]
    if missing:
        lines.append(f"**{_a('not_analysed', language)}**")
    for a in missing[:20]:
        profile = legacy.profiles.get(a["service"]) if legacy else None
        cause = (profile.dominant_cause() if profile else None) or next(
            (c for c in CAUSES if c.matches_text(f"{a['alertname']} {a['summary']} {a['description']}")), None)
        hint = f": {_a('hint', language, label=cause.label(language))}" if cause is not None else ""
        lines.append(f"- {safe(a['alertname'])} ({safe(a['service'] or '-')}){hint}")
    if len(missing) > 20:
        lines.append(f"- … (+{len(missing) - 20})")
    lines += [_a("conclusion", language), _a("analysed", language, n=len(analysed & set(by_id)), total=len(alerts))]
    if roots:
        described = []
        for finding, _root, service, cause in roots:
            label = cause.label(language) if cause else "?"
            described.append(f"{service} — {label}" if language == "en" else f"{service}：{label}")
        lines[-1] += " " + _a("roots", language, roots="; ".join(dict.fromkeys(described)))
        shared: dict[str, list[str]] = {}
        for finding, _root, service, _cause in roots:
            shared.setdefault(service, []).append(str(finding.get("service", "")))
        for service, callers in shared.items():
            if len(set(callers)) > 1:
                lines[-1] += _a("shared", language, services=", ".join(dict.fromkeys(callers)), root=service)
        urgent = min(roots, key=lambda r: min((_row_priority(by_id[i]) for i in r[0].get("alert_ids") or [] if i in by_id),
                                              default=(True, 9, "")))
        first = min((by_id[i] for i in urgent[0].get("alert_ids") or [] if i in by_id), key=_row_priority, default=None)
        if first is not None and len({r[2] for r in roots}) > 1:
            lines[-1] += _a("urgent", language, root=urgent[2], label=urgent[3].label(language) if urgent[3] else "?",
                            severity=first["severity"] or "-", alert=first["alertname"])
    elif findings:
        lines[-1] += " " + _a("no_roots", language)
    actions: list[str] = []
    advice = [c for f in findings for c in claims_of[id(f)] if isinstance(finding_of(c), RunbookAdvice)]
    # Advice in the reader's language first; a runbook in the other language is still quoted as is.
    for claim in sorted(advice, key=lambda c: question_language(str(c.get("statement", ""))) != language):
        advice_finding = finding_of(claim)
        if isinstance(advice_finding, RunbookAdvice) and len(actions) < 3:
            excerpt = safe(str((claim.get("evidence") or [{}])[0].get("evidence_excerpt", "")))
            actions.append(f"{_t('runbook_action', language, excerpt=excerpt, title=advice_finding.title)} {cite(claim)}".rstrip())
    for _finding, _root, _service, cause in roots:
        if cause is not None and cause.actions(language)[0] not in actions:
            actions.append(cause.actions(language)[0])
    if not actions and findings:
        actions += list(GENERIC_ACTIONS[language][:2])  # no runbook and no category: what to check next
    if actions:
        lines += ["", _a("actions", language)] + [f"{i}. {item}" for i, item in enumerate(actions[:5], start=1)]
    if missing:
        names = ", ".join(a["alertname"] for a in missing[:10]) + (" …" if len(missing) > 10 else "")
        risks.insert(0, _a("risk_missing", language, n=len(missing), names=safe(names)))
    intake = si.get("intake") if isinstance(si.get("intake"), Mapping) else {}
    if intake.get("status") not in (None, "SUCCESS"):
        risks.insert(0, _a("risk_intake", language, error=safe(str(intake.get("error") or intake.get("status")))))
    risks += [_t("offline_limit", language), _t("window_limit", language)]
    lines += ["", _a("risks", language)] + [f"- {item}" for item in dict.fromkeys(risks)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def _aiops(request: ChatRequest, si: Mapping[str, Any]) -> tuple[str | None, list[ToolCall]]:
    """The alert-analysis supervisor's phases: plan, execute, report (a report when no phase is given)."""
    language = si.get("language")
    if language not in ("en", "zh"):
        rows = _alert_rows(si)
        language = question_language(" ".join(f"{r['summary']} {r['description']}" for r in rows)
                                     or str(si.get("question", "")))
    phase = si.get("phase")
    if phase == "plan":
        return _json(_aiops_plan(si, language)), []
    if phase == "execute":
        return _aiops_execute(request, si, language)
    report = _aiops_report(si, language)
    return (_json({"status": "FINISH", "report_markdown": report}) if request.wants_json else report), []


