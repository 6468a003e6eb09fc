"""The run-detail page's timeline: the run's steps and tool calls on its clock, each with a bar.

Step bodies (model input and output) and tool-call bodies are built only when asked for; the page
loads them when a row is opened (`traces.run_detail.step_part`, `invocation_part`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString

from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from traces.rendering import FULL_LIMIT, Highlight, ResultView, json_html, parsed_json, result_html
from traces.run_detail_readers import as_dict, as_list, as_number, ms_between

# Pipeline order of the model-calling nodes: a step going back in it starts a new phase.
PIPELINE = {"planner": 0, "executor": 1, "verifier": 2, "composer": 3}

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
    for message in as_list(model_input):
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
    output = as_dict(model_output)
    body, is_json = _content_view(output.get("content")) if output.get("content") is not None else (None, False)
    if output.get("error") is not None and body is None:
        body, is_json = json_html(output.get("error")), True
    calls = output.get("tool_calls")
    meta = []
    for key, label in (("finish_reason", "finish"), ("model", "model"), ("latency_ms", "latency")):
        value = output.get(key)
        if value not in (None, ""):
            meta.append((label, f"{value:.0f} ms" if key == "latency_ms" and as_number(value) is not None else value))
    return body, is_json, (json_html(calls) if calls else None), meta


def _bar(start_ms: float, duration_ms: float, total_ms: float) -> Bar:
    if total_ms <= 0:
        return Bar(0.0, 100.0)
    left = min(max(start_ms / total_ms * 100, 0.0), 99.4)
    width = min(max(duration_ms / total_ms * 100, 0.6), 100.0 - left)
    return Bar(round(left, 2), round(width, 2))


def invocation_view(invocation, highlights, t0, total_ms, *, body: str = "auto") -> InvocationView:
    """body: "auto" (inline when it holds verified evidence, else loaded on demand), "inline" or "full"."""
    duration = invocation.duration_ms or 0
    end = ms_between(t0, invocation.created_at) or 0.0
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
    ends = [(ms_between(t0, s.started_at) or 0) + (s.duration_ms or 0) for s in steps]
    ends += [ms_between(t0, i.created_at) or 0 for i in invocations]
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
            bar=_bar(ms_between(t0, step.started_at) or 0, step.duration_ms or 0, total_ms),
            messages=_messages(step.model_input) if step_bodies else [],
            output_body=body, output_is_json=is_json, output_tool_calls=calls, output_meta=meta,
            output_raw=json_html(step.model_output) if step_bodies else SafeString(""),
            invocations=[invocation_view(i, highlights.get(i.invocation_id, []), t0, total_ms, body=invocation_body)
                         for i in by_step.get(step.pk, [])],
            phase=phase,
            admin_url=reverse("admin:diagnosis_agentstep_change", args=[step.pk]),
            lazy=not step_bodies,
        ))
        previous = step
    return Timeline(
        steps=views,
        orphans=[invocation_view(i, highlights.get(i.invocation_id, []), t0, total_ms, body=invocation_body)
                 for i in orphans],
        total_ms=total_ms,
        step_ms=sum(s.duration_ms or 0 for s in steps),
        tool_ms=sum(i.duration_ms or 0 for i in invocations),
    )

