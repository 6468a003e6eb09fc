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

from diagnosis.jsonpath import NOT_FOUND, JsonPathError, resolve
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from traces.rendering import Highlight, excerpt_in_context, highlight_for, json_html, markdown_html
from traces.route_svg import RouteSummary, render_route_svg, summarise_route
from traces.selectors import orchestration_trace_parse

FOUND_CHARS = 400  # characters of the value at a failed citation's raw_path shown next to it
# Pipeline order of the model-calling nodes: a step going back in it starts a new phase.
PIPELINE = {"planner": 0, "executor": 1, "verifier": 2, "composer": 3}
REASON_HELP = {
    "verified": "the excerpt was found at raw_path in this run's tool result",
    "malformed_claim": "the claim around the binding is malformed or a duplicate",
    "malformed_binding": "a binding field is missing, empty or not a string",
    "invocation_not_found": "no tool invocation with this id exists",
    "invocation_other_run": "the invocation exists, but in another run",
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
    run: DiagnosisRun  # with session, session.owner, feedback_by and case loaded
    steps: list[AgentStep]
    invocations: list[ToolInvocation]


def run_detail_get(*, pk: Any) -> RunDetailData | None:
    """The run with pk (or run id) `pk`, its steps by index and its invocations by id: three queries."""
    runs = DiagnosisRun.objects.select_related("session", "session__owner", "feedback_by", "case").defer(
        "session__summary", "session__metadata",
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
        try:
            parsed = json.loads(content)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
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


def _invocation_view(invocation, highlights, t0, total_ms) -> InvocationView:
    duration = invocation.duration_ms or 0
    end = _ms_between(t0, invocation.created_at) or 0.0
    return InvocationView(
        invocation=invocation,
        arguments=json_html(invocation.arguments),
        result=json_html(invocation.result, highlights) if invocation.result is not None else SafeString(""),
        evidence_count=len(highlights),
        bar=_bar(end - duration, duration, total_ms),
        admin_url=reverse("admin:diagnosis_toolinvocation_change", args=[invocation.pk]),
    )


def build_timeline(run: DiagnosisRun, steps: list[AgentStep], invocations: list[ToolInvocation],
                   highlights: dict[str, list[Highlight]], evidence_retries: int) -> Timeline:
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
        body, is_json, calls, meta = _output(step.model_output)
        phase = ""
        if previous is not None and PIPELINE.get(step.node, 9) < PIPELINE.get(previous.node, 9):
            phase = ("Evidence retry: the planner runs again in EVIDENCE_GAP_ONLY mode"
                     if step.node == "planner" and evidence_retries else f"The route goes back to {step.node}")
        views.append(StepView(
            step=step,
            bar=_bar(_ms_between(t0, step.started_at) or 0, step.duration_ms or 0, total_ms),
            messages=_messages(step.model_input),
            output_body=body, output_is_json=is_json, output_tool_calls=calls, output_meta=meta,
            output_raw=json_html(step.model_output),
            invocations=[_invocation_view(i, highlights.get(i.invocation_id, []), t0, total_ms)
                         for i in by_step.get(step.pk, [])],
            phase=phase,
            admin_url=reverse("admin:diagnosis_agentstep_change", args=[step.pk]),
        ))
        previous = step
    return Timeline(
        steps=views,
        orphans=[_invocation_view(i, highlights.get(i.invocation_id, []), t0, total_ms) for i in orphans],
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
    verifier = _dict(_dict(self_evaluation).get("verifier_evaluation"))
    audit = _dict(verifier.get("gatekeeper_audit"))
    highlights: dict[str, list[Highlight]] = {}
    if not audit:
        return GatekeeperView(present=False), highlights
    checks = {c.get("claim_id"): c for c in _list(verifier.get("claim_checks")) if isinstance(c, dict)}
    claims = []
    for claim in _list(audit.get("audit")):
        if not isinstance(claim, dict):
            continue
        bindings = []
        for binding in _list(claim.get("bindings")):
            if not isinstance(binding, dict):
                continue
            source = binding.get("source_invocation_id")
            invocation = invocations.get(source) if isinstance(source, str) else None
            verified = binding.get("verified") is True
            context = found = None
            value = NOT_FOUND
            if invocation is not None and isinstance(binding.get("raw_path"), str):
                try:
                    value = resolve(invocation.result, binding["raw_path"])
                except JsonPathError:
                    value = NOT_FOUND
            if not verified and value is not NOT_FOUND:
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
                found = text if len(text) <= FOUND_CHARS else text[:FOUND_CHARS] + "…"
            if verified and invocation is not None:
                context = excerpt_in_context(value, binding.get("evidence_excerpt"))
                highlight = highlight_for(binding.get("raw_path"), binding.get("evidence_excerpt"),
                                          label=f"claim {claim.get('claim_id')}: verified excerpt")
                if highlight is not None:
                    highlights.setdefault(source, []).append(highlight)
            reason = str(binding.get("reason_code", ""))
            bindings.append(BindingView(
                source_invocation_id=source, tool_name=binding.get("tool_name"), raw_path=binding.get("raw_path"),
                evidence_excerpt=binding.get("evidence_excerpt"), verified=verified, reason_code=reason,
                reason_help=REASON_HELP.get(reason, ""), in_run=invocation is not None, context=context, found=found,
            ))
        claims.append(ClaimView(
            claim_id=claim.get("claim_id"), statement=claim.get("statement"), verified=claim.get("verified") is True,
            reason_code=str(claim.get("reason_code", "")), bindings=bindings, check=checks.get(claim.get("claim_id")),
        ))
    return GatekeeperView(
        present=True, verdict=str(audit.get("verdict", "")), reason_code=str(audit.get("reason_code", "")),
        version=str(audit.get("version", "")), claims=claims,
        verified_claims=audit.get("verified_claim_count"), total_claims=audit.get("total_claim_count"),
        verified_bindings=audit.get("verified_binding_count"), total_bindings=audit.get("total_binding_count"),
    ), highlights


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
    rules = _dict(_dict(self_evaluation).get("rule_evaluation"))
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
    if budget.get("exceeded"):
        figures.append(Figure("Budget", "exceeded", str(budget.get("exceeded")), "bad"))
    return figures, lines


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


def run_detail_build(data: RunDetailData) -> RunDetail:
    run = data.run
    invocations = {i.invocation_id: i for i in data.invocations}
    trace = orchestration_trace_parse(run.orchestration_trace)
    route = summarise_route(trace)
    gatekeeper, highlights = build_gatekeeper(run.self_evaluation, invocations)
    figures, budget = build_figures(run.self_evaluation)
    verifier = _dict(_dict(run.self_evaluation).get("verifier_evaluation"))
    evidence_retries = route.evidence_retry_count if route else 0
    session_id = run.session.session_id
    return RunDetail(
        run=run,
        answer_html=markdown_html(run.answer, citations=invocations),
        trace=trace,
        trace_invalid=run.orchestration_trace is not None and trace is None,
        route=route,
        route_svg=render_route_svg(trace),
        timeline=build_timeline(run, data.steps, data.invocations, highlights, evidence_retries),
        gatekeeper=gatekeeper,
        figures=figures,
        budget=budget,
        verifier=verifier,
        prompt_audit=_dict(verifier.get("prompt_audit")),
        self_evaluation_json=json_html(run.self_evaluation) if run.self_evaluation is not None else None,
        trace_api_url=f"{reverse('diagnosis-trace', kwargs={'session_id': session_id})}?runId={run.run_id}",
        steps_url=f"{reverse('admin:diagnosis_agentstep_changelist')}?run__id__exact={run.pk}",
        invocations_url=f"{reverse('admin:diagnosis_toolinvocation_changelist')}?run__id__exact={run.pk}",
        session_url=reverse("admin:diagnosis_chatsession_change", args=[run.session_id]),
        queue_ms=_ms_between(run.created_at, run.started_at),
        has_case=getattr(run, "case", None) is not None,  # loaded by select_related: no query
        tool_total=len(data.invocations),
    )
