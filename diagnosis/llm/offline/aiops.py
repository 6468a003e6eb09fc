"""Alert analysis (role aiops): the supervisor's plan, execution and report."""

from __future__ import annotations

import re
from typing import Any, Mapping
from diagnosis.llm.base import ChatRequest, ToolCall

from diagnosis.alert_render import conclusion_lines, render_alert_findings
from diagnosis import i18n
from diagnosis.answer_render import OFFLINE_LIMIT
from diagnosis.llm.offline.lexicon import KNOWLEDGE_TOP_K, LOG_LIMIT, _canonical, _json, question_language
from diagnosis.llm.offline.observations import Observations
from diagnosis.llm.offline.claims import ClaimBook
from diagnosis.llm.offline.localised import build_claims, localise_results, next_calls, undetermined_summary
from diagnosis.llm.offline.roles import _offered_tools, _tool_calls, _tool_rounds


# --------------------------------------------------------------------------- alert analysis (role aiops)

AIOPS_MIN_TASK_CALLS = 3  # logs, metrics and runbooks of one service
AIOPS_FOLLOW_UP_ROUNDS = 2  # after the first queries: where they point, then one more hop
AIOPS_SEVERITY = {"critical": 0, "page": 0, "error": 1, "high": 1, "warning": 2, "medium": 2, "info": 3, "low": 3}


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
    alerts = _alert_rows(si)
    plan = [t for t in si.get("plan") or [] if isinstance(t, Mapping)]
    rounds_left = _int(si.get("max_rounds"), 4) - _int(si.get("round"), 1)
    budget = _int(si.get("tool_budget"), 0)
    if not alerts:
        return {"decision": "FINISH", "rationale": i18n.text("No active alert to analyse.", language)}
    if not plan:
        groups: dict[str, list[dict]] = {}
        for row in sorted(alerts, key=_row_priority):
            if row["service"] and row["state"] in ("firing", "pending"):
                groups.setdefault(row["service"], []).append(row)
        capacity = min(rounds_left, budget // AIOPS_MIN_TASK_CALLS)
        if not groups or capacity < 1:
            return {"decision": "FINISH", "rationale": i18n.text(
                "No alert names a service that could be investigated within the budget.", language)}
        tasks = []
        for n, (service, rows) in enumerate(list(groups.items())[:capacity], start=1):
            names = ", ".join(dict.fromkeys(r["alertname"] for r in rows))
            goal = (i18n.text("Find why {names} fires for {service}.", language, names=names, service=service)
                    if len(rows) == 1 else
                    i18n.text("Find why {names} fire for {service}.", language, names=names, service=service))
            tasks.append({"task_id": f"t{n}", "service": service, "alert_ids": [r["alert_id"] for r in rows], "goal": goal})
        left = len(groups) - len(tasks)
        rationale = i18n.text("One task per alerting service, most urgent first: {n} task(s); {left} more service(s) "
                              "do not fit the round and tool budget.", language, n=len(tasks), left=left) if left else \
            i18n.text("One task per alerting service, most urgent first: {n} task(s).", language, n=len(tasks))
        return {"decision": "PLAN", "rationale": rationale, "plan": tasks}
    pending = [t for t in plan if t.get("status") == "pending"]
    if pending and budget > 0:
        task = pending[0]
        return {"decision": "EXECUTE", "task_id": task.get("task_id"), "tool_budget": max(1, budget // len(pending)),
                "rationale": i18n.text("Investigate {service} next.", language, service=task.get("service"))}
    return {"decision": "FINISH", "rationale": i18n.text("Every planned task was executed.", language)}


def _aiops_execute(request: ChatRequest, si: Mapping[str, Any], language: str) -> tuple[str | None, list[ToolCall]]:
    """Investigate one service: its logs, metrics and runbooks, then where the localiser says the evidence
    points; then cite what the localisation rests on (``localised``: the same outcome as a diagnosis)."""
    task = si.get("task") if isinstance(si.get("task"), Mapping) else {}
    service = str(task.get("service") or "")
    alerts = _alert_rows(si)
    results = list(si.get("tool_results") or [])
    evidence = list(si.get("context_results") or []) + results
    budget = _int(si.get("tool_budget"), 0)
    offered = _offered_tools(request)
    rounds = _tool_rounds(request)
    alert_text = " ".join(f"{a['alertname']} {a['summary']}" for a in alerts)
    obs = Observations(evidence)
    if offered and budget > 0 and service:
        calls: list[tuple[str, dict]] = []
        if rounds == 0:
            calls = [("query_logs", {"service": service, "limit": LOG_LIMIT}), ("query_metrics", {"service": service})]
            target = kubernetes_target(si, task)
            if target is not None:
                calls.append(("query_kubernetes", target))  # the alert names a pod or workload: its events and states
            calls.append(("lookup_knowledge", {"query": f"{service} {alert_text}"[:500], "top_k": KNOWLEDGE_TOP_K}))
            calls = [(t, a) for t, a in calls if t in offered]
        elif rounds <= AIOPS_FOLLOW_UP_ROUNDS:  # where the evidence points, one hop per round
            calls = _task_leads(obs, service, offered)
            calls += [c for c in next_calls(obs, evidence, [service], offered, alert_text) if c not in calls]
        if calls:
            return None, _tool_calls(calls[:budget], len(results) + 1)
    loc = localise_results(evidence, [service] if service else [])
    book = ClaimBook()
    # The firing alert is itself a signal the localiser reads: telemetry that shows nothing wrong is said so.
    summary = build_claims(obs, loc, book, language, stated_symptom=False)
    if loc.outcome in ("root_cause", "nothing_wrong"):
        status = "COMPLETED"
    else:
        status = "PARTIAL" if book.claims else "FAILED"
    if obs.failed:
        hint = f"A tool call failed: {obs.failed[0]}"
    elif loc.outcome == "undetermined":
        hint = undetermined_summary(loc)
    elif loc.outcome == "no_data":
        hint = f"No telemetry of {service or 'the alert'} was found; check the service name of the alert."
    else:
        hint = ""
    return _json({"status": status, "summary": summary, "evidence": book.claims, "nextHint": hint}), []


def _task_leads(obs: Observations, service: str, offered: set[str]) -> list[tuple[str, dict]]:
    """What the task's own records point to and no query examined yet: a task sees only its service, and the
    localiser joins another entity to it only once that entity's records are in. The services its error and
    slow lines name; when its series are a node's, the series of everything running on that node."""
    profile = obs.profiles.get(service)
    queried = {s.lower() for s in obs.queried}
    calls = []
    if profile is not None and any(s.labels.get("node") == service for s in profile.series):
        args = {"query": f'{{node="{service}"}}'}
        if "query_metrics" in offered and _canonical("query_metrics", args) not in obs.calls:
            calls.append(("query_metrics", args))
    for dependency, _count in (profile.dependencies.most_common(1) if profile is not None else []):
        if dependency.lower() not in queried:
            for tool, args in (("query_logs", {"service": dependency, "limit": LOG_LIMIT}),
                               ("query_metrics", {"service": dependency})):
                if tool in offered and _canonical(tool, args) not in obs.calls:
                    calls.append((tool, args))
    return calls


def _aiops_report(si: Mapping[str, Any], language: str) -> str:
    """The alert report as the server renders it (``diagnosis.alert_render``, one renderer) from the verified
    findings it was given, then the conclusion those findings support and what this analyser is."""
    alerts = _alert_rows(si)
    findings = [f for f in si.get("findings") or [] if isinstance(f, Mapping)]
    lines, _removed, _cited, _held = render_alert_findings(alerts=alerts, findings=findings, language=language)
    lines += ["", *conclusion_lines(alerts=alerts, findings=findings, language=language), "", i18n.text(OFFLINE_LIMIT, language)]
    return "\n".join(lines).strip() + "\n"


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


