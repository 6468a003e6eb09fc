"""Alert analysis (F-60, seed 004 §8): the alerts, the tasks and their results, and the checks of what
the supervisor, the task executor and the reporter answer.

The run itself is a topology on the graph engine (`diagnosis/graph/aiops_topology.py`); its node ports
live in `aiops_nodes.py`, the report check and the deterministic report parts in `aiops_report.py`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from diagnosis.agents.runtime import question_language
from diagnosis.graph.aiops_topology import DEFAULT_MAX_ROUNDS, Decision
from diagnosis.llm.base import ModelInvalidOutputError
from diagnosis.localisation.records import service_of
from diagnosis.tools.registry import SUCCESS, ToolOutcome

ROLE = "aiops"
MAX_ROUNDS = DEFAULT_MAX_ROUNDS
MAX_ALERTS = 50
MAX_TASKS = 10
MAX_CLAIMS_PER_TASK = 30
MIN_TASK_TOOL_CALLS = 2
REPORT_MAX_CHARS = 40_000
ACTIVE_STATES = ("firing", "pending")
INACTIVE_STATES = ("resolved", "inactive")
SEVERITY_RANK = {"critical": 0, "page": 0, "error": 1, "high": 1, "warning": 2, "medium": 2, "info": 3, "low": 3}
# Anything that looks like an invocation citation is checked, not only well-formed ids: a fabricated
# `[inv-fake]` must not slip through as plain text.
CITATION_RE = re.compile(r"\binv-[\w-]*\w")
TASK_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,16}$")
PROBE_PATH = "$"

EXECUTOR_STATUSES = ("COMPLETED", "PARTIAL", "FAILED")


def _invalid(message: str, where: str | None = None) -> ModelInvalidOutputError:
    return ModelInvalidOutputError(message, field=where)


def _text(value: Any, limit: int) -> str:
    return " ".join(str(value).split())[:limit] if value is not None else ""


# --------------------------------------------------------------------------- alerts


def alert_service(labels: Mapping[str, str]) -> str:
    """The service an alert is about, by the label conventions the localiser reads every record with
    (``localisation.records.service_of``: a service or app label, else the workload of its pod, else its job)."""
    return service_of({k: v.strip() for k, v in labels.items() if isinstance(v, str) and v.strip()}).strip()


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
    suggestions: list[str] = field(default_factory=list)  # the served report's labelled, unchecked advice
    advice: list[dict] = field(default_factory=list)  # the same with its flags (verified, destructive)

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
    orchestration_trace: dict | None = None

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
            "degraded": self.degraded, "termination_reason": self.termination_reason, "verdict": self.verdict,
            "budget": budget,
        }

    def audit(self) -> dict[str, Any]:
        """The per-task and report Gatekeeper audits and the planner's decisions, for the trace."""
        return {"alerts_source": self.alerts_source, "intake": self.intake, "language": self.language,
                "decisions": self.decisions, "tasks": [r.audit() for r in self.results],
                "plan": [t.to_dict() for t in self.tasks], "report_check": self.report_check.to_dict(),
                "report_render": {"suggestions": list(self.report_check.suggestions),
                                  "advice": list(self.report_check.advice)}}

    @cached_property
    def verdict(self) -> str | None:
        """The verdict of the served report, capped like a chat run's: null when it is degraded; else the
        Gatekeeper verdict of the tasks' citations (PASS: every claim verified, LOW_CONFID: some, REJECT:
        none), at most LOW_CONFID when every verified claim rests on runbooks or cases, or when not every
        alert received was analysed. Computed once per outcome: the run's column and its stored rule
        evaluation (``aiops_rule_evaluation.verdict``) both hold this value."""
        if self.degraded:
            return None
        executed = [r for r in self.results if r.gatekeeper]
        verified = sum(r.gatekeeper.get("verified_claim_count", 0) for r in executed)
        total = sum(r.gatekeeper.get("total_claim_count", 0) for r in executed)
        if not verified:
            return "REJECT"
        verdict = "PASS" if verified == total else "LOW_CONFID"
        claims = [c for r in executed for c in r.verified_claims]
        tools = {str(b.get("tool_name")) for c in claims for b in c.get("evidence") or () if isinstance(b, Mapping)}
        knowledge_only = bool(tools) and tools <= {"lookup_knowledge"}
        coverage = self.coverage
        if knowledge_only or coverage["alertsAnalysed"] < coverage["alertsReceived"]:
            verdict = "LOW_CONFID"
        return verdict

    @property
    def coverage(self) -> dict[str, int]:
        """Alerts analysed out of alerts received (``diagnosis.coverage``)."""
        analysed = {a for r in self.results for a in r.task.alert_ids}
        return {"alertsAnalysed": len(analysed & {a["alert_id"] for a in self.alerts}), "alertsReceived": len(self.alerts)}


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
    if decision not in Decision.MODEL:
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
    """The executor's answer: {status, summary, evidence: [claims of contracts.EvidenceClaim's shape], nextHint}.
    Each claim is audited by the Gatekeeper as emitted (a malformed one is named there, not refused here)."""
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


