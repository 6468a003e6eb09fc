"""Whole runs against a REAL local model server: llama.cpp (llama-cpp-python) serving Gemma 3 270M,
reached through the real `openai` client with json_schema structured outputs.

A 270M model is not expected to diagnose anything. These tests assert protocol-level truths that
any model must leave intact: every run ends terminal; every planner and verifier output that came
back is valid against its schema; at least one tool round trip (call, result, next turn) succeeds;
nothing unverified reaches an answer; the wall budget holds. Then one scenario (or more) with the
`rank_root_causes` hint on and off, scored strictly, printed side by side (docs/MODELS.md).

Marked `real_model`: they run with `make test-real-model` (AIOPS_REAL_MODEL=1), which builds the
server's cached virtualenv on first use (scripts/real_model_env.sh), and are skipped otherwise.
"""
from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from diagnosis.evaluation.compare import side_by_side
from diagnosis.evaluation.scenarios import EVAL_USER, evaluate_scenario, summary
from diagnosis.llm import schemas
from diagnosis.llm.base import parse_json_object
from diagnosis.llm.openai_model import SCHEMA_LEVELS
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from diagnosis.services.aiops import aiops_submit
from diagnosis.services.execution import run_execute
from tests.aiops.conftest import scenario_alerts
from tests.diagnosis.conftest import demo_knowledge, make_run  # noqa: F401
from tests.support.real_model import MODEL_ALIAS

pytestmark = [pytest.mark.real_model, pytest.mark.django_db, pytest.mark.timeout(1800)]


MAX_SECONDS = int(os.environ.get("AIOPS_REAL_MODEL_MAX_SECONDS", "150"))  # DIAGNOSIS_MAX_SECONDS for these runs
MARGIN_SECONDS = 5  # what a run may take beyond it (the fallback, the trace, saving)
INV_RE = re.compile(r"\binv-[0-9a-f]{8}\b")
OBSERVED: list[dict] = []
QUESTIONS = {
    "chat_en": ("Why is payment-service failing?", DiagnosisRun.Strategy.DIAGNOSIS),
    "chat_zh": ("为什么 payment-service 一直报错？", DiagnosisRun.Strategy.DIAGNOSIS),
    "simple": ("Hello! What can you help me with?", DiagnosisRun.Strategy.SIMPLE),
}


@pytest.fixture
def real_llm(settings, real_model_server):
    settings.LLM_PROVIDER = "openai"
    settings.OPENAI_BASE_URL = real_model_server
    settings.OPENAI_API_KEY = "x"  # a placeholder key, as local servers use: never masked inside words
    settings.OPENAI_MODEL = MODEL_ALIAS
    settings.OPENAI_MODELS = {role: MODEL_ALIAS for role in settings.OPENAI_MODELS}
    settings.LLM_STRUCTURED_OUTPUT = "json_schema"
    settings.LLM_READ_TIMEOUT = 120.0
    settings.LLM_MAX_RETRIES = 1
    settings.DIAGNOSIS_MAX_SECONDS = MAX_SECONDS
    settings.DIAGNOSIS_MAX_TOOL_CALLS = 3
    settings.LLM_MAX_TOKENS = {"planner": 512, "executor": 256, "verifier": 512, "composer": 384,
                               "simple": 96, "aiops": 384}
    return real_model_server


def observe(run: DiagnosisRun) -> dict:
    """What the summary needs of a run, kept as plain data (each test's database rows are rolled back)."""
    steps = list(AgentStep.objects.filter(run=run).order_by("step_index"))
    round_trips = sum(
        1 for first, second in zip(steps, steps[1:])
        if first.has_tool_call and first.status == "COMPLETED" and second.node == first.node
        and second.status == "COMPLETED" and first.tool_invocations.filter(status="SUCCESS").exists())
    planner = [s for s in steps if s.agent == "planner" or s.node == "aiops_planner"]
    return {"flow": run.agent_flow, "status": run.status, "degraded": run.degraded, "duration_ms": run.duration_ms,
            "round_trips": round_trips, "reached_executor": any(s.node in ("executor", "aiops_executor") for s in steps),
            "planner_calls": len(planner),
            "planner_valid": sum(1 for s in planner if s.status == "COMPLETED" and _valid(s))}


def assert_protocol_truths(run: DiagnosisRun) -> None:
    run.refresh_from_db()
    OBSERVED.append(observe(run))
    assert run.status in DiagnosisRun.TERMINAL, run.status
    assert not AgentStep.objects.filter(run=run, status="RUNNING").exists()
    if run.status == DiagnosisRun.Status.SUCCESS:
        assert run.answer.strip()
    # Nothing unverified reaches an answer: every cited id is a verified piece of evidence of this run.
    verified = {e.get("source_invocation_id") for e in
                ((run.self_evaluation or {}).get("verifier_evaluation") or {}).get("verified_evidence") or []}
    succeeded = set(ToolInvocation.objects.filter(run=run, status="SUCCESS").values_list("invocation_id", flat=True))
    cited = set(INV_RE.findall(run.answer or ""))
    assert cited <= succeeded, (cited, succeeded)
    if run.agent_flow != DiagnosisRun.Flow.AI_OPS:
        assert cited <= verified, (cited, verified)
    # The wall budget holds.
    assert run.duration_ms is not None and run.duration_ms <= (MAX_SECONDS + MARGIN_SECONDS) * 1000, run.duration_ms
    # Every planner / verifier output that came back matches its schema (the server enforced it).
    for step in AgentStep.objects.filter(run=run, agent__in=("planner", "verifier"), status="COMPLETED"):
        content = (step.model_output or {}).get("content")
        contract = schemas.output_model(step.agent)
        assert schemas.is_valid(contract, parse_json_object(content)), (step.agent, content)
        # llama-cpp-python rejects the OpenAI json_schema form: the client moved to its json_object + schema form.
        assert step.model_output["structured_output"] in SCHEMA_LEVELS, step.model_output


@pytest.mark.parametrize("case", list(QUESTIONS))
def test_a_run_on_the_real_model_keeps_the_protocol(real_llm, demo_knowledge, make_run, case):  # noqa: F811
    question, strategy = QUESTIONS[case]
    run = run_execute(run_id=make_run(question, strategy=strategy).run_id)
    assert_protocol_truths(run)
    print(f"\nreal model, {case}: {run.status} degraded={run.degraded} in {run.duration_ms} ms, "
          f"steps {run.step_count}, tools {run.tool_count}; answer: {run.answer[:160]!r}")


def test_an_alert_analysis_on_the_real_model_keeps_the_protocol(real_llm, demo_knowledge, alice):  # noqa: F811
    submission = aiops_submit(user=alice, payload={"alerts": scenario_alerts("payment-db-pool-exhaustion")})
    run = run_execute(run_id=submission.run.run_id)
    assert_protocol_truths(run)
    assert run.status == DiagnosisRun.Status.SUCCESS and "|" in run.answer  # the alert table is always there
    for step in AgentStep.objects.filter(run=run, node="aiops_planner", status="COMPLETED"):
        assert _valid(step), step.model_output
    print(f"\nreal model, ai_ops: {run.status} degraded={run.degraded} in {run.duration_ms} ms, "
          f"steps {run.step_count}, tools {run.tool_count}")


def test_at_least_one_tool_round_trip_succeeded_on_the_real_model():
    """Across the runs above: a tool call was executed and the model's next turn came back."""
    assert OBSERVED, "run the whole module: this test reads what the runs above observed"
    latencies = sorted(o["duration_ms"] for o in OBSERVED)
    print(f"\nreal model summary: {len(OBSERVED)} runs, planner schema-valid "
          f"{sum(o['planner_valid'] for o in OBSERVED)}/{sum(o['planner_calls'] for o in OBSERVED)}, "
          f"runs reaching the executor {sum(o['reached_executor'] for o in OBSERVED)}, "
          f"tool round trips {sum(o['round_trips'] for o in OBSERVED)}, "
          f"median {statistics.median(latencies)} ms, max {latencies[-1]} ms")
    assert sum(o["round_trips"] for o in OBSERVED) >= 1, OBSERVED


def _valid(step) -> bool:
    contract = schemas.output_model(step.agent, step.node)
    try:
        return contract is not None and schemas.is_valid(contract, json.loads((step.model_output or {}).get("content") or ""))
    except ValueError:
        return False


# --- the ranking hint, on and off, side by side ------------------------------------------------------
# Scored strictly from the structured diagnosis (diagnosis/evaluation/scenarios.py), on the same scenarios
# with LLM_RANKING_HINT on and off. AIOPS_REAL_MODEL_HINT_SCENARIOS (comma-separated) widens the set.
HINT_SCENARIOS = [s for s in os.environ.get("AIOPS_REAL_MODEL_HINT_SCENARIOS", "payment-db-pool-exhaustion").split(",") if s]
HINT_SCORES: dict[str, list] = {"on": [], "off": []}


@pytest.mark.parametrize("scenario", HINT_SCENARIOS)
@pytest.mark.parametrize("hint", ["on", "off"])
def test_a_scenario_on_the_real_model_with_and_without_the_ranking_hint(real_llm, settings, hint, scenario):
    settings.LLM_RANKING_HINT = hint == "on"
    user, _ = get_user_model().objects.get_or_create(username=EVAL_USER)
    score = evaluate_scenario(folder=Path(settings.DEMO_SCENARIOS_DIR) / scenario, language="en", user=user)
    run = DiagnosisRun.objects.get(run_id=score.run_id)
    assert_protocol_truths(run)
    ranking = ToolInvocation.objects.filter(run=run, tool_name="rank_root_causes")
    if hint == "off":
        assert not ranking.filter(status="SUCCESS").exists()  # never run when it is not offered
    # The hint is never evidence: no verified citation names it.
    verified = ((run.self_evaluation or {}).get("verifier_evaluation") or {}).get("verified_evidence") or []
    assert not [e for e in verified if e.get("tool_name") == "rank_root_causes"], verified
    HINT_SCORES[hint].append(score)
    print(f"\nreal model, {scenario} hint {hint}: {score.verdict}, root cause hit {score.root_cause_hit}, "
          f"false confidence {score.false_confidence}, ranking calls {score.ranking_calls}, {score.latency_ms} ms; "
          f"tools {list(run.tool_invocations.order_by('seq').values_list('tool_name', 'status'))}")


def test_the_ranking_hint_results_side_by_side():
    """The strict scores with and without the hint, as docs/MODELS.md reports them."""
    assert HINT_SCORES["on"] and HINT_SCORES["off"], "run the whole module: this test reads the runs above"
    assert len(HINT_SCORES["on"]) == len(HINT_SCORES["off"])
    print("\nreal model, ranking hint on and off (strict scores from the structured diagnosis):\n"
          + side_by_side({"hint on": summary(HINT_SCORES["on"]), "hint off": summary(HINT_SCORES["off"])}))
