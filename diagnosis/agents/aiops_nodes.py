"""The alert-analysis node ports plugged into `build_aiops_graph`, and `AlertSupervisor`, which runs one
analysis on the engine and returns its outcome with the `stategraph-v1` orchestration trace.

Framework-free: the ports run on an `AgentContext` (model, ToolBox, step recorder, invocation lookup).
Every expected failure (a model fault, a bad output, a failing tool, a spent budget) becomes a status
the topology routes on and, at worst, the deterministic degraded report.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable, Mapping

from diagnosis.agents.aiops import (
    ACTIVE_STATES, MAX_ALERTS, MAX_TASKS, MIN_TASK_TOOL_CALLS, ROLE, AiOpsOutcome, ReportCheck, Task, TaskResult,
    alert_record, alerts_language, compact_alert, validate_decision, validate_execution, validate_report,
)
from diagnosis.agents.aiops_report import (
    check_report, compose_alert_fallback, render_aiops_report, report_suggestions,
)
from diagnosis.agents.catalog import prompt
from diagnosis import i18n
from diagnosis.alert_render import NEXT_LOGS, NEXT_RETRY, REMOVED_NOTE, STOPPED_EARLY
from diagnosis.agents.nodes import STATUS_BY_KIND, run_inputs
from diagnosis.agents.runtime import AgentContext, fence_tool_output
from diagnosis.agents.tool_loop import run_tool_loop
from diagnosis.contracts import EXECUTOR_EVIDENCE_VERSION
from diagnosis.markdown_text import md_inline
from diagnosis.gatekeeper import project_verified_input, verify_bindings
from diagnosis.graph.aiops_topology import (
    DEFAULT_MAX_ROUNDS, AiOpsNodes, Decision, build_aiops_graph, clamp_rounds, initial_aiops_state,
)
from diagnosis.graph.aiops_topology import AiOpsKey as K
from diagnosis.graph.aiops_topology import AiOpsNode as N
from diagnosis.graph.engine import RunConfig
from diagnosis.graph.state import NodeStatus as S
from diagnosis.graph.trace import build_orchestration_trace
from diagnosis.llm.base import ModelError
from diagnosis.tools.registry import EVIDENCE_TOOLS, SUCCESS, ToolOutcome

EventSink = Callable[[str, dict], None]


def _status_for(exc: ModelError) -> str:
    return STATUS_BY_KIND.get(exc.kind, S.NON_RETRYABLE_FAILED)


def _stop(reason: str) -> dict[str, Any]:
    return {K.SUPERVISOR_STATUS: S.COMPLETED, K.DECISION: {"decision": Decision.STOP, "reason": reason},
            K.TERMINATION: reason}


def _intake_error(state: Mapping[str, Any]) -> str | None:
    intake = state.get(K.INTAKE) or {}
    if intake.get("status") == SUCCESS:
        return None
    return f"query_alerts: {intake.get('error') or intake.get('status')}"


def _namespaced(claim: Any, task_id: str) -> Any:
    """Claim ids unique across tasks (`t1.c1`), so one run's audits never collide."""
    if isinstance(claim, Mapping) and isinstance(claim.get("claim_id"), str) and claim["claim_id"].strip():
        return {**claim, "claim_id": f"{task_id}.{claim['claim_id']}"[:64]}
    return claim


class AlertAgents:
    """The seven node ports bound to one run's `AgentContext`."""

    def __init__(self, ctx: AgentContext, *, alerts: list[dict] | None, language: str | None, max_rounds: int):
        self.ctx = ctx
        self.given_alerts = list(alerts or [])[:MAX_ALERTS]
        self.language = language if language in ("en", "zh") else None
        self.max_rounds = max_rounds

    def nodes(self) -> AiOpsNodes:
        return AiOpsNodes(intake=self.intake, supervisor=self.supervisor, executor=self.executor,
                          gatekeeper=self.gatekeeper, reporter=self.reporter, report_check=self.report_check,
                          fallback=self.fallback)

    def _by_id(self, state) -> dict[str, dict]:
        return {a["alert_id"]: a for a in state.get(K.ALERTS) or []}

    # -- intake ------------------------------------------------------------------------------------
    def intake(self, state, config):
        if self.given_alerts:
            alerts = self.given_alerts
            return {K.ALERTS: alerts, K.ALERTS_SOURCE: "request", K.INTAKE: {"source": "request", "status": SUCCESS},
                    K.INTAKE_OUTCOME: None, K.LANGUAGE: self.language or alerts_language(alerts),
                    K.EVENT_DETAIL: {"alerts": len(alerts)}}
        outcome = self.ctx.tools.call("query_alerts", {})
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
        intake = {"source": "query_alerts", "status": outcome.status, "invocation_id": outcome.invocation_id,
                  "error": outcome.error or None}
        return {K.ALERTS: found, K.ALERTS_SOURCE: "query_alerts", K.INTAKE: intake, K.INTAKE_OUTCOME: outcome,
                K.LANGUAGE: self.language or alerts_language(found),
                K.EVENT_DETAIL: {"alerts": len(found), "invocation_id": outcome.invocation_id}}

    # -- supervisor --------------------------------------------------------------------------------
    def supervisor(self, state, config):
        alerts = state.get(K.ALERTS) or []
        if not alerts:
            return _stop("no_active_alerts" if (state.get(K.INTAKE) or {}).get("status") == SUCCESS
                         else "alerts_unavailable")
        if self.ctx.tools.remaining <= 0:
            return _stop("tool_budget_spent")
        round_no = state.get(K.ROUND) or 1
        tasks: list[Task] = list(state.get(K.TASKS) or [])
        results: list[TaskResult] = list(state.get(K.RESULTS) or [])
        payload = {
            "phase": "plan", "round": round_no, "max_rounds": self.max_rounds, "language": state.get(K.LANGUAGE),
            "alerts": [compact_alert(a) for a in alerts], "plan": [t.to_dict() for t in tasks],
            "findings": [r.finding(for_planner=True) for r in results],
            "tool_budget": self.ctx.tools.remaining, "allowed_tools": sorted(EVIDENCE_TOOLS),
        }
        try:
            reply = self.ctx.call_model(node=N.SUPERVISOR, role=ROLE, attempt=(state.get(K.SUPERVISOR_RETRY_COUNT) or 0) + 1,
                                        system=prompt(ROLE).text, user=payload, structured_input=payload)
            decision = validate_decision(reply.parse_json(), {a["alert_id"] for a in alerts})
        except ModelError as exc:
            return {K.SUPERVISOR_STATUS: _status_for(exc), K.FAULT: f"{N.SUPERVISOR}:{exc.code}",
                    K.EVENT_DETAIL: {"round": round_no, "error": exc.code}}
        by_id = self._by_id(state)
        tasks = _apply_plan(tasks, decision["plan"], by_id)
        update = {K.SUPERVISOR_STATUS: S.COMPLETED, K.DECISION: decision, K.TASKS: tasks,
                  K.EVENT_DETAIL: {"round": round_no, "task_id": decision["task_id"]}}
        if decision["decision"] != Decision.EXECUTE:
            return update
        task, tasks = _pick(tasks, decision, by_id)
        if task is None:
            return {**_stop("nothing_to_execute"), K.TASKS: tasks}
        pending = sum(1 for t in tasks if t.status == "pending")
        share = max(MIN_TASK_TOOL_CALLS, self.ctx.tools.remaining // max(1, pending))
        budget = min(self.ctx.tools.remaining, decision["tool_budget"] or share)
        done = replace(task, status="done")
        tasks = [done if t is task else t for t in tasks]
        update.update({K.TASKS: tasks, K.CURRENT_TASK: done, K.TASK_BUDGET: budget,
                       K.EVENT_DETAIL: {"round": round_no, "task_id": done.task_id}})
        return update

    # -- task executor -----------------------------------------------------------------------------
    def executor(self, state, config):
        ctx, task, round_no = self.ctx, state[K.CURRENT_TASK], state.get(K.ROUND) or 1
        tool_budget = int(state.get(K.TASK_BUDGET) or 0)
        by_id = self._by_id(state)
        payload = {
            "phase": "execute", "round": round_no, "language": state.get(K.LANGUAGE), "task": task.to_dict(),
            "alerts": [compact_alert(by_id[a]) for a in task.alert_ids if a in by_id],
            "tool_budget": tool_budget, "allowed_tools": sorted(ctx.tools.offered),
        }
        user = json.dumps(payload, ensure_ascii=False, default=str)
        context: list[dict] = []
        intake: ToolOutcome | None = state.get(K.INTAKE_OUTCOME)
        if intake is not None and intake.status == SUCCESS:
            user += "\n\nThe active alerts as returned by query_alerts (citable):\n" + fence_tool_output(intake)
            context = [intake.to_dict()]
        messages = [{"role": "system", "content": prompt(ROLE).text}, {"role": "user", "content": user}]
        detail = {"round": round_no, "task_id": task.task_id}
        loop = run_tool_loop(
            ctx, node=N.EXECUTOR, role=ROLE, attempt=1, messages=messages, tool_budget=tool_budget,
            structured_input=lambda results, used: {**payload, "tool_budget": max(0, tool_budget - used),
                                                    "tool_results": results, "context_results": context},
        )
        try:
            if loop.error is not None:
                raise loop.error
            if loop.reply is None:
                failed = TaskResult(task, round_no, S.TOOL_BLOCKED, invocation_ids=loop.invocation_ids,
                                    error=loop.blocked_error(), gatekeeper={})
                return {K.EXECUTOR_STATUS: S.TOOL_BLOCKED, K.RESULTS: [failed], K.EVENT_DETAIL: detail}
            output = validate_execution(loop.reply.parse_json())
        except ModelError as exc:
            status = S.INVALID_OUTPUT if exc.kind == "invalid_output" else S.FAILED
            failed = TaskResult(task, round_no, status, error=exc.to_dict(),
                                invocation_ids=[r["invocation_id"] for r in loop.results])
            return {K.EXECUTOR_STATUS: status, K.RESULTS: [failed], K.EVENT_DETAIL: {**detail, "error": exc.code}}
        return {K.EXECUTOR_STATUS: S.COMPLETED,
                K.TASK_OUTPUT: {**output, "invocation_ids": [r["invocation_id"] for r in loop.results]},
                K.EVENT_DETAIL: {**detail, "task_status": output["status"], "tool_calls": loop.calls}}

    # -- task gatekeeper ---------------------------------------------------------------------------
    def gatekeeper(self, state, config):
        ctx, task, output = self.ctx, state[K.CURRENT_TASK], state[K.TASK_OUTPUT]
        claims = [_namespaced(claim, task.task_id) for claim in output["evidence"]]
        executor_output = {"version": EXECUTOR_EVIDENCE_VERSION, "summary": output["summary"], "claims": claims,
                           "open_questions": []}
        result = verify_bindings(executor_output=executor_output, run_id=ctx.run_id, lookup=ctx.lookup,
                                 echo_sources=run_inputs("", ctx.tools.outcomes))
        verified_output, verified_evidence = project_verified_input(executor_output=executor_output,
                                                                    gatekeeper_result=result)
        checked = TaskResult(task, state.get(K.ROUND) or 1, output["status"], summary=output["summary"],
                             next_hint=output["next_hint"], claims=claims, gatekeeper=result.to_dict(),
                             verified_claims=verified_output["claims"], verified_evidence=verified_evidence,
                             invocation_ids=output["invocation_ids"])
        return {K.RESULTS: [checked], K.EVENT_DETAIL: {
            "task_id": task.task_id, "verdict": str(result.verdict), "gatekeeper_reason": str(result.reason_code),
            "claims_verified": result.verified_claim_count, "claims_total": result.total_claim_count}}

    # -- report ------------------------------------------------------------------------------------
    def reporter(self, state, config):
        alerts, results = state.get(K.ALERTS) or [], list(state.get(K.RESULTS) or [])
        analysed = {a: r.task.task_id for r in results for a in r.task.alert_ids}
        payload = {
            "phase": "report", "language": state.get(K.LANGUAGE), "termination_reason": state.get(K.TERMINATION),
            "alerts": [{**compact_alert(a), "analysed": a["alert_id"] in analysed, "task_id": analysed.get(a["alert_id"])}
                       for a in alerts],
            "findings": [r.finding(for_planner=False) for r in results],
            "not_analysed": [a["alert_id"] for a in alerts if a["alert_id"] not in analysed],
            "intake": {k: v for k, v in (state.get(K.INTAKE) or {}).items() if k in ("source", "status", "error")},
            "tool_calls": {"used": self.ctx.tools.calls, "max": self.ctx.tools.max_calls},
        }
        try:
            reply = self.ctx.call_model(node=N.REPORTER, role=ROLE, attempt=(state.get(K.REPORTER_RETRY_COUNT) or 0) + 1,
                                        system=prompt(ROLE).text, user=payload, structured_input=payload)
            markdown = validate_report(reply.parse_json())
        except ModelError as exc:
            return {K.REPORTER_STATUS: _status_for(exc), K.REPORTER_FAULT: f"{N.REPORTER}:{exc.code}",
                    K.EVENT_DETAIL: {"error": exc.code}}
        return {K.REPORTER_STATUS: S.COMPLETED, K.REPORT_MARKDOWN: markdown}

    def _check(self, state, markdown: str) -> ReportCheck:
        evidence = [e for r in state.get(K.RESULTS) or [] for e in r.verified_evidence]
        tool_names = {o.invocation_id: o.tool_name for o in self.ctx.tools.outcomes}
        return check_report(markdown, run_id=self.ctx.run_id, lookup=self.ctx.lookup, verified_evidence=evidence,
                            tool_names=tool_names, language=state.get(K.LANGUAGE) or "en")

    def report_check(self, state, config):
        """The reporter's text is audited (which of its cited lines would verify) but never served as is: the
        served report is rendered from the verified task evidence (SPEC R1)."""
        markdown, language = state[K.REPORT_MARKDOWN], state.get(K.LANGUAGE) or "en"
        alerts, results = state.get(K.ALERTS) or [], list(state.get(K.RESULTS) or [])
        check = self._check(state, markdown)
        detail = {"statements_verified": check.statements_verified, "statements_removed": len(check.removed)}
        if check.removed and check.statements_verified == 0 and any(r.verified_evidence for r in results):
            return {K.REPORT_STATUS: "emptied", K.REPORT_CHECK: check,
                    K.EVENT_DETAIL: {**detail, "outcome": "EMPTIED"}}
        text, removed, cited, advice = render_aiops_report(alerts=alerts, results=results, language=language,
                                                           suggestions=report_suggestions(markdown))
        stopped = state.get(K.FAULT) or _intake_error(state)
        if stopped:  # the reporter may not say so itself: the run does
            text = i18n.text(STOPPED_EARLY, language, reason=md_inline(stopped)) + "\n\n" + text
        if check.removed:  # say that the reporter cited evidence that did not verify
            why = ", ".join(sorted({r for item in check.removed for r in item["reasons"].values()}))
            text += "\n" + i18n.text(REMOVED_NOTE, language, n=len(check.removed), reasons=why) + "\n"
        check = replace(check, markdown=text, cited_invocation_ids=cited,
                        removed=check.removed + [{"rendered": True, **r} for r in removed],
                        suggestions=[a["text"] for a in advice], advice=advice)
        outcome = "PASS" if not check.removed else "STATEMENTS_REMOVED"
        return {K.REPORT_STATUS: "checked", K.REPORT_CHECK: check, K.FINAL_ANSWER: text,
                K.EVENT_DETAIL: {**detail, "statements_removed": len(check.removed), "outcome": outcome}}

    def fallback(self, state, config):
        why = state.get(K.FAULT) or state.get(K.FALLBACK_REASON) or f"{N.REPORTER}:unknown"
        text = compose_alert_fallback(alerts=state.get(K.ALERTS) or [], results=list(state.get(K.RESULTS) or []),
                                      reason=why, language=state.get(K.LANGUAGE) or "en",
                                      intake_error=_intake_error(state))
        check = self._check(state, text)
        language = state.get(K.LANGUAGE) or "en"
        steps = [i18n.text(NEXT_LOGS, language), i18n.text(NEXT_RETRY, language)]
        check = replace(check, suggestions=steps,
                        advice=[{"text": t, "verified": False, "destructive": False, "claimId": None} for t in steps])
        return {K.REPORT_CHECK: check, K.FINAL_ANSWER: check.markdown,
                K.EVENT_DETAIL: {"statements_verified": check.statements_verified,
                                 "statements_removed": len(check.removed)}}


def _apply_plan(tasks: list[Task], items: list[dict], by_id: Mapping[str, dict]) -> list[Task]:
    """A new plan replaces the pending tasks; finished ones stay. Ids are made unique."""
    if not items:
        return tasks
    tasks = [t for t in tasks if t.status != "pending"]
    for item in items:
        _add_task(tasks, item, by_id)
    return tasks


def _add_task(tasks: list[Task], item: dict, by_id: Mapping[str, dict]) -> Task | None:
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


def _pick(tasks: list[Task], decision: dict, by_id: Mapping[str, dict]) -> tuple[Task | None, list[Task]]:
    pending = [t for t in tasks if t.status == "pending"]
    named = next((t for t in pending if t.task_id == decision["task_id"]), None)
    if named is not None:
        return named, tasks
    if decision["task"] is not None:
        tasks = list(tasks)
        return _add_task(tasks, decision["task"], by_id), tasks
    return (pending[0] if pending else None), tasks


class AlertSupervisor:
    """One AI_OPS run on the engine: streams the alert-analysis graph, publishing each node's event."""

    def __init__(self, ctx: AgentContext, *, max_rounds: int = DEFAULT_MAX_ROUNDS, on_event: EventSink | None = None,
                 heartbeat: Callable[[], Any] | None = None):
        self.ctx = ctx
        self.max_rounds = clamp_rounds(max_rounds)
        self.on_event = on_event or (lambda kind, data: None)
        self.heartbeat = heartbeat or (lambda: None)

    def stream(self, *, alerts: list[dict] | None, language: str | None = None):
        """Yield the state after every node (its new events already published); GraphRunError on a fault."""
        agents = AlertAgents(self.ctx, alerts=alerts, language=language, max_rounds=self.max_rounds)
        graph = build_aiops_graph(agents.nodes(), max_rounds=self.max_rounds)
        config = RunConfig.for_run(run_id=self.ctx.run_id, session_id=self.ctx.session_id)
        seen = 0
        for _node, _update, state in graph.stream(initial_aiops_state(), config):
            self.heartbeat()
            events = state.get(K.ORCHESTRATION_EVENTS) or ()
            for event in events[seen:]:
                self.on_event("node", dict(event))
            seen = len(events)
            yield state

    def run(self, *, alerts: list[dict] | None, language: str | None = None) -> AiOpsOutcome:
        state: Mapping[str, Any] = {}
        for state in self.stream(alerts=alerts, language=language):
            pass
        return outcome_of(state, max_rounds=self.max_rounds)


def outcome_of(state: Mapping[str, Any], *, max_rounds: int) -> AiOpsOutcome:
    """The outcome of a finished run, from its final state."""
    fallback_reason = state.get(K.FALLBACK_REASON) if state.get(K.DEGRADED) else None
    degraded = fallback_reason is not None or bool(state.get(K.FAULT)) or _intake_error(state) is not None
    return AiOpsOutcome(
        report_markdown=state.get(K.FINAL_ANSWER) or "", degraded=degraded, language=state.get(K.LANGUAGE) or "en",
        alerts=list(state.get(K.ALERTS) or []), alerts_source=state.get(K.ALERTS_SOURCE) or "request",
        intake=dict(state.get(K.INTAKE) or {}), tasks=list(state.get(K.TASKS) or []),
        results=list(state.get(K.RESULTS) or []), decisions=list(state.get(K.DECISIONS) or []),
        rounds=state.get(K.ROUND) or 0, max_rounds=max_rounds, termination_reason=state.get(K.TERMINATION) or "",
        fallback_used=fallback_reason is not None, fallback_reason=fallback_reason,
        report_check=state.get(K.REPORT_CHECK),
        # degraded as the run is: a supervisor fault or an unreadable intake also degrade a checked report
        orchestration_trace=build_orchestration_trace(state.get(K.ORCHESTRATION_EVENTS), {**state, K.DEGRADED: degraded},
                                                      ended=True),
    )
