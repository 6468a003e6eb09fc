"""POST /api/ai_ops with a scripted OpenAI-compatible model: the report check and model faults.

The settings point at a local fake server a worker process cannot see, so tasks run eagerly here.
"""

from __future__ import annotations

import json

import pytest

from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from tests.aiops.conftest import scenario_alerts, sse_events
from tests.diagnosis.conftest import tool_outputs
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db(transaction=True)

PAYMENT = scenario_alerts("payment-db-pool-exhaustion")
FABRICATED = "inv-deadbeef"


def phase_payload(request) -> dict:
    """The JSON object the supervisor sent as the user message (the executor may append fenced alerts)."""
    return json.JSONDecoder().raw_decode(request.messages[1]["content"])[0]


def planner(payload: dict) -> Reply:
    plan = payload["plan"]
    if not plan:
        return Reply.json({"decision": "PLAN", "rationale": "one service", "plan": [
            {"task_id": "t1", "service": "payment-service", "alert_ids": [a["alert_id"] for a in payload["alerts"]],
             "goal": "why does payment-service fail"}]})
    if any(t["status"] == "pending" for t in plan):
        return Reply.json({"decision": "EXECUTE", "task_id": "t1", "tool_budget": 4, "rationale": "go"})
    return Reply.json({"decision": "FINISH", "rationale": "done"})


def executor(request, seen: dict) -> Reply:
    if not request.tool_results:
        return Reply.tool_calls(("query_logs", {"service": "payment-service", "query": "Connection is not available"}, "call_1"),
                                ("query_metrics", {"service": "payment-service"}, "call_2"))
    claims = []
    for out in tool_outputs(request):
        seen[out["tool"]] = out["invocation_id"]
        if out["tool"] == "query_logs" and out["result"]:
            record = out["result"]["records"][0]
            claims.append({"claim_id": "c1", "statement": "payment-service cannot get DB connections",
                           "evidence": [{"source_invocation_id": out["invocation_id"], "tool_name": "query_logs",
                                         "raw_path": "$.records[0].message", "evidence_excerpt": record["message"]}]})
    return Reply.json({"status": "COMPLETED", "summary": "pool exhausted", "evidence": claims, "nextHint": ""})


def reporter(payload: dict, metrics_id: str) -> Reply:
    verified = payload["findings"][0]["verified_claims"][0]["evidence"][0]["source_invocation_id"]
    markdown = "\n".join([
        "**Active alerts**", "", "| alert | service | severity | state | since | analysed |", "|---|---|---|---|---|---|",
        *[f"| {a['alertname']} | {a['service']} | {a['severity']} | {a['state']} | {a['since']} | yes |" for a in payload["alerts"]],
        "", "**Per alert**",
        f"- Root cause: payment-service's connection pool is exhausted [{verified}].",
        f"- The primary database crashed at 10:02 [{FABRICATED}].",
        f"- CPU of payment-service doubled [{metrics_id}].",
        "", "**Conclusion**", "Long transactions hold the pool.", "", "**Risks**", "- Single source of evidence.",
    ])
    return Reply.json({"status": "FINISH", "report_markdown": markdown})


def script(fake, *, report=None):
    seen: dict[str, str] = {}  # tool name -> invocation id, as the executor saw them

    def respond(request):
        payload = phase_payload(request)
        if payload["phase"] == "plan":
            return planner(payload)
        if payload["phase"] == "execute":
            return executor(request, seen)
        return report(payload) if report is not None else reporter(payload, seen["query_metrics"])

    fake.always(respond, role="aiops")


def post(api, body):
    response = api.post("/api/ai_ops", body, format="json")
    assert response.status_code == 200, response.content
    events = sse_events(response)
    return DiagnosisRun.objects.get(run_id=events[0]["data"]["runId"]), events


def test_a_report_citing_a_fabricated_invocation_never_stores_that_claim(alice_api, demo_knowledge, eager_tasks, openai_llm):
    script(openai_llm)
    run, events = post(alice_api, {"alerts": PAYMENT})
    assert openai_llm.responder_errors == []
    assert run.status == "SUCCESS" and not run.degraded
    assert FABRICATED not in run.answer and "primary database crashed" not in run.answer
    # a real invocation of this run that carries no verified evidence is no citation either
    metrics = ToolInvocation.objects.get(run=run, tool_name="query_metrics")
    assert metrics.invocation_id not in run.answer and "CPU of payment-service doubled" not in run.answer
    logs = ToolInvocation.objects.get(run=run, tool_name="query_logs")
    # The verified executor claim is served with its quote; the reporter's own sentence is not.
    assert f"[{logs.invocation_id}]" in run.answer
    assert "connection pool is exhausted [" not in run.answer
    assert "2 statement(s) of this report cited evidence that the Gatekeeper could not verify" in run.answer
    report = next(e for e in events if e["event"] == "report")["data"]
    assert report["reportMarkdown"] == run.answer and report["citedInvocationIds"] == [logs.invocation_id]
    check = run.self_evaluation["aiops_audit"]["report_check"]
    assert {FABRICATED: "invocation_not_found"} in [r["reasons"] for r in check["removed"]]
    assert {metrics.invocation_id: "no_verified_evidence"} in [r["reasons"] for r in check["removed"]]
    evaluation = run.self_evaluation["aiops_rule_evaluation"]
    assert evaluation["report_statements_removed"] == 2 and evaluation["report_statements_verified"] == 1
    assert evaluation["decisions"] == ["PLAN", "EXECUTE", "FINISH"] and evaluation["citation_validity"] == 1.0
    assert {r.model for r in openai_llm.requests} == {"fake-aiops"}


def test_a_report_whose_every_citation_is_fabricated_is_replaced_by_the_verified_fallback(
        alice_api, demo_knowledge, eager_tasks, openai_llm):
    script(openai_llm, report=lambda payload: Reply.json({
        "status": "FINISH", "report_markdown": f"Root cause: the database crashed [{FABRICATED}]."}))
    run, _events = post(alice_api, {"alerts": PAYMENT})
    assert run.status == "SUCCESS" and run.degraded and FABRICATED not in run.answer
    logs = ToolInvocation.objects.get(run=run, tool_name="query_logs")
    assert "degraded report" in run.answer and f"[{logs.invocation_id}]" in run.answer
    assert run.self_evaluation["aiops_rule_evaluation"]["fallback_reason"] == "aiops_report_check:no_verified_statement"


def test_a_model_that_keeps_failing_ends_in_a_degraded_honest_report(alice_api, demo_knowledge, eager_tasks, openai_llm):
    openai_llm.always(Reply.error(500, "boom"), role="aiops")
    run, events = post(alice_api, {"alerts": PAYMENT})
    assert run.status == "SUCCESS" and run.degraded and events[-1]["data"]["status"] == "SUCCESS"
    assert "could not be completed (degraded report)" in run.answer and "| PaymentServiceHighErrorRate |" in run.answer
    assert "inv-" not in run.answer  # nothing was verified, so nothing is cited
    evaluation = run.self_evaluation["aiops_rule_evaluation"]
    assert evaluation["termination_reason"] == "planner_failed" and evaluation["fallback_used"]
    # one technical retry of the planner and of the reporter, each call retried once by the client
    assert len(openai_llm.requests) == 8
    assert set(AgentStep.objects.filter(run=run).values_list("status", flat=True)) == {"FAILED"}
    # the route: the supervisor's retry, the report of what was verified (nothing), the reporter's retry, fallback
    trace = run.orchestration_trace
    assert [(t["from"], t["to"], t["reason_code"], t["attempt"]) for t in trace["transitions"]] == [
        ("aiops_intake", "aiops_planner", "alerts_given", 1),
        ("aiops_planner", "aiops_planner", "retryable_failed", 1),
        ("aiops_planner", "aiops_reporter", "retry_exhausted", 2),
        ("aiops_reporter", "aiops_reporter", "retryable_failed", 1),
        ("aiops_reporter", "aiops_fallback", "retry_exhausted", 2),
        ("aiops_fallback", "END", "fallback_completed", 1),
    ]
    assert trace["termination_reason"] == "aiops_fallback_completed" and trace["degraded"] is True


def test_malformed_reporter_output_falls_back_to_the_verified_evidence(alice_api, demo_knowledge, eager_tasks, openai_llm):
    script(openai_llm, report=lambda payload: Reply.malformed_json('{"report_markdown": "unterminated'))
    run, _events = post(alice_api, {"alerts": PAYMENT})
    logs = ToolInvocation.objects.get(run=run, tool_name="query_logs")
    assert run.status == "SUCCESS" and run.degraded
    assert f"[{logs.invocation_id}]" in run.answer and "No verified root cause is reported" in run.answer
    assert run.self_evaluation["aiops_rule_evaluation"]["fallback_reason"] == "aiops_reporter:model_invalid_json"


def test_an_executor_calling_a_tool_outside_the_allow_list_is_blocked(alice_api, demo_knowledge, eager_tasks, openai_llm):
    def respond(request):
        payload = phase_payload(request)
        if payload["phase"] == "plan":
            return planner(payload)
        if payload["phase"] == "execute":
            return Reply.tool_calls(("run_shell", {"cmd": "cat /etc/passwd"}, "call_1"))
        return Reply.json({"status": "FINISH", "report_markdown": "**Active alerts**\n\nNothing could be verified."})

    openai_llm.always(respond, role="aiops")
    run, _events = post(alice_api, {"alerts": PAYMENT})
    blocked = ToolInvocation.objects.get(run=run)
    assert blocked.tool_name == "run_shell" and blocked.status == "BLOCKED" and blocked.result is None
    assert run.status == "SUCCESS" and "| PaymentServiceHighErrorRate |" in run.answer  # the table is added
    assert run.self_evaluation["aiops_audit"]["tasks"][0]["status"] == "TOOL_BLOCKED"


def test_a_model_that_cannot_be_configured_fails_the_run_with_its_reason(alice_api, demo_knowledge, eager_tasks,
                                                                         openai_llm, settings):
    settings.OPENAI_API_KEY = ""
    run, events = post(alice_api, {"alerts": PAYMENT})
    assert run.status == "FAILED" and run.error_code == "model_config_error" and "OPENAI_API_KEY" in run.error_message
    assert events[-1]["event"] == "status" and events[-1]["data"]["status"] == "FAILED"


def test_a_planner_fault_degrades_the_run_even_when_the_reporter_answers(alice_api, demo_knowledge, eager_tasks, openai_llm):
    def respond(request):
        if phase_payload(request)["phase"] == "plan":
            return Reply.error(400, "context length exceeded")
        return Reply.json({"status": "FINISH", "report_markdown": "**Conclusion**\n\nNothing was investigated."})

    openai_llm.always(respond, role="aiops")
    run, _events = post(alice_api, {"alerts": PAYMENT})
    assert run.status == "SUCCESS" and run.degraded
    assert run.answer.startswith("_The analysis stopped early (aiops_planner:")
    assert "| PaymentServiceHighErrorRate |" in run.answer
    # a 400 is not retried: one planner call, one reporter call
    assert [r.role for r in openai_llm.requests] == ["aiops", "aiops"] and len(openai_llm.requests) == 2
    assert run.orchestration_trace["degraded"] is True  # as the run is, though no fallback wrote the report
    hops = [(t["from"], t["to"], t["reason_code"]) for t in run.orchestration_trace["transitions"]]
    assert hops[1:3] == [("aiops_planner", "aiops_reporter", "non_retryable_failed"),
                         ("aiops_reporter", "aiops_report_check", "report_written")]
