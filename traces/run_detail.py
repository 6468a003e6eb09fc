"""What the run-detail page of the audit console shows, read in three queries whatever the run size.

`run_detail_get` loads the run, its steps and its tool invocations; `run_detail_build` turns them into
plain view data: the route, a timeline of steps and tool calls (`traces.run_detail_timeline`), the
Gatekeeper audit claim by claim with each verified excerpt located in its tool result
(`traces.run_detail_audit`), and the self-evaluation figures (`traces.run_detail_figures`). The parts
the page loads on demand (a step's body, a tool call's body) are built here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils.safestring import SafeString

from diagnosis.contracts import SelfEvaluation, orchestration_trace_read
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from traces.ranking_hint import RankingView, build_ranking
from traces.rendering import Highlight, markdown_html
from traces.route_svg import RouteSummary, render_route_svg, summarise_route, topology_for
from traces.run_detail_audit import REASON_HELP, AiOpsView, GatekeeperView, build_aiops, build_gatekeeper
from traces.run_detail_figures import BudgetLine, Figure, build_figures
from traces.run_detail_readers import as_dict, as_number, ms_between
from traces.run_detail_timeline import InvocationView, StepView, Timeline, build_timeline, invocation_view
from traces.trust import TrustLine, trust_line

__all__ = [  # the view models the templates and the admin views read, wherever they are built
    "REASON_HELP", "AiOpsView", "BudgetLine", "Figure", "FirstError", "GatekeeperView", "InvocationView",
    "RunDetail", "RunDetailData", "StepView", "Timeline", "answer_verified", "first_error", "invocation_part",
    "part_base", "run_detail_build", "run_detail_get", "step_part",
]


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
        check = as_dict(SelfEvaluation.read(run.self_evaluation).aiops_audit.get("report_check"))
        return (as_number(check.get("statements_verified")) or 0) > 0
    if run.strategy == DiagnosisRun.Strategy.SIMPLE:
        return False
    return run.effective_verdict in (DiagnosisRun.Verdict.PASS, DiagnosisRun.Verdict.LOW_CONFID)


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
        prompt_audit=as_dict(verifier.get("prompt_audit")),
        self_evaluation_json=None,  # loaded on demand: part/self-evaluation/json/
        trace_api_url=f"{reverse('diagnosis-trace', kwargs={'session_id': session_id})}?runId={run.run_id}",
        steps_url=f"{reverse('admin:diagnosis_agentstep_changelist')}?run__id__exact={run.pk}",
        invocations_url=f"{reverse('admin:diagnosis_toolinvocation_changelist')}?run__id__exact={run.pk}",
        session_url=reverse("admin:diagnosis_chatsession_change", args=[run.session_id]),
        queue_ms=ms_between(run.created_at, run.started_at),
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
    return invocation_view(invocation, highlights, data.run.created_at, 0, body="full" if full else "inline")
