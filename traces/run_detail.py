# size: the run-detail page's view model, one section after another (steps, audit, alert analysis, figures).
"""What the run-detail page of the audit console shows, read in three queries whatever the run size.

`run_detail_get` loads the run, its steps and its tool invocations; `run_detail_build` turns them into
plain view data: the route, a timeline of steps and tool calls, the Gatekeeper audit claim by claim
with each verified excerpt located in its tool result, and the self-evaluation figures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString

from diagnosis.contracts import SelfEvaluation, StoredAudit, orchestration_trace_read
from diagnosis.jsonpath import NOT_FOUND, JsonPathError, resolve
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from traces.rendering import (
    FULL_LIMIT, Highlight, ResultView, excerpt_in_context, highlight_for, json_html, markdown_html, parsed_json,
    result_html,
)
from traces.ranking_hint import RankingView, build_ranking
from traces.route_svg import RouteSummary, render_route_svg, summarise_route, topology_for
from traces.trust import TrustLine, trust_line

FOUND_CHARS = 400  # characters of the value at a failed citation's raw_path shown next to it
# Pipeline order of the model-calling nodes: a step going back in it starts a new phase.
PIPELINE = {"planner": 0, "executor": 1, "verifier": 2, "composer": 3}
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


@dataclass(frozen=True)
class RunDetailData:
    run: DiagnosisRun  # with session, session.owner, feedback_by, case and review (+ assignee) loaded
    steps: list[AgentStep]
    invocations: list[ToolInvocation]


def run_detail_get(*, pk: Any) -> RunDetailData | None:
    """The run with pk (or run id) `pk`, its steps by index and its invocations by id: three queries."""
    runs = DiagnosisRun.objects.select_related(
        "session", "session__owner", "feedback_by", "case", "review", "review__assignee", "replay_of",
    ).defer(
        "session__summary", "session__metadata", "replay_of__answer", "replay_of__self_evaluation",
        "replay_of__orchestration_trace",
    )
    key = str(pk)
    run = runs.filter(run_id=key).first() if key.startswith("run-") else (
        runs.filter(pk=int(key)).first() if key.isascii() and key.isdigit() and len(key) <= 18 else None
    )
    if run is None:
        return None
    steps = list(AgentStep.objects.filter(run_id=run.pk).order_by("step_index"))
    invocations = list(ToolInvocation.objects.filter(run_id=run.pk).order_by("id"))
    return RunDetailData(run=run, steps=steps, invocations=invocations)


# --------------------------------------------------------------------------- small readers


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _number(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ms_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start).total_seconds() * 1000


# --------------------------------------------------------------------------- timeline


@dataclass
class Bar:
    left: float
    width: float


@dataclass
class MessageView:
    role: str
    name: str
    body: SafeString
    is_json: bool
    tool_calls: SafeString | None


@dataclass
class InvocationView:
    invocation: ToolInvocation
    arguments: SafeString
    result: SafeString
    evidence_count: int
    bar: Bar
    admin_url: str
    lazy: bool = False  # the body is loaded when the row is opened
    windowed: bool = False  # the result shows windows around its verified excerpts; "show all" loads it whole
    result_chars: int = 0


@dataclass
class StepView:
    step: AgentStep
    bar: Bar
    messages: list[MessageView]
    output_body: SafeString | None
    output_is_json: bool
    output_tool_calls: SafeString | None
    output_meta: list[tuple[str, Any]]
    output_raw: SafeString
    invocations: list[InvocationView]
    phase: str = ""
    admin_url: str = ""
    lazy: bool = False  # model input and output are loaded when the step is opened


@dataclass
class Timeline:
    steps: list[StepView]
    orphans: list[InvocationView]
    total_ms: float
    step_ms: int
    tool_ms: int


def _content_view(content: Any) -> tuple[SafeString, bool]:
    """A message content: pretty JSON when it is a JSON object or list, else escaped text."""
    if isinstance(content, str):
        parsed = parsed_json(content)
        if parsed is not content:
            return json_html(parsed), True
        return SafeString(escape(content)), False
    if content is None:
        return SafeString(""), False
    return json_html(content), True


def _messages(model_input: Any) -> list[MessageView]:
    views = []
    for message in _list(model_input):
        if not isinstance(message, dict):
            views.append(MessageView("?", "", json_html(message), True, None))
            continue
        body, is_json = _content_view(message.get("content"))
        calls = message.get("tool_calls")
        name = message.get("name") or message.get("tool_call_id") or ""
        views.append(MessageView(str(message.get("role", "?")), str(name), body, is_json,
                                 json_html(calls) if calls else None))
    return views


def _output(model_output: Any) -> tuple[SafeString | None, bool, SafeString | None, list[tuple[str, Any]]]:
    output = _dict(model_output)
    body, is_json = _content_view(output.get("content")) if output.get("content") is not None else (None, False)
    if output.get("error") is not None and body is None:
        body, is_json = json_html(output.get("error")), True
    calls = output.get("tool_calls")
    meta = []
    for key, label in (("finish_reason", "finish"), ("model", "model"), ("latency_ms", "latency")):
        value = output.get(key)
        if value not in (None, ""):
            meta.append((label, f"{value:.0f} ms" if key == "latency_ms" and _number(value) is not None else value))
    return body, is_json, (json_html(calls) if calls else None), meta


def _bar(start_ms: float, duration_ms: float, total_ms: float) -> Bar:
    if total_ms <= 0:
        return Bar(0.0, 100.0)
    left = min(max(start_ms / total_ms * 100, 0.0), 99.4)
    width = min(max(duration_ms / total_ms * 100, 0.6), 100.0 - left)
    return Bar(round(left, 2), round(width, 2))


def _invocation_view(invocation, highlights, t0, total_ms, *, body: str = "auto") -> InvocationView:
    """body: "auto" (inline when it holds verified evidence, else loaded on demand), "inline" or "full"."""
    duration = invocation.duration_ms or 0
    end = _ms_between(t0, invocation.created_at) or 0.0
    verified = [h for h in highlights if h.css == "evidence"]  # the ranking's hint marks are not evidence
    lazy = body == "auto" and not verified
    view = ResultView(SafeString(""), False)
    if not lazy and invocation.result is not None:
        view = ResultView(json_html(invocation.result, highlights, limit=FULL_LIMIT), False) if body == "full" \
            else result_html(invocation.result, highlights)
    return InvocationView(
        invocation=invocation,
        arguments=SafeString("") if lazy else json_html(invocation.arguments),
        result=view.html,
        evidence_count=len(verified),
        bar=_bar(end - duration, duration, total_ms),
        admin_url=reverse("admin:diagnosis_toolinvocation_change", args=[invocation.pk]),
        lazy=lazy, windowed=view.windowed,
        result_chars=len(json.dumps(invocation.result, ensure_ascii=False, default=str)) if view.windowed else 0,
    )


def build_timeline(run: DiagnosisRun, steps: list[AgentStep], invocations: list[ToolInvocation],
                   highlights: dict[str, list[Highlight]], evidence_retries: int, *,
                   step_bodies: bool = False, invocation_body: str = "auto") -> Timeline:
    """The steps and tool calls on the run's clock. Step bodies (model input and output) are only built
    with `step_bodies`; the page loads them when a step is opened."""
    starts = [s.started_at for s in steps if s.started_at]
    if run.started_at:
        starts.append(run.started_at)
    t0 = min(starts) if starts else run.created_at
    ends = [(_ms_between(t0, s.started_at) or 0) + (s.duration_ms or 0) for s in steps]
    ends += [_ms_between(t0, i.created_at) or 0 for i in invocations]
    total_ms = max([run.duration_ms or 0, *ends])

    by_step: dict[int, list[ToolInvocation]] = {}
    orphans = []
    step_ids = {s.pk for s in steps}
    for invocation in invocations:
        if invocation.step_id in step_ids:
            by_step.setdefault(invocation.step_id, []).append(invocation)
        else:
            orphans.append(invocation)

    views, previous = [], None
    for step in steps:
        body, is_json, calls, meta = _output(step.model_output) if step_bodies else (None, False, None, [])
        phase = ""
        if previous is not None and PIPELINE.get(step.node, 9) < PIPELINE.get(previous.node, 9):
            phase = ("Evidence retry: the planner runs again in EVIDENCE_GAP_ONLY mode"
                     if step.node == "planner" and evidence_retries else f"The route goes back to {step.node}")
        views.append(StepView(
            step=step,
            bar=_bar(_ms_between(t0, step.started_at) or 0, step.duration_ms or 0, total_ms),
            messages=_messages(step.model_input) if step_bodies else [],
            output_body=body, output_is_json=is_json, output_tool_calls=calls, output_meta=meta,
            output_raw=json_html(step.model_output) if step_bodies else SafeString(""),
            invocations=[_invocation_view(i, highlights.get(i.invocation_id, []), t0, total_ms, body=invocation_body)
                         for i in by_step.get(step.pk, [])],
            phase=phase,
            admin_url=reverse("admin:diagnosis_agentstep_change", args=[step.pk]),
            lazy=not step_bodies,
        ))
        previous = step
    return Timeline(
        steps=views,
        orphans=[_invocation_view(i, highlights.get(i.invocation_id, []), t0, total_ms, body=invocation_body)
                 for i in orphans],
        total_ms=total_ms,
        step_ms=sum(s.duration_ms or 0 for s in steps),
        tool_ms=sum(i.duration_ms or 0 for i in invocations),
    )


# --------------------------------------------------------------------------- gatekeeper audit


@dataclass
class BindingView:
    source_invocation_id: Any
    tool_name: Any
    raw_path: Any
    evidence_excerpt: Any
    verified: bool
    reason_code: str
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
                source_invocation_id=source, tool_name=binding.tool_name, raw_path=binding.raw_path,
                evidence_excerpt=binding.evidence_excerpt, verified=binding.verified, reason_code=binding.reason_code,
                reason_help=REASON_HELP.get(binding.reason_code, ""), in_run=invocation is not None, context=context,
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
    for result in _list(audit.get("tasks")):
        if not isinstance(result, dict):
            continue
        task = _dict(result.get("task"))
        gatekeeper = _dict(result.get("gatekeeper"))
        tasks.append(TaskAuditView(
            task_id=str(task.get("task_id", "")), service=str(task.get("service", "")), goal=str(task.get("goal", "")),
            alert_ids=_list(task.get("alert_ids")), round=result.get("round"), status=str(result.get("status", "")),
            summary=str(result.get("summary", "")), error=result.get("error"),
            invocation_ids=_list(result.get("invocation_ids")),
            gatekeeper=gatekeeper_view(gatekeeper, invocations, highlights, label=f"task {task.get('task_id')} ")
            if gatekeeper else GatekeeperView(present=False),
        ))
    check = _dict(audit.get("report_check"))
    report_gk = _dict(check.get("gatekeeper"))
    return AiOpsView(
        decisions=[d for d in _list(audit.get("decisions")) if isinstance(d, dict)],
        plan=[t for t in _list(audit.get("plan")) if isinstance(t, dict)],
        tasks=tasks,
        report=gatekeeper_view(report_gk, invocations, highlights, label="report ") if report_gk
        else GatekeeperView(present=False),
        statements_total=check.get("statements_total"), statements_verified=check.get("statements_verified"),
        removed=_list(check.get("removed")), alerts_source=str(audit.get("alerts_source", "")),
        language=str(audit.get("language", "")),
    )


# --------------------------------------------------------------------------- triage


@dataclass
class FirstError:
    code: str
    message: str
    node: str
    anchor: str  # the element id on the page where it happened


def first_error(run: DiagnosisRun, steps: list[AgentStep], invocations: list[ToolInvocation]) -> FirstError | None:
    """The earliest thing that went wrong in a degraded or failed run, and the node it happened in."""
    if not (run.degraded or run.status == DiagnosisRun.Status.FAILED):
        return None
    step_nodes = {s.pk: s for s in steps}
    events = []
    for step in steps:
        if step.status == AgentStep.Status.FAILED or step.error:
            code, _, message = (step.error or "step failed").partition(": ")
            events.append((step.started_at, 0, FirstError(code.strip(), message.strip(), step.node,
                                                          f"step-{step.step_index}")))
    for invocation in invocations:
        if invocation.status != ToolInvocation.Status.SUCCESS:
            step = step_nodes.get(invocation.step_id)
            events.append((invocation.created_at, 1, FirstError(
                f"tool_{invocation.status.lower()}", f"{invocation.tool_name}: {invocation.error_message}",
                step.node if step else invocation.tool_name, invocation.invocation_id)))
    events = [e for e in events if e[0] is not None]
    if events:
        return min(events, key=lambda e: (e[0], e[1]))[2]
    if run.error_code:
        return FirstError(run.error_code, run.error_message, "run", "answer")
    return FirstError("degraded", "the fallback wrote the answer", "fallback", "route")


def answer_verified(run: DiagnosisRun) -> bool:
    """Whether the run's answer rests on evidence the Gatekeeper verified (the console only offers
    "useful" for those): a finished, non-degraded DIAGNOSIS run with verdict PASS or LOW_CONFID, or an
    alert analysis whose report kept at least one verified statement. SIMPLE answers are unverified."""
    if run.status != DiagnosisRun.Status.SUCCESS or run.degraded:
        return False
    if run.agent_flow == DiagnosisRun.Flow.AI_OPS:
        check = _dict(SelfEvaluation.read(run.self_evaluation).aiops_audit.get("report_check"))
        return (_number(check.get("statements_verified")) or 0) > 0
    if run.strategy == DiagnosisRun.Strategy.SIMPLE:
        return False
    return run.effective_verdict in (DiagnosisRun.Verdict.PASS, DiagnosisRun.Verdict.LOW_CONFID)


# --------------------------------------------------------------------------- self-evaluation


@dataclass
class Figure:
    label: str
    value: str
    detail: str = ""
    tone: str = ""  # good | warn | bad | ""


@dataclass
class BudgetLine:
    label: str
    used: str
    limit: str
    percent: float


def _percent(value: Any) -> str:
    number = _number(value)
    return f"{number * 100:.0f}%" if number is not None else "—"


def _ratio(done: Any, total: Any) -> str:
    return f"{done if done is not None else '—'} / {total if total is not None else '—'}"


def build_figures(self_evaluation: Any) -> tuple[list[Figure], list[BudgetLine]]:
    evaluation = SelfEvaluation.read(self_evaluation)
    rules, aiops = evaluation.rule_evaluation, evaluation.aiops_rule_evaluation
    if aiops and not rules:
        return _aiops_figures(aiops), _budget_lines(_dict(aiops.get("budget")))
    if not rules:
        return [], []
    validity = _number(rules.get("citation_validity_rate"))
    success = _number(rules.get("tool_success_rate"))
    by_status = _dict(rules.get("tool_calls_by_status"))
    figures = [
        Figure("Citation validity", _percent(validity),
               _ratio(rules.get("bindings_verified"), rules.get("bindings_total")) + " bindings",
               "" if validity is None else "good" if validity >= 0.999 else "warn" if validity > 0 else "bad"),
        Figure("Claims verified", _ratio(rules.get("claims_verified"), rules.get("claims_total")), "by the Gatekeeper"),
        Figure("Tool success", _percent(success),
               ", ".join(f"{count} {status.lower()}" for status, count in sorted(by_status.items())) or "no tool calls",
               "" if success is None else "good" if success >= 0.999 else "warn"),
        Figure("Tool calls", str(rules.get("tool_calls", "—"))),
        Figure("Evidence retry", "used" if rules.get("evidence_retry_used") else "not used",
               tone="warn" if rules.get("evidence_retry_used") else ""),
        Figure("Fallback", "used" if rules.get("fallback_used") else "not used",
               tone="bad" if rules.get("fallback_used") else "good"),
    ]
    budget = _dict(rules.get("budget"))
    if budget.get("exceeded"):
        figures.append(Figure("Budget", "exceeded", str(budget.get("exceeded")), "bad"))
    return figures, _budget_lines(budget)


def _aiops_figures(rules: dict) -> list[Figure]:
    validity = _number(rules.get("citation_validity"))
    report = _number(rules.get("report_citation_validity"))
    success = _number(rules.get("tool_success_rate"))
    by_status = _dict(rules.get("tool_calls_by_status"))
    tone = lambda v: "" if v is None else "good" if v >= 0.999 else "warn" if v > 0 else "bad"  # noqa: E731
    figures = [
        Figure("Citation validity", _percent(validity),
               _ratio(rules.get("bindings_verified"), rules.get("bindings_total")) + " bindings in the tasks", tone(validity)),
        Figure("Claims verified", _ratio(rules.get("claims_verified"), rules.get("claims_total")), "by the Gatekeeper"),
        Figure("Report check", _percent(report),
               _ratio(rules.get("report_statements_verified"), rules.get("report_statements_total"))
               + f" statements kept, {rules.get('report_statements_removed', 0)} removed", tone(report)),
        Figure("Alerts", _ratio(rules.get("alerts_with_verified_findings"), rules.get("alerts_total")),
               f"with verified findings (source: {rules.get('alerts_source', '—')})"),
        Figure("Supervisor rounds", _ratio(rules.get("rounds"), rules.get("max_rounds")),
               " → ".join(str(d) for d in _list(rules.get("decisions"))) or "no decision"),
        Figure("Tool success", _percent(success),
               ", ".join(f"{count} {status.lower()}" for status, count in sorted(by_status.items())) or "no tool calls",
               "" if success is None else "good" if success >= 0.999 else "warn"),
        Figure("Fallback", "used" if rules.get("fallback_used") else "not used",
               str(rules.get("fallback_reason") or ""), "bad" if rules.get("fallback_used") else "good"),
    ]
    exceeded = _dict(rules.get("budget")).get("exceeded")
    if exceeded:
        figures.append(Figure("Budget", "exceeded", str(exceeded), "bad"))
    return figures


def _budget_lines(budget: dict) -> list[BudgetLine]:
    lines = []
    for label, used_key, limit_key, unit in (
        ("Model calls", "model_calls", "max_model_calls", ""),
        ("Tool calls", "tool_calls", "max_tool_calls", ""),
        ("Tokens", None, "max_tokens", ""),
        ("Wall time", "elapsed_seconds", "max_seconds", " s"),
    ):
        used = (_number(budget.get("prompt_tokens")) or 0) + (_number(budget.get("completion_tokens")) or 0) \
            if used_key is None else _number(budget.get(used_key))
        limit = _number(budget.get(limit_key))
        if used is None or not limit:
            continue
        shown = f"{used:,.2f}" if isinstance(used, float) and not float(used).is_integer() else f"{int(used):,}"
        lines.append(BudgetLine(label, shown + unit, f"{int(limit):,}{unit}", round(min(used / limit * 100, 100), 1)))
    return lines


# --------------------------------------------------------------------------- the page


@dataclass
class RunDetail:
    run: DiagnosisRun
    answer_html: SafeString
    trace: dict | None
    trace_invalid: bool
    route: RouteSummary | None
    route_svg: SafeString
    timeline: Timeline
    gatekeeper: GatekeeperView
    figures: list[Figure]
    budget: list[BudgetLine]
    verifier: dict
    prompt_audit: dict
    self_evaluation_json: SafeString | None
    trace_api_url: str
    steps_url: str
    invocations_url: str
    session_url: str
    queue_ms: float | None
    has_case: bool
    tool_total: int
    aiops: AiOpsView | None = None
    part_base: str = ""  # parts loaded on demand: <part_base>step/<index>/, tool/<id>/, result/<id>/
    first_error: FirstError | None = None
    answer_verified: bool = False
    unverified: bool = False  # a SIMPLE answer: one model call, nothing checked
    trust: TrustLine | None = None
    ranking: RankingView | None = None  # the localiser's ranking kept in the diagnosis: a hint, not evidence


def run_detail_build(data: RunDetailData) -> RunDetail:
    run = data.run
    invocations = {i.invocation_id: i for i in data.invocations}
    trace = orchestration_trace_read(run.orchestration_trace)
    topology = topology_for(run.agent_flow)
    route = summarise_route(trace, topology["entry"])
    gatekeeper, highlights = build_gatekeeper(run.self_evaluation, invocations)
    aiops = build_aiops(run.self_evaluation, invocations, highlights) if run.agent_flow == DiagnosisRun.Flow.AI_OPS \
        else None
    ranking = build_ranking(run.diagnosis, invocations, highlights)
    figures, budget = build_figures(run.self_evaluation)
    verifier = SelfEvaluation.read(run.self_evaluation).verifier.raw
    evidence_retries = route.evidence_retry_count if route else 0
    session_id = run.session.session_id
    return RunDetail(
        run=run,
        answer_html=markdown_html(run.answer, citations=invocations),
        trace=trace,
        trace_invalid=run.orchestration_trace is not None and trace is None,
        route=route,
        route_svg=render_route_svg(trace, topology),
        timeline=build_timeline(run, data.steps, data.invocations, highlights, evidence_retries),
        gatekeeper=gatekeeper,
        figures=figures,
        budget=budget,
        verifier=verifier,
        prompt_audit=_dict(verifier.get("prompt_audit")),
        self_evaluation_json=None,  # loaded on demand: part/self-evaluation/json/
        trace_api_url=f"{reverse('diagnosis-trace', kwargs={'session_id': session_id})}?runId={run.run_id}",
        steps_url=f"{reverse('admin:diagnosis_agentstep_changelist')}?run__id__exact={run.pk}",
        invocations_url=f"{reverse('admin:diagnosis_toolinvocation_changelist')}?run__id__exact={run.pk}",
        session_url=reverse("admin:diagnosis_chatsession_change", args=[run.session_id]),
        queue_ms=_ms_between(run.created_at, run.started_at),
        has_case=getattr(run, "case", None) is not None,  # loaded by select_related: no query
        tool_total=len(data.invocations),
        aiops=aiops,
        part_base=part_base(run),
        first_error=first_error(run, data.steps, data.invocations),
        answer_verified=answer_verified(run),
        unverified=run.strategy == DiagnosisRun.Strategy.SIMPLE and run.agent_flow == DiagnosisRun.Flow.CHAT,
        trust=trust_line(flow=run.agent_flow, question=run.question, verdict=run.effective_verdict,
                         diagnosis=run.diagnosis, degraded=run.degraded, self_evaluation=run.self_evaluation),
        ranking=ranking,
    )


# --------------------------------------------------------------------------- parts loaded on demand


def part_base(run: DiagnosisRun) -> str:
    return reverse("admin:diagnosis_diagnosisrun_part", args=[run.pk, "step", "0"]).rsplit("step/0/", 1)[0]


def _highlights(run: DiagnosisRun, invocations: dict[str, ToolInvocation]) -> dict[str, list[Highlight]]:
    _, highlights = build_gatekeeper(run.self_evaluation, invocations)
    if run.agent_flow == DiagnosisRun.Flow.AI_OPS:
        build_aiops(run.self_evaluation, invocations, highlights)
    build_ranking(run.diagnosis, invocations, highlights)
    return highlights


def step_part(data: RunDetailData, step_index: int) -> StepView | None:
    """One step of the timeline with its model input and output, for the page to load when opened."""
    steps = [s for s in data.steps if s.step_index == step_index]
    if not steps:
        return None
    invocations = {i.invocation_id: i for i in data.invocations}
    timeline = build_timeline(data.run, steps, [], _highlights(data.run, invocations), 0, step_bodies=True)
    return timeline.steps[0]


def invocation_part(data: RunDetailData, invocation_id: str, *, full: bool) -> InvocationView | None:
    """One tool call's arguments and result (the whole result with `full`), its verified excerpts marked."""
    invocations = {i.invocation_id: i for i in data.invocations}
    invocation = invocations.get(invocation_id)
    if invocation is None:
        return None
    highlights = _highlights(data.run, invocations).get(invocation_id, [])
    return _invocation_view(invocation, highlights, data.run.created_at, 0, body="full" if full else "inline")
