"""Finished runs as the diagnosis graph records them, built with the factories: steps with model
input/output, tool invocations with stored results, a genuine Gatekeeper audit (the real
`verify_bindings` over these rows) and the stategraph-v1 route of each path."""

from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone

from diagnosis.gatekeeper import InvocationRecord, verify_bindings
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from tests.factories import AgentStepFactory, ChatSessionFactory, DiagnosisRunFactory, ToolInvocationFactory

MODEL = "gpt-4o-mini"
PROMPTS = {"planner": "v1", "executor": "v1", "verifier": "v1", "composer": "v1", "simple": "v1", "aiops": "v1"}
CATALOG = "catalog-79a2614cc9"

LOGS = {
    "backend": "demo", "service": "payment-service", "query": "level:ERROR", "start": "2026-11-29T09:30:00Z",
    "end": "2026-11-29T10:30:00Z", "total": 4, "truncated": False,
    "records": [
        {"timestamp": "2026-11-29T10:02:11Z", "service": "payment-service", "level": "ERROR",
         "message": "POST /v1/payments 500 in 30010ms: CannotGetJdbcConnectionException: Failed to obtain JDBC Connection"},
        {"timestamp": "2026-11-29T10:02:13Z", "service": "payment-service", "level": "ERROR",
         "message": "HikariPool-1 - Connection is not available, request timed out after 30000ms "
                    "(total=20, active=20, idle=0, waiting=57)"},
        {"timestamp": "2026-11-29T10:02:40Z", "service": "payment-service", "level": "WARN",
         "message": "HikariPool-1 - Thread starvation or clock leap detected (housekeeper delta=1m2s)."},
        {"timestamp": "2026-11-29T10:03:05Z", "service": "payment-service", "level": "ERROR",
         "message": "Circuit breaker 'ledger-db' OPEN after 50% failures in 10s window"},
    ],
}
METRICS = {
    "backend": "demo", "query": 'db_pool_active{service="payment-service"}', "start": "2026-11-29T09:30:00Z",
    "end": "2026-11-29T10:30:00Z", "step": 60,
    "series": [{
        "labels": {"__name__": "db_pool_active", "service": "payment-service"},
        "values": [[1764410400, "7"], [1764410460, "9"], [1764410520, "20"], [1764410580, "20"]],
        "stats": {"min": 7, "max": 20, "mean": 14, "last": 20, "max_at": "2026-11-29T10:02:00Z", "baseline": 7.5},
        "description": "db_pool_active{service=payment-service} max 20 at 10:02 (baseline 7.5)",
    }],
}
POOL_EXCERPT = "Connection is not available, request timed out after 30000ms"
METRIC_EXCERPT = "max 20 at 10:02"

SYSTEM_PROMPTS = {
    "planner": "<!-- prompt: planner v1 -->\nYou are the Planner of an evidence-gated incident diagnosis service.\n"
               "Decide which evidence to collect; the Executor runs the tools.",
    "executor": "<!-- prompt: executor v1 -->\nYou are the Executor. Run the Planner's steps with the tools you are "
                "given and report claims that cite the exact tool output (executor_evidence_v2).",
    "verifier": "<!-- prompt: verifier v1 -->\nYou are the Verifier. Your input holds ONLY evidence the Gatekeeper "
                "verified. Judge whether it supports each claim.",
    "composer": "<!-- prompt: composer v1 -->\nYou are the Composer. Use ONLY verified claims; cite invocation ids.",
}

HAPPY_ROUTE = [
    ("planner", "executor", "completed", 1), ("executor", "gatekeeper", "completed", 1),
    ("gatekeeper", "verified_input", "gatekeeper_pass", 1), ("verified_input", "verifier", "completed", 1),
    ("verifier", "composer", "verdict_pass", 1), ("composer", "END", "completed", 1),
]
EVIDENCE_RETRY_ROUTE = [
    ("planner", "executor", "completed", 1), ("executor", "gatekeeper", "completed", 1),
    ("gatekeeper", "verified_input", "gatekeeper_low_confid", 1), ("verified_input", "verifier", "completed", 1),
    ("verifier", "evidence_retry", "evidence_gap", 1), ("evidence_retry", "planner", "evidence_gap_only", 1),
    ("planner", "executor", "completed", 1), ("executor", "gatekeeper", "completed", 1),
    ("gatekeeper", "verified_input", "gatekeeper_low_confid", 1), ("verified_input", "verifier", "completed", 1),
    ("verifier", "verifier", "retryable_failed", 1), ("verifier", "fallback", "retry_exhausted", 2),
    ("fallback", "END", "fallback_completed", 1),
]
FALLBACK_ROUTE = [
    ("planner", "planner", "invalid_output", 1), ("planner", "executor", "completed", 2),
    ("executor", "gatekeeper", "completed", 1), ("gatekeeper", "fallback", "gatekeeper_reject", 1),
    ("fallback", "END", "fallback_completed", 1),
]


def orchestration_trace(route, *, evidence_retry_count: int = 0) -> dict:
    final = route[-1][0]
    return {
        "version": "stategraph-v1",
        "transitions": [{"from": a, "to": b, "reason_code": r, "attempt": n} for a, b, r, n in route],
        "final_node": final, "termination_reason": f"{final}_completed",
        "degraded": any(b == "fallback" for _, b, _, _ in route), "evidence_retry_count": evidence_retry_count,
    }


class _RunLookup:
    """The Gatekeeper's invocation lookup over the database rows, as the recorder implements it."""

    def lookup(self, invocation_ids):
        rows = ToolInvocation.objects.filter(invocation_id__in=list(invocation_ids)).values_list(
            "invocation_id", "run__run_id", "tool_name", "status", "result")
        return [InvocationRecord(*row) for row in rows]


def _claim(claim_id, statement, invocation, raw_path, excerpt):
    return {"claim_id": claim_id, "statement": statement, "evidence": [{
        "source_invocation_id": invocation.invocation_id, "tool_name": invocation.tool_name,
        "raw_path": raw_path, "evidence_excerpt": excerpt}]}


def _evidence(claims) -> dict:
    return {"version": "executor_evidence_v2", "summary": "payment-service DB pool exhausted", "claims": claims,
            "open_questions": []}


def _messages(node: str, payload: dict) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPTS[node]},
            {"role": "user", "content": json.dumps(payload, ensure_ascii=False)}]


def _output(content=None, tool_calls=(), *, tokens=(400, 60), latency=900.0) -> dict:
    return {"content": content, "tool_calls": list(tool_calls),
            "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1], "total_tokens": sum(tokens)},
            "model": MODEL, "latency_ms": latency, "finish_reason": "tool_calls" if tool_calls else "stop"}


class RunBuilder:
    """Adds steps and tool calls to one run on a clock, then writes its audit, route and totals."""

    def __init__(self, *, owner=None, session=None, question="Why is payment-service failing?", **fields):
        session = session or ChatSessionFactory(title=question, **({"owner": owner} if owner else {}))
        self.t0 = timezone.now() - timedelta(minutes=5)
        self.run = DiagnosisRunFactory(session=session, question=question, status=DiagnosisRun.Status.RUNNING,
                                       started_at=self.t0, model_name=MODEL, prompt_version=CATALOG, **fields)
        DiagnosisRun.objects.filter(pk=self.run.pk).update(created_at=self.t0 - timedelta(milliseconds=180))
        self.clock = 0
        self.index = 0
        self.steps: list[AgentStep] = []
        self.invocations: list[ToolInvocation] = []

    def step(self, node, payload, output, *, attempt=1, duration=900, status=AgentStep.Status.COMPLETED, error=""):
        usage = output.get("usage", {}) if isinstance(output, dict) else {}
        step = AgentStepFactory(
            run=self.run, step_index=self.index, node=node, agent=node, attempt=attempt, model_name=MODEL,
            model_input=_messages(node, payload), model_output=output, status=status, error=error,
            has_tool_call=bool(isinstance(output, dict) and output.get("tool_calls")), duration_ms=duration,
            prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0),
        )
        started = self.t0 + timedelta(milliseconds=self.clock)
        AgentStep.objects.filter(pk=step.pk).update(started_at=started, finished_at=started + timedelta(milliseconds=duration))
        step.started_at = started
        self.clock += duration + 15
        self.index += 1
        self.steps.append(step)
        return step

    def tool(self, step, tool_name, arguments, result, *, duration=140, status=ToolInvocation.Status.SUCCESS):
        invocation = ToolInvocationFactory(run=self.run, step=step, tool_name=tool_name, arguments=arguments,
                                           result=result, status=status, duration_ms=duration)
        self.clock += duration + 10
        ToolInvocation.objects.filter(pk=invocation.pk).update(created_at=self.t0 + timedelta(milliseconds=self.clock))
        self.invocations.append(invocation)
        return invocation

    def finish(self, *, route, executor_output, answer, verifier_output=None, degraded=False, evidence_retries=0,
               verdict="", gaps=()):
        gatekeeper = verify_bindings(executor_output=executor_output, run_id=self.run.run_id, lookup=_RunLookup())
        audit = gatekeeper.to_dict()
        verifier = verifier_output or {}
        by_status: dict[str, int] = {}
        for invocation in self.invocations:
            by_status[invocation.status] = by_status.get(invocation.status, 0) + 1
        prompt_tokens = sum(s.prompt_tokens for s in self.steps)
        completion_tokens = sum(s.completion_tokens for s in self.steps)
        verified = [c for c in executor_output["claims"]
                    if any(a["claim_id"] == c["claim_id"] and a["verified"] for a in audit["audit"])]
        self_evaluation = {
            "rule_evaluation": {
                "citation_validity_rate": audit["citation_validity"], "claims_verified": audit["verified_claim_count"],
                "claims_total": audit["total_claim_count"], "bindings_verified": audit["verified_binding_count"],
                "bindings_total": audit["total_binding_count"], "tool_calls": len(self.invocations),
                "tool_calls_by_status": by_status,
                "tool_success_rate": round(by_status.get("SUCCESS", 0) / len(self.invocations), 4) if self.invocations else None,
                "fallback_used": degraded, "evidence_retry_used": evidence_retries > 0,
                "budget": {"model_calls": len(self.steps), "max_model_calls": 24, "prompt_tokens": prompt_tokens,
                           "completion_tokens": completion_tokens, "max_tokens": 200000,
                           "elapsed_seconds": round(self.clock / 1000, 3), "max_seconds": 300,
                           "tool_calls": len(self.invocations), "max_tool_calls": 12, "exceeded": None},
            },
            "verifier_evaluation": {
                "statuses": {"planner": "COMPLETED", "executor": "COMPLETED",
                             "verifier": verifier.get("status", "COMPLETED"), "composer": verifier.get("composer")},
                "model_verdict": verifier.get("verdict"), "effective_verdict": verdict or None,
                "verdict_ceiling": audit["verdict"], "score": verifier.get("score"),
                "claim_checks": verifier.get("claim_checks", []), "fact_checks": [],
                "critical_evidence_gaps": list(gaps), "rationale": verifier.get("rationale"),
                "gatekeeper_audit": audit,
                "verified_executor_output": {**executor_output, "claims": verified},
                "verified_evidence": [{**e, "claim_id": c["claim_id"]} for c in verified for e in c["evidence"]],
                "composer_audit": {"status": verifier.get("composer"),
                                   "cited_invocation_ids": sorted({i.invocation_id for i in self.invocations[:1]})
                                   if verifier.get("composer") else []},
                "prompt_audit": {"catalog_version": CATALOG, "prompts": PROMPTS},
            },
        }
        DiagnosisRun.objects.filter(pk=self.run.pk).update(
            status=DiagnosisRun.Status.SUCCESS, answer=answer, degraded=degraded, effective_verdict=verdict,
            self_evaluation=self_evaluation,
            orchestration_trace=orchestration_trace(route, evidence_retry_count=evidence_retries),
            duration_ms=self.clock + 40, step_count=len(self.steps), tool_count=len(self.invocations),
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            finished_at=self.t0 + timedelta(milliseconds=self.clock + 40),
            celery_task_id="5b0c7a8e-52c4-4f0e-9a53-3a1f0c2d7e11",
        )
        self.run.refresh_from_db()
        return self.run


def _plan(mode="NORMAL", steps=None):
    return {"version": "planner_plan_v1", "mode": mode, "goal": "explain payment-service errors",
            "services": ["payment-service"],
            "steps": steps or [{"tool": "query_logs", "arguments": {"service": "payment-service", "query": "level:ERROR"}}]}


def _tool_call(call_id, name, arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


def happy_run(*, owner=None, session=None, question="Why is payment-service failing?") -> DiagnosisRun:
    """planner → executor → gatekeeper PASS → verified_input → verifier PASS → composer → END."""
    b = RunBuilder(owner=owner, session=session, question=question)
    b.step("planner", {"query": question}, _output(json.dumps(_plan()), tokens=(402, 48)), duration=820)
    call = b.step("executor", {"plan": _plan()}, _output(None, [_tool_call("call_1", "query_logs", {
        "service": "payment-service", "query": "level:ERROR"})], tokens=(557, 13)), duration=610)
    logs = b.tool(call, "query_logs", {"service": "payment-service", "query": "level:ERROR"}, LOGS)
    evidence = _evidence([_claim("c1", "payment-service cannot get DB connections: HikariPool-1 is exhausted", logs,
                                 "$.records[1].message", POOL_EXCERPT)])
    b.step("executor", {"plan": _plan()}, _output(json.dumps(evidence), tokens=(1592, 120)), duration=1480)
    verifier = {"verdict": "PASS", "score": 0.9, "rationale": "The log line shows the pool with 0 idle connections.",
                "claim_checks": [{"claim_id": "c1", "supported": True, "rationale": "log line quotes the pool state",
                                  "evidence_refs": []}], "composer": "COMPLETED"}
    b.step("verifier", {"verified_evidence": evidence["claims"]}, _output(json.dumps(verifier), tokens=(705, 42)), duration=930)
    answer = (f"**Root cause:** the HikariCP connection pool of payment-service is exhausted [{logs.invocation_id}].\n\n"
              "- 20 of 20 connections active, 57 requests waiting\n- `POST /v1/payments` fails after 30 s\n\n"
              "**Next steps:** raise the pool size or find the slow ledger query holding connections.")
    b.step("composer", {"verified": True}, _output(json.dumps({"answer_markdown": answer}), tokens=(561, 90)), duration=1210)
    return b.finish(route=HAPPY_ROUTE, executor_output=evidence, answer=answer, verifier_output=verifier, verdict="PASS")


def evidence_retry_run(*, owner=None, session=None, question="Why is payment-service failing since 10:00?") -> DiagnosisRun:
    """A LOW_CONFID first pass, an evidence retry for the pool metric, then a verifier that fails twice: fallback."""
    b = RunBuilder(owner=owner, session=session, question=question)
    b.step("planner", {"query": question}, _output(json.dumps(_plan()), tokens=(402, 48)), duration=840)
    call = b.step("executor", {"plan": _plan()}, _output(None, [_tool_call("call_1", "query_logs", {
        "service": "payment-service", "query": "level:ERROR"})], tokens=(557, 13)), duration=640)
    logs = b.tool(call, "query_logs", {"service": "payment-service", "query": "level:ERROR"}, LOGS, duration=180)
    first = _evidence([
        _claim("c1", "payment-service cannot get DB connections: HikariPool-1 is exhausted", logs, "$.records[1].message", POOL_EXCERPT),
        _claim("c2", "The ledger database is down", logs, "$.records[3].message", "ledger-db is unreachable"),
    ])
    b.step("executor", {"plan": _plan()}, _output(json.dumps(first), tokens=(1592, 160)), duration=1520)
    gap = {"gap": "no metric shows the pool saturation over time", "suggested_query": "db_pool_active for payment-service"}
    b.step("verifier", {"verified_evidence": first["claims"][:1]}, _output(json.dumps(
        {"verdict": "LOW_CONFID", "score": 0.55, "critical_evidence_gaps": [gap]}), tokens=(705, 64)), duration=990)
    plan2 = _plan("EVIDENCE_GAP_ONLY", [{"tool": "query_metrics", "arguments": {"metric": "db_pool_active", "service": "payment-service"}}])
    b.step("planner", {"query": question, "retry_context": {"critical_evidence_gaps": [gap]}},
           _output(json.dumps(plan2), tokens=(437, 52)), duration=760)
    call2 = b.step("executor", {"plan": plan2}, _output(None, [_tool_call("call_2", "query_metrics", {
        "metric": "db_pool_active", "service": "payment-service"})], tokens=(666, 14)), duration=580)
    metrics = b.tool(call2, "query_metrics", {"metric": "db_pool_active", "service": "payment-service"}, METRICS, duration=95)
    second = _evidence(first["claims"] + [
        _claim("c3", "The pool stayed saturated at 20 of 20 connections from 10:02", metrics,
               "$.series[0].description", METRIC_EXCERPT)])
    b.step("executor", {"plan": plan2}, _output(json.dumps(second), tokens=(832, 180)), duration=1340)
    timeout = {"error": {"type": "ModelRetryableError", "message": "read timeout after 60s"}, "raw_output": ""}
    b.step("verifier", {"verified_evidence": second["claims"]}, timeout, duration=1800,
           status=AgentStep.Status.FAILED, error="ModelRetryableError: read timeout after 60s")
    b.step("verifier", {"verified_evidence": second["claims"]}, timeout, attempt=2, duration=1800,
           status=AgentStep.Status.FAILED, error="ModelRetryableError: read timeout after 60s")
    answer = ("**No verified root cause could be confirmed** (the verifier did not complete), so this is the safe answer.\n\n"
              f"Verified evidence:\n\n- HikariPool-1 had no connection available [{logs.invocation_id}]\n"
              f"- db_pool_active reached 20 of 20 at 10:02 [{metrics.invocation_id}]\n\n"
              "Next steps: follow the *payment-service DB pool* runbook and retry the diagnosis.")
    return b.finish(route=EVIDENCE_RETRY_ROUTE, executor_output=second, answer=answer, degraded=True,
                    evidence_retries=1, verifier_output={"status": "RETRYABLE_FAILED"}, gaps=[gap])


def fallback_run(*, owner=None, session=None, question="Is checkout slow because of payments?") -> DiagnosisRun:
    """A planner retry, then a Gatekeeper REJECT (the only citation does not match): fallback."""
    b = RunBuilder(owner=owner, session=session, question=question)
    b.step("planner", {"query": question}, _output('{"version": "planner_plan_v1", "steps": [', tokens=(402, 20)),
           duration=700, status=AgentStep.Status.FAILED, error="InvalidOutput: malformed JSON")
    b.step("planner", {"query": question}, _output(json.dumps(_plan()), tokens=(410, 48)), attempt=2, duration=760)
    call = b.step("executor", {"plan": _plan()}, _output(None, [_tool_call("call_1", "query_logs", {
        "service": "payment-service"})], tokens=(557, 13)), duration=600)
    logs = b.tool(call, "query_logs", {"service": "payment-service"}, LOGS)
    evidence = _evidence([_claim("c1", "checkout is slow because payments time out", logs, "$.records[0].message",
                                 "checkout latency 9s")])
    b.step("executor", {"plan": _plan()}, _output(json.dumps(evidence), tokens=(1400, 90)), duration=1300)
    answer = "No claim could be verified against the tool output, so no root cause is reported. Check the payment-service runbook."
    return b.finish(route=FALLBACK_ROUTE, executor_output=evidence, answer=answer, degraded=True)


def run_with_steps(count: int, *, owner=None) -> DiagnosisRun:
    """A happy-path run of exactly `count` steps, each an executor call with one tool invocation."""
    session = ChatSessionFactory(**({"owner": owner} if owner else {}))
    run = DiagnosisRunFactory(session=session, status=DiagnosisRun.Status.SUCCESS, answer="Pool exhausted.",
                              step_count=count, tool_count=count, duration_ms=count * 100,
                              orchestration_trace=orchestration_trace(HAPPY_ROUTE))
    AgentStep.objects.bulk_create(
        AgentStep(run=run, session_id=session.session_id, step_index=i, node="executor", agent="executor",
                  model_input=_messages("executor", {"i": i}), model_output=_output(json.dumps({"i": i})),
                  status=AgentStep.Status.COMPLETED, duration_ms=100)
        for i in range(count)
    )
    steps = AgentStep.objects.filter(run=run).order_by("step_index")
    ToolInvocation.objects.bulk_create(
        ToolInvocation(run=run, session_id=session.session_id, step=step, invocation_id=f"inv-{i:08x}",
                       tool_name="query_logs", arguments={"service": "payment-service"},
                       status=ToolInvocation.Status.SUCCESS, result=LOGS, duration_ms=20)
        for i, step in enumerate(steps)
    )
    evidence = _evidence([_claim("c1", "pool exhausted", ToolInvocation.objects.filter(run=run).first(),
                                 "$.records[1].message", POOL_EXCERPT)])
    audit = verify_bindings(executor_output=evidence, run_id=run.run_id, lookup=_RunLookup()).to_dict()
    DiagnosisRun.objects.filter(pk=run.pk).update(self_evaluation={
        "rule_evaluation": {"citation_validity_rate": 1.0, "claims_verified": 1, "claims_total": 1},
        "verifier_evaluation": {"gatekeeper_audit": audit, "claim_checks": []},
    })
    run.refresh_from_db()
    return run


def ranked(run: DiagnosisRun, *, agreement: str = "differs") -> DiagnosisRun:
    """`run` with a structured diagnosis holding the localiser's ranking (the stored shape of
    diagnosis.ranking_view): the database its log names first, the asked service explained by it."""
    logs = run.tool_invocations.get(tool_name="query_logs")
    cite = lambda path: {"invocationId": logs.invocation_id, "tool": "query_logs", "rawPath": path}  # noqa: E731
    run.diagnosis = {
        "rootCause": {"service": "payment-service", "cause": "resource.pool", "summary": "The pool is exhausted.",
                      "startedAt": "2026-11-29T10:02:11Z", "claimIds": ["c1"], "basis": "observed"},
        "nothingWrong": False, "undetermined": False, "symptoms": [],
        "candidates": [
            {"rank": 1, "service": "ledger-db", "kind": "dependency.database", "onset": 1795946531.0, "strength": 0.9,
             "explainedBy": None, "explains": ["payment-service"], "evidence": [cite("$.records[3].message")]},
            {"rank": 2, "service": "payment-service", "kind": "resource.pool", "onset": 1795946533.0, "strength": 1.4,
             "explainedBy": "ledger-db", "explains": [], "evidence": [cite("$.records[0].message"),
                                                                      cite("$.records[1].message")]},
        ],
        "localisation": {"outcome": "root_cause", "reason": None, "subject": ["payment-service"], "withoutData": []},
        "agreement": agreement,
    }
    DiagnosisRun.objects.filter(pk=run.pk).update(diagnosis=run.diagnosis)
    return run
