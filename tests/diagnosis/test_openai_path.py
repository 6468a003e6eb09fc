"""The OpenAI path: the real `openai` client against a scripted local server, through the real graph,
tools, Gatekeeper and persistence."""

from __future__ import annotations

import json

import pytest

from diagnosis.agents.results import SELF_EVALUATION_MAX_BYTES
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from diagnosis.services.execution import run_execute
from tests.diagnosis.conftest import tool_outputs, user_payload
from tests.support.fake_openai import Reply, answer_plan

pytestmark = pytest.mark.django_db

PLAN = {"version": "planner_plan_v1", "goal": "explain payment-service errors", "services": ["payment-service"],
        "steps": [{"tool": "query_logs", "arguments": {"service": "payment-service", "query": "level:ERROR"}}]}


def evidence_from_logs(request) -> Reply:
    """Cite the first pool-exhaustion log line really returned in this run."""
    claims = []
    for out in tool_outputs(request):
        if out["tool"] != "query_logs" or not out["result"]:
            continue
        for i, record in enumerate(out["result"]["records"]):
            if "Connection is not available" in record["message"]:
                claims.append({"claim_id": "c1", "statement": "payment-service cannot get DB connections",
                               "evidence": [{"source_invocation_id": out["invocation_id"], "tool_name": "query_logs",
                                             "raw_path": f"$.records[{i}].message", "evidence_excerpt": record["message"]}]})
                break
    return Reply.json({"version": "executor_evidence_v2", "summary": "pool exhausted", "claims": claims, "open_questions": []})


def compose_citing_evidence(request) -> Reply:
    return Reply.json(answer_plan(user_payload(request)))


def script_happy(fake, *, planner=None, executor_first=None, verifier=None, composer=None):
    fake.enqueue(*(planner or [Reply.json(PLAN)]), role="planner")
    fake.enqueue(*(executor_first or []), Reply.tool_calls(("query_logs", {"service": "payment-service", "query": "level:ERROR"}, "call_1")), role="executor")
    fake.always(evidence_from_logs, role="executor")
    fake.enqueue(*(verifier or [Reply.json({"verdict": "PASS", "score": 0.9, "claim_checks": [], "critical_evidence_gaps": []})]), role="verifier")
    fake.enqueue(*(composer or []), role="composer")
    fake.always(compose_citing_evidence, role="composer")


def route(run: DiagnosisRun) -> list[tuple[str, str, int]]:
    return [(t["from"], t["to"], t["attempt"]) for t in run.orchestration_trace["transitions"]]


def test_a_scripted_model_runs_the_whole_graph_with_tool_calls_and_json(openai_llm, demo_knowledge, make_run):
    script_happy(openai_llm)
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == DiagnosisRun.Status.SUCCESS and not run.degraded
    assert run.effective_verdict == "PASS"
    assert [r[:2] for r in route(run)] == [("planner", "executor"), ("executor", "gatekeeper"), ("gatekeeper", "verified_input"),
                                          ("verified_input", "verifier"), ("verifier", "composer"), ("composer", "END")]
    invocation = ToolInvocation.objects.get(run=run)
    assert invocation.tool_name == "query_logs" and invocation.status == "SUCCESS"
    assert f"[{invocation.invocation_id}]" in run.answer
    steps = list(AgentStep.objects.filter(run=run).order_by("step_index"))
    assert [s.agent for s in steps] == ["planner", "executor", "executor", "verifier", "composer"]
    assert all(s.prompt_tokens > 0 and s.status == "COMPLETED" and s.duration_ms is not None for s in steps)
    assert steps[1].has_tool_call and invocation.step_id == steps[1].pk
    assert {r.model for r in openai_llm.requests} == {"fake-planner", "fake-executor", "fake-verifier", "fake-composer"}
    assert run.prompt_tokens == sum(s.prompt_tokens for s in steps)
    assert run.prompt_version.startswith("catalog-")


def test_malformed_planner_json_is_retried_once_then_succeeds(openai_llm, demo_knowledge, make_run):
    script_happy(openai_llm, planner=[Reply.malformed_json(), Reply.json(PLAN)])
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert route(run)[:2] == [("planner", "planner", 1), ("planner", "executor", 2)]
    assert run.orchestration_trace["transitions"][0]["reason_code"] == "invalid_output"
    assert run.effective_verdict == "PASS"


def test_a_planner_that_keeps_answering_500_falls_back_after_bounded_retries(openai_llm, demo_knowledge, make_run):
    openai_llm.always(Reply.error(500, "boom"), role="planner")
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == DiagnosisRun.Status.SUCCESS and run.degraded
    assert [r[:2] for r in route(run)] == [("planner", "planner"), ("planner", "fallback"), ("fallback", "END")]
    # one technical retry in the graph, each call retried once by the client: 4 requests, never more
    assert len(openai_llm.requests_for("planner")) == 4
    assert AgentStep.objects.filter(run=run, status="FAILED").count() == 2


def test_a_verifier_stall_beyond_the_timeout_is_retried_then_falls_back(openai_llm, demo_knowledge, make_run, settings):
    settings.LLM_MAX_RETRIES = 0
    script_happy(openai_llm, verifier=[Reply.stall(5), Reply.stall(5)])
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.degraded and run.orchestration_trace["final_node"] == "fallback"
    assert ("verifier", "verifier", 1) in route(run) and ("verifier", "fallback", 2) in route(run)
    assert run.effective_verdict == ""  # the verifier never completed: no fabricated verdict
    # the verified evidence still reaches the safe answer
    assert ToolInvocation.objects.get(run=run).invocation_id in run.answer


def test_a_429_at_the_composer_is_retried_by_the_client_and_the_run_succeeds(openai_llm, demo_knowledge, make_run):
    script_happy(openai_llm, composer=[Reply.error(429, "slow down", retry_after=0)])
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == "SUCCESS" and not run.degraded and run.effective_verdict == "PASS"
    assert len(openai_llm.requests_for("composer")) == 2


def test_an_executor_calling_a_tool_outside_the_allow_list_is_blocked_and_falls_back(openai_llm, demo_knowledge, make_run):
    openai_llm.enqueue(Reply.json(PLAN), role="planner")
    openai_llm.enqueue(Reply.tool_calls(("run_shell", {"cmd": "cat /etc/passwd"}, "call_1")), role="executor")
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    blocked = ToolInvocation.objects.get(run=run)
    assert blocked.status == "BLOCKED" and blocked.tool_name == "run_shell" and blocked.result is None
    assert run.degraded and ("executor", "fallback", 1) in route(run)
    assert run.orchestration_trace["transitions"][1]["reason_code"] == "tool_blocked"


def test_invalid_tool_arguments_from_the_model_become_invalid_output(openai_llm, demo_knowledge, make_run):
    openai_llm.enqueue(Reply.json(PLAN), role="planner")
    openai_llm.enqueue(Reply.invalid_tool_args(), role="executor")
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.degraded
    assert run.orchestration_trace["transitions"][1]["reason_code"] == "invalid_output"


def test_a_composer_citing_an_unverified_invocation_is_rejected_and_retried(openai_llm, demo_knowledge, make_run):
    bad = Reply.json({"answer_markdown": "Root cause proven by [inv-deadbeef].", "cited_invocation_ids": ["inv-deadbeef"]})
    script_happy(openai_llm, composer=[bad])
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert "inv-deadbeef" not in run.answer
    assert ("composer", "composer", 1) in route(run) and not run.degraded


def test_a_degraded_answer_has_no_verdict_but_the_trace_keeps_the_verifiers(openai_llm, demo_knowledge, make_run):
    """The verifier said PASS, then every composer attempt failed: the fallback answer is served."""
    bad = Reply.json({"answer_markdown": "free prose is not a plan"})
    script_happy(openai_llm, composer=[bad] * 5)
    openai_llm.always(bad, role="composer")
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == DiagnosisRun.Status.SUCCESS and run.degraded
    assert run.effective_verdict == ""  # served as null by the API
    evaluation = run.self_evaluation["verifier_evaluation"]
    assert evaluation["verifierVerdict"] == "PASS" and evaluation["effective_verdict"] is None
    assert "free prose" not in run.answer


def test_a_huge_statement_is_cut_with_a_marker_and_the_audit_stays_bounded(openai_llm, demo_knowledge, make_run):
    def huge_evidence(request) -> Reply:
        reply = evidence_from_logs(request)
        body = json.loads(reply.content)
        body["summary"] = "S" * 3_000_000
        for claim in body["claims"]:
            claim["statement"] = "payment-service cannot get DB connections " + "x" * 100_000
        return Reply.json(body)

    script_happy(openai_llm)
    openai_llm.always(huge_evidence, role="executor")
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    stored = json.dumps(run.self_evaluation, ensure_ascii=False)
    assert len(stored.encode()) <= SELF_EVALUATION_MAX_BYTES
    assert "…[cut " in stored
    assert "x" * 5000 not in run.answer
