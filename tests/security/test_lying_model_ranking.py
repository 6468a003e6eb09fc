"""A lying model cannot pass a claim that cites only `rank_root_causes`: the ranking is a hint, never evidence.

Through the real run path (the scripted OpenAI-compatible server plays every role): the executor calls the
evidence tools, then the ranking, and its only claim cites the ranking's recorded output verbatim (the
excerpt really is at the cited path of that invocation). The Gatekeeper refuses the citation
(`ranking_not_evidence`, in the audit like every refusal), the claim is not admitted and the run is not
PASS on it; the claim's words reach no reader. The control: the same model following the ranking to the
raw record it names, and citing that, passes.
"""

from __future__ import annotations

import pytest

from diagnosis.evaluation.scenarios import protocol_health
from diagnosis.jsonpath import parse, resolve_segments
from diagnosis.models import DiagnosisRun, ToolInvocation
from diagnosis.services.execution import run_execute
from tests.diagnosis.conftest import tool_outputs, user_payload
from tests.security.test_lying_model import PLAN, QUESTION, api_answer, assert_nowhere, evidence, reader_facing
from tests.support.fake_openai import Reply, answer_plan

pytestmark = pytest.mark.django_db

SERVICE = {"service": "payment-service"}
TOKEN = "RANKTOKEN42"


def ranking_of(request) -> dict:
    return next(o for o in tool_outputs(request) if o["tool"] == "rank_root_causes")


def cites_the_ranking(request) -> Reply:
    """The lie: the ranking's own words, quoted exactly where they are in its recorded output."""
    ranking = ranking_of(request)
    top = ranking["result"]["candidates"][0]
    return evidence({"claim_id": "lie", "statement": f"{top['service']} is the root cause ({TOKEN}).",
                     "evidence": [{"source_invocation_id": ranking["invocation_id"], "tool_name": "rank_root_causes",
                                   "raw_path": "$.candidates[0].kind", "evidence_excerpt": top["kind"]},
                                  {"source_invocation_id": ranking["invocation_id"], "tool_name": "rank_root_causes",
                                   "raw_path": "$.candidates[0].evidence[0].rawPath",
                                   "evidence_excerpt": top["evidence"][0]["rawPath"]}]})


def cites_the_record_it_names(request) -> Reply:
    """The honest use: follow a reference of the top candidate to the raw record and quote that."""
    outputs = {o["invocation_id"]: o for o in tool_outputs(request)}
    for ref in ranking_of(request)["result"]["candidates"][0]["evidence"]:
        value = resolve_segments(outputs[ref["invocationId"]]["result"], parse(ref["rawPath"]))
        if isinstance(value, str) and len(value) >= 12:
            return evidence({"claim_id": "c1", "statement": f"payment-service shows it ({TOKEN}).",
                             "evidence": [{"source_invocation_id": ref["invocationId"], "tool_name": ref["tool"],
                                           "raw_path": ref["rawPath"], "evidence_excerpt": value}]})
    raise AssertionError("the ranking names no record with text")


def play(fake, executor) -> None:
    fake.always(Reply.json(PLAN), role="planner")
    fake.enqueue(Reply.tool_calls(("query_logs", SERVICE, "call_1"), ("query_metrics", SERVICE, "call_2")),
                 Reply.tool_calls(("rank_root_causes", SERVICE, "call_3")), role="executor")
    fake.always(executor, role="executor")
    fake.always(Reply.json({"verdict": "PASS", "score": 0.9, "claim_checks": [], "critical_evidence_gaps": []}),
                role="verifier")
    fake.always(lambda r: Reply.json(answer_plan(user_payload(r))), role="composer")


def audit(run: DiagnosisRun) -> dict:
    return run.self_evaluation["verifier_evaluation"]["gatekeeper_audit"]


def test_a_claim_citing_only_the_ranking_is_refused_and_the_run_is_not_pass_on_it(openai_llm, demo_knowledge, make_run):
    play(openai_llm, cites_the_ranking)
    run = run_execute(run_id=make_run(QUESTION).run_id)
    run.refresh_from_db()
    ranking = ToolInvocation.objects.get(run=run, tool_name="rank_root_causes")
    assert ranking.status == "SUCCESS" and ranking.result["candidates"], ranking.result
    # The lie quoted the ranking exactly: each excerpt is the value at its path in the recorded output.
    lies = [b for c in audit(run)["audit"] if c["claim_id"] == "lie" for b in c["bindings"]]
    assert len(lies) == 2
    for b in lies:
        assert b["source_invocation_id"] == ranking.invocation_id
        assert resolve_segments(ranking.result, parse(b["raw_path"])) == b["evidence_excerpt"]
        assert b["verified"] is False and b["reason_code"] == "ranking_not_evidence"
    (claim,) = audit(run)["audit"]
    assert claim["verified"] is False and claim["reason_code"] == "no_verified_binding"
    assert audit(run)["verdict"] != "PASS" and run.effective_verdict != "PASS"
    assert_nowhere(TOKEN, run)


def test_control_the_same_model_citing_the_raw_record_the_ranking_names_passes(openai_llm, demo_knowledge, make_run):
    play(openai_llm, cites_the_record_it_names)
    run = run_execute(run_id=make_run(QUESTION).run_id)
    run.refresh_from_db()
    (claim,) = audit(run)["audit"]
    assert claim["verified"] is True and claim["bindings"][0]["tool_name"] in ("query_logs", "query_metrics")
    assert audit(run)["verdict"] == "PASS" and run.effective_verdict == "PASS"
    assert TOKEN in api_answer(run) and TOKEN in reader_facing(run)
    assert protocol_health(run)["ranking_calls"] == 1  # what the evaluation counts per run


def test_switched_off_the_executor_is_not_offered_the_ranking(openai_llm, demo_knowledge, make_run, settings):
    settings.LLM_RANKING_HINT = False
    play(openai_llm, cites_the_ranking)
    run = run_execute(run_id=make_run(QUESTION).run_id)
    offered = [set(r.tool_names) for r in openai_llm.requests_for("executor") if r.tools]
    assert offered and all("rank_root_causes" not in names and "query_logs" in names for names in offered)
    # Called anyway, it is recorded BLOCKED and never run.
    assert list(ToolInvocation.objects.filter(run=run, tool_name="rank_root_causes").values_list("status", flat=True)) == ["BLOCKED"]


def test_switched_on_the_executor_is_offered_the_ranking_and_the_planner_is_not(openai_llm, demo_knowledge, make_run):
    play(openai_llm, cites_the_record_it_names)
    run_execute(run_id=make_run(QUESTION).run_id)
    assert "rank_root_causes" in openai_llm.requests_for("executor")[0].tool_names
    planner = user_payload(openai_llm.requests_for("planner")[0])
    assert "rank_root_causes" not in planner["allowed_tools"] and "query_logs" in planner["allowed_tools"]
