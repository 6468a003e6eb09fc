"""Whole runs against the scripted OpenAI-compatible server: what each role sends on the wire
(its JSON Schema, its max_tokens), a planner that echoes its input, the run's wall budget cutting a
model call short, and the SIMPLE fallback."""
from __future__ import annotations

import json

import pytest

from diagnosis.llm import schemas
from diagnosis.models import AgentStep, DiagnosisRun
from diagnosis.agents.runtime import TOOL_PARAMETERS
from diagnosis.services.execution import run_execute
from diagnosis.tools.registry import EVIDENCE_TOOLS
from tests.diagnosis.conftest import demo_knowledge, fake_openai, make_run, openai_llm  # noqa: F401
from tests.reliability.scripted import HAPPY, ROLES, script_happy
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db

MARGIN_SECONDS = 3.0  # what a run may take beyond DIAGNOSIS_MAX_SECONDS (bookkeeping, the fallback, saving)


@pytest.fixture
def scripted(openai_llm, demo_knowledge):  # noqa: F811
    return openai_llm


def test_every_json_role_sends_its_schema_and_its_max_tokens(scripted, make_run, settings):  # noqa: F811
    settings.LLM_MAX_TOKENS = {**settings.LLM_MAX_TOKENS, "planner": 333, "verifier": 444}
    script_happy(scripted)
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == "SUCCESS" and not run.degraded, run.answer
    by_role = {role: scripted.requests_for(role) for role in ROLES}
    for role, contract in (("planner", schemas.PlannerPlan), ("verifier", schemas.VerifierVerdict),
                           ("composer", schemas.ComposerAnswer)):
        body = by_role[role][0].body
        assert body["response_format"]["json_schema"]["name"] == schemas.schema_name(contract), role
        schema = body["response_format"]["json_schema"]["schema"]
        assert schema == schemas.json_schema(contract, tool_parameters=TOOL_PARAMETERS)
    # A plan step names a tool of the allow-list, with that tool's arguments.
    plan_schema = by_role["planner"][0].body["response_format"]["json_schema"]["schema"]
    variants = plan_schema["$defs"]["PlanStep"]["anyOf"]
    assert [v["properties"]["tool"]["const"] for v in variants] == sorted(EVIDENCE_TOOLS)  # never the ranking hint
    logs = next(v for v in variants if v["properties"]["tool"]["const"] == "query_logs")
    assert logs["properties"]["arguments"]["required"] == ["service"]
    assert logs["properties"]["arguments"]["additionalProperties"] is False
    assert by_role["planner"][0].body["max_tokens"] == 333
    assert by_role["verifier"][0].body["max_tokens"] == 444
    assert by_role["composer"][0].body["max_tokens"] == settings.LLM_MAX_TOKENS["composer"]
    # The executor is offered tools, so it gets no response_format; its tool-call turn goes back with "".
    executor = by_role["executor"]
    assert all("response_format" not in r.body and r.body["tools"] for r in executor)
    assistant = [m for m in executor[1].messages if m["role"] == "assistant"]
    assert assistant and assistant[0]["content"] == "" and assistant[0]["tool_calls"]
    step = AgentStep.objects.filter(run=run, agent="planner").first()
    assert step.model_output["structured_output"] == "json_schema"


@pytest.mark.parametrize("level, sent", [("json_object", {"type": "json_object"}), ("prompt", None)])
# (json_object_schema sends each role's schema inside json_object: tests/llm/test_interop.py)
def test_the_structured_output_setting_reaches_every_json_role(scripted, make_run, settings, level, sent):  # noqa: F811
    settings.LLM_STRUCTURED_OUTPUT = level
    script_happy(scripted)
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == "SUCCESS" and not run.degraded
    for role in ("planner", "verifier", "composer"):
        assert scripted.requests_for(role)[0].body.get("response_format") == sent


def test_a_planner_that_echoes_its_input_is_invalid_output_and_the_run_falls_back(scripted, make_run):  # noqa: F811
    # What a small model does without a schema: it repeats the shape of its input.
    echo = Reply.json({"question": "Why is payment-service failing?", "mode": "NORMAL", "language": "en"})
    script_happy(scripted, planner=echo)
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == "SUCCESS" and run.degraded and "planner:retry_exhausted" in run.answer
    failed = AgentStep.objects.filter(run=run, agent="planner")
    assert failed.count() == 2 and all(s.status == "COMPLETED" for s in failed)  # the call worked; the output did not
    assert scripted.requests_for("executor") == []


def test_a_model_call_that_would_outlive_the_run_budget_is_cut_short(scripted, make_run, settings):  # noqa: F811
    settings.DIAGNOSIS_MAX_SECONDS = 2
    settings.LLM_READ_TIMEOUT = 30.0  # far beyond the run budget: the budget must cut the call
    settings.LLM_MAX_RETRIES = 2
    script_happy(scripted, verifier=Reply.stall(60.0))
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == "SUCCESS" and run.degraded
    assert "budget_exhausted" in run.answer
    budget = run.self_evaluation["rule_evaluation"]["budget"]
    assert "wall-time budget of 2s" in budget["exceeded"]
    assert len(scripted.requests_for("verifier")) == 1  # cut short, never retried past the budget
    assert scripted.requests_for("composer") == []
    cut = AgentStep.objects.get(run=run, agent="verifier")
    assert cut.status == "FAILED" and cut.error.startswith("budget_exhausted")
    assert run.duration_ms <= (2 + MARGIN_SECONDS) * 1000, run.duration_ms
    print(f"\nrun budget 2s, verifier stalls 60s (read timeout 30s): run ended in {run.duration_ms} ms, degraded")


def test_a_simple_chat_with_an_empty_reply_gets_the_fallback_answer(scripted, make_run):  # noqa: F811
    scripted.always(Reply.text(""), role="simple")
    scripted.always(Reply.text(""))
    run = run_execute(run_id=make_run("hello", strategy=DiagnosisRun.Strategy.SIMPLE).run_id)
    assert run.status == "SUCCESS" and run.degraded and not run.error_code
    assert "degraded answer" in run.answer and "model_empty_output" in run.answer
    assert run.self_evaluation["rule_evaluation"]["fallback_used"] is True


def test_a_simple_chat_in_chinese_gets_the_fallback_in_chinese(scripted, make_run):  # noqa: F811
    scripted.always(Reply.error(500, "upstream exploded"))
    run = run_execute(run_id=make_run("你好，请问支付服务怎么了", strategy=DiagnosisRun.Strategy.SIMPLE).run_id)
    assert run.status == "SUCCESS" and run.degraded and "降级答复" in run.answer


def test_a_tool_round_trip_with_null_content_when_configured(scripted, make_run, settings):  # noqa: F811
    settings.LLM_TOOL_CALL_CONTENT = "null"
    script_happy(scripted)
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == "SUCCESS" and not run.degraded
    assistant = [m for m in scripted.requests_for("executor")[1].messages if m["role"] == "assistant"]
    assert assistant[0]["content"] is None
    assert json.loads(HAPPY["planner"].content)["steps"]


def test_an_alert_analysis_sends_each_phase_its_own_schema(scripted, alice, settings):  # noqa: F811
    from diagnosis.services.aiops import aiops_submit
    from tests.aiops.test_openai_model import PAYMENT, phase_payload, script

    settings.LLM_MAX_TOKENS = {**settings.LLM_MAX_TOKENS, "aiops": 777}
    script(scripted)
    run = run_execute(run_id=aiops_submit(user=alice, payload={"alerts": PAYMENT}).run.run_id)
    assert run.status == "SUCCESS"
    names = {}
    for request in scripted.requests_for("aiops"):
        assert request.body["max_tokens"] == 777
        if "response_format" in request.body:
            names.setdefault(phase_payload(request)["phase"], set()).add(
                request.body["response_format"]["json_schema"]["name"])
    assert names["plan"] == {"AiOpsDecision_v1"} and names["report"] == {"AiOpsReport_v1"}
