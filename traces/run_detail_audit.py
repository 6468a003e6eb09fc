"""The run-detail page's audit: the Gatekeeper result claim by claim, each verified excerpt located in
its tool result, and for an alert analysis (AI_OPS) the supervisor decisions, each task's Gatekeeper
result and the report check."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.utils.safestring import SafeString

from diagnosis.contracts import BindingAudit, SelfEvaluation, StoredAudit
from diagnosis.jsonpath import NOT_FOUND, JsonPathError, resolve
from diagnosis.models import ToolInvocation
from traces.rendering import Highlight, excerpt_in_context, highlight_for
from traces.run_detail_readers import as_dict, as_list

FOUND_CHARS = 400  # characters of the value at a failed citation's raw_path shown next to it
REASON_HELP = {
    "verified": "the excerpt was found at raw_path in this run's tool result",
    "malformed_claim": "the claim around the binding is malformed or a duplicate",
    "malformed_binding": "a binding field is missing, empty or not a string",
    "invocation_not_found": "no tool invocation with this id exists",
    "invocation_other_run": "the invocation exists, but in another run",
    "ranking_not_evidence": "it cites the rank_root_causes hint: claims cite the records the ranking names",
    "tool_mismatch": "the cited tool name is not the tool that was called",
    "invocation_failed": "the cited tool call did not succeed",
    "path_malformed": "raw_path is outside the supported JSONPath subset",
    "path_not_evidence": "raw_path points into what was asked (the request), not what was observed",
    "path_not_found": "raw_path names nothing in the stored result",
    "excerpt_too_short": "the excerpt is too short to prove anything (under 12 characters)",
    "excerpt_echoes_input": "the excerpt repeats the question, a tool argument or a system prompt",
    "excerpt_mismatch": "the excerpt is not in the value at raw_path, or does not start and end on word boundaries",
}


@dataclass
class BindingView:
    """One binding as the page shows it: the Gatekeeper's `contracts.BindingAudit` (templates read its fields
    through `audit`) and what the page adds around it."""
    audit: BindingAudit
    reason_help: str
    in_run: bool
    context: SafeString | None
    found: str | None = None  # for a failed check: what raw_path names in the cited result
    mark: str = ""  # the title of this excerpt's <mark> in the tool result, for the page to bring into view


@dataclass
class ClaimView:
    claim_id: Any
    statement: Any
    verified: bool
    reason_code: str
    bindings: list[BindingView]
    check: dict | None  # the verifier's claim check, when it ran


@dataclass
class GatekeeperView:
    present: bool
    verdict: str = ""
    reason_code: str = ""
    version: str = ""
    claims: list[ClaimView] = field(default_factory=list)
    verified_claims: Any = None
    total_claims: Any = None
    verified_bindings: Any = None
    total_bindings: Any = None


def build_gatekeeper(
    self_evaluation: Any, invocations: dict[str, ToolInvocation],
) -> tuple[GatekeeperView, dict[str, list[Highlight]]]:
    """The audit claim by claim, and per invocation the verified excerpts to mark in its result."""
    verifier = SelfEvaluation.read(self_evaluation).verifier
    highlights: dict[str, list[Highlight]] = {}
    if verifier.gatekeeper_audit is None:
        return GatekeeperView(present=False), highlights
    checks = {c.get("claim_id"): c for c in verifier.claim_checks}
    return gatekeeper_view(verifier.gatekeeper_audit, invocations, highlights, checks=checks), highlights


def gatekeeper_view(
    audit: StoredAudit | dict, invocations: dict[str, ToolInvocation], highlights: dict[str, list[Highlight]], *,
    checks: dict | None = None, label: str = "",
) -> GatekeeperView:
    """One stored Gatekeeper result (read through `contracts.StoredAudit`) claim by claim; adds its verified
    excerpts to `highlights`."""
    if not isinstance(audit, StoredAudit):
        audit = StoredAudit.read(audit) or StoredAudit()
    checks = checks or {}
    claims = []
    for claim in audit.claims:
        bindings = []
        for binding in claim.bindings:
            source = binding.source_invocation_id
            invocation = invocations.get(source) if isinstance(source, str) else None
            context = found = None
            mark = ""
            value = NOT_FOUND
            if invocation is not None and isinstance(binding.raw_path, str):
                try:
                    value = resolve(invocation.result, binding.raw_path)
                except JsonPathError:
                    value = NOT_FOUND
            if not binding.verified and value is not NOT_FOUND:
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
                found = text if len(text) <= FOUND_CHARS else text[:FOUND_CHARS] + "…"
            if binding.verified and invocation is not None:
                context = excerpt_in_context(value, binding.evidence_excerpt)
                highlight = highlight_for(binding.raw_path, binding.evidence_excerpt,
                                          label=f"{label}claim {claim.claim_id}: verified excerpt")
                if highlight is not None:
                    highlights.setdefault(source, []).append(highlight)
                    mark = highlight.label
            bindings.append(BindingView(
                audit=binding, reason_help=REASON_HELP.get(binding.reason_code, ""), in_run=invocation is not None, context=context,
                found=found, mark=mark,
            ))
        claims.append(ClaimView(
            claim_id=claim.claim_id, statement=claim.statement, verified=claim.verified, reason_code=claim.reason_code,
            bindings=bindings, check=checks.get(claim.claim_id),
        ))
    return GatekeeperView(
        present=True, verdict=audit.verdict, reason_code=audit.reason_code, version=audit.version, claims=claims,
        verified_claims=audit.verified_claim_count, total_claims=audit.total_claim_count,
        verified_bindings=audit.verified_binding_count, total_bindings=audit.total_binding_count,
    )


# --------------------------------------------------------------------------- alert analysis (AI_OPS)


@dataclass
class TaskAuditView:
    task_id: str
    service: str
    goal: str
    alert_ids: list
    round: Any
    status: str
    summary: str
    error: Any
    invocation_ids: list
    gatekeeper: GatekeeperView


@dataclass
class AiOpsView:
    decisions: list[dict]
    plan: list[dict]
    tasks: list[TaskAuditView]
    report: GatekeeperView
    statements_total: Any
    statements_verified: Any
    removed: list
    alerts_source: str
    language: str


def build_aiops(self_evaluation: Any, invocations: dict[str, ToolInvocation],
                highlights: dict[str, list[Highlight]]) -> AiOpsView | None:
    """The stored alert-analysis audit: supervisor decisions, per-task Gatekeeper results, report check."""
    audit = SelfEvaluation.read(self_evaluation).aiops_audit
    if not audit:
        return None
    tasks = []
    for result in as_list(audit.get("tasks")):
        if not isinstance(result, dict):
            continue
        task = as_dict(result.get("task"))
        gatekeeper = as_dict(result.get("gatekeeper"))
        tasks.append(TaskAuditView(
            task_id=str(task.get("task_id", "")), service=str(task.get("service", "")), goal=str(task.get("goal", "")),
            alert_ids=as_list(task.get("alert_ids")), round=result.get("round"), status=str(result.get("status", "")),
            summary=str(result.get("summary", "")), error=result.get("error"),
            invocation_ids=as_list(result.get("invocation_ids")),
            gatekeeper=gatekeeper_view(gatekeeper, invocations, highlights, label=f"task {task.get('task_id')} ")
            if gatekeeper else GatekeeperView(present=False),
        ))
    check = as_dict(audit.get("report_check"))
    report_gk = as_dict(check.get("gatekeeper"))
    return AiOpsView(
        decisions=[d for d in as_list(audit.get("decisions")) if isinstance(d, dict)],
        plan=[t for t in as_list(audit.get("plan")) if isinstance(t, dict)],
        tasks=tasks,
        report=gatekeeper_view(report_gk, invocations, highlights, label="report ") if report_gk
        else GatekeeperView(present=False),
        statements_total=check.get("statements_total"), statements_verified=check.get("statements_verified"),
        removed=as_list(check.get("removed")), alerts_source=str(audit.get("alerts_source", "")),
        language=str(audit.get("language", "")),
    )

