"""query_traces and query_changes end to end: offered to an OpenAI-compatible model like every tool, recorded as
tool invocations, cited through the Gatekeeper, and answered from the recording when the run is replayed."""

from __future__ import annotations

import pytest

from diagnosis.ids import new_session_id
from diagnosis.models import ChatSession, DiagnosisRun, ToolInvocation
from diagnosis.services import wiring
from diagnosis.services.execution import run_execute
from diagnosis.services.replay import ReplayOptions, replay_submit
from diagnosis.tools.backends.demo import DemoBackend
from diagnosis.tools.recorded import RECORDED
from tests.diagnosis.conftest import tool_outputs
from tests.reliability.scripted import script_happy
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db(transaction=True)

TRACES_ARGS = {"service": "user-service", "status": "error", "limit": 5}
CHANGES_ARGS = {"service": "carrier-rates-service"}


def executor(request) -> Reply:
    """Ask for traces and changes, then cite an edge and a change exactly as they came back."""
    if not request.tool_results:
        return Reply.tool_calls(("query_traces", TRACES_ARGS, "call_1"), ("query_changes", CHANGES_ARGS, "call_2"))
    outputs = {o["tool"]: o for o in tool_outputs(request)}
    traces, changes = outputs["query_traces"], outputs["query_changes"]
    edge = traces["result"]["edges"][0]["description"]
    change = changes["result"]["changes"][0]["description"]
    return Reply.json({"version": "executor_evidence_v2", "summary": "profile-db calls time out", "open_questions": [],
                       "claims": [
                           {"claim_id": "c1", "statement": "user-service calls to profile-db fail",
                            "evidence": [{"source_invocation_id": traces["invocation_id"], "tool_name": "query_traces",
                                          "raw_path": "$.edges[0].description", "evidence_excerpt": edge}]},
                           {"claim_id": "c2", "statement": "carrier-rates-service was rolled out",
                            "evidence": [{"source_invocation_id": changes["invocation_id"], "tool_name": "query_changes",
                                          "raw_path": "$.changes[0].description", "evidence_excerpt": change}]}]})


def test_both_tools_are_offered_recorded_cited_and_replayed(alice, openai_llm, demo_knowledge, eager_tasks,
                                                            django_capture_on_commit_callbacks):
    script_happy(openai_llm, executor=executor)
    world = DemoBackend.shipped(["user-slow-downstream", "shipping-misleading-errors"])
    session = ChatSession.objects.create(session_id=new_session_id(), owner=alice)
    run = DiagnosisRun.objects.create(session=session, question="Why is user-service so slow?")
    with wiring.telemetry_override(world):
        run_execute(run_id=run.run_id)
    run.refresh_from_db()
    assert run.status == "SUCCESS" and not run.degraded, run.answer

    offered = {t["function"]["name"]: t["function"] for t in openai_llm.requests_for("executor")[0].tools}
    assert offered["query_traces"]["parameters"]["properties"]["status"]["enum"] == ["any", "error"]
    assert offered["query_changes"]["parameters"]["properties"]["kind"]["enum"] == [
        "rollout", "config", "secret", "helm", "argocd"]

    rows = {i.tool_name: i for i in ToolInvocation.objects.filter(run=run)}
    assert rows["query_traces"].status == rows["query_changes"].status == "SUCCESS"
    assert rows["query_traces"].arguments == TRACES_ARGS
    assert rows["query_traces"].result["request"]["service"] == "user-service"
    assert rows["query_traces"].result["edges"][0]["callee"] == "profile-db"
    assert rows["query_changes"].result["changes"][0]["kind"] == "rollout"
    audit = run.self_evaluation["verifier_evaluation"]["gatekeeper_audit"]["audit"]
    assert [c["verified"] for c in audit] == [True, True], audit
    assert "profile-db" in run.answer and "carrier-rates-service" in run.answer

    with django_capture_on_commit_callbacks(execute=True):
        again = replay_submit(user=alice, run_id=run.run_id, options=ReplayOptions())
    again.refresh_from_db()
    assert again.status == "SUCCESS" and not again.degraded, again.answer
    copies = {i.tool_name: i for i in again.tool_invocations.all()}
    for name in ("query_traces", "query_changes"):
        assert copies[name].replay_mode == RECORDED
        assert copies[name].result == rows[name].result and copies[name].source_invocation_id == rows[name].pk
