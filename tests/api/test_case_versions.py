"""Cases are what a reader was shown, leave retrieval the moment they are withdrawn, and a replay says which
case versions it used and which of them are withdrawn since."""

from __future__ import annotations

import pytest

from diagnosis.models import CaseLibraryEntry, DiagnosisRun, ToolInvocation
from diagnosis.services.execution import run_execute
from diagnosis.services.feedback import case_publish, run_feedback_give
from diagnosis.services.replay import ReplayOptions, replay_submit
from diagnosis.services.wiring import KnowledgeSearch
from tests.security.test_lying_model import PLAN, QUESTION, Script, evidence, genuine_binding, honest_claim, play
from tests.support.fake_openai import Reply, answer_plan
from tests.diagnosis.conftest import user_payload
from traces.diff import run_facts, runs_diff

pytestmark = pytest.mark.django_db

HIDDEN = "HIDDENSTATEMENT42"


@pytest.fixture
def staff(support_user):
    from django.contrib.auth.models import Group

    support_user.groups.add(Group.objects.get_or_create(name="support_staff")[0])
    return support_user


def _case_search(query="payment-service cannot get database connections"):
    return [r for r in KnowledgeSearch().search(query=query, top_k=10, exclude_chunk_ids=set())
            if r["source_type"] == "case"]


def test_a_case_holds_only_the_claims_the_reader_was_shown(openai_llm, demo_knowledge, make_run, alice):
    """A verified claim the verifier found unsupported is not shown, so it is not kept; the statement kept
    is the one shown (capped as the answer caps it)."""
    def executor(r):
        hidden = {"claim_id": "c2", "statement": f"payment-service {HIDDEN} exhausted.", "evidence": [genuine_binding(r)]}
        long = {"claim_id": "c3", "statement": "payment-service pool exhausted " + "z" * 600 + " TAILTOKEN",
                "evidence": [genuine_binding(r)]}
        return evidence(honest_claim(r), hidden, long)

    verifier = Reply.json({"verdict": "PASS", "score": 0.9, "critical_evidence_gaps": [],
                           "claim_checks": [{"claim_id": "c2", "supported": False, "rationale": "no"}]})
    play(openai_llm, Script(executor=executor, verifier=verifier))
    run = run_execute(run_id=make_run(QUESTION, owner=alice).run_id)
    run.refresh_from_db()
    assert HIDDEN not in run.answer
    case = run_feedback_give(user=alice, run=run, feedback="useful").case
    kept = {c["claim_id"]: c["statement"] for c in case.claims}
    assert "c1" in kept and "c2" not in kept
    assert "TAILTOKEN" not in kept["c3"] and kept["c3"].startswith("payment-service pool exhausted zzz")
    assert len(kept["c3"]) < 450  # as shown: capped at 400 characters and a cut marker


def test_withdrawing_a_case_takes_it_out_of_retrieval_at_once(openai_llm, demo_knowledge, make_run, alice, staff):
    play(openai_llm, Script())
    run = run_execute(run_id=make_run(QUESTION, owner=alice).run_id)
    case = run_feedback_give(user=alice, run=run, feedback="useful").case
    case_publish(user=staff, case=case)
    found = _case_search()
    assert [r["case_id"] for r in found] == [case.case_id] and run.run_id not in str(found)
    case_publish(user=staff, case=case, publish=False)
    assert _case_search() == []
    case.refresh_from_db()
    assert case.withdrawn_at is not None and case.status == CaseLibraryEntry.Status.CANDIDATE


def test_a_replay_records_its_case_versions_and_shows_a_withdrawn_one(
        openai_llm, demo_knowledge, make_run, alice, bob, staff, eager_tasks):
    # A published case of alice's run ...
    play(openai_llm, Script())
    source = run_execute(run_id=make_run(QUESTION, owner=alice).run_id)
    case = case_publish(user=staff, case=run_feedback_give(user=alice, run=source, feedback="useful").case)

    # ... retrieved by bob's run, which records the version it used.
    openai_llm.reset()
    openai_llm.always(Reply.json(PLAN), role="planner")
    lookup = ("lookup_knowledge", {"query": "payment-service cannot get database connections", "top_k": 5}, "k1")
    logs = ("query_logs", {"service": "payment-service", "query": "level:ERROR"}, "l1")
    openai_llm.always(lambda r: Reply.tool_calls(lookup, logs) if not r.tool_results
                      else Reply.json({"version": "executor_evidence_v2", "summary": "s", "open_questions": [],
                                       "claims": [honest_claim(r)]}), role="executor")
    openai_llm.always(Reply.json({"verdict": "PASS", "score": 0.9, "claim_checks": []}), role="verifier")
    openai_llm.always(lambda r: Reply.json(answer_plan(user_payload(r))), role="composer")
    used = run_execute(run_id=make_run(QUESTION, owner=bob).run_id)
    details = ToolInvocation.objects.get(run=used, tool_name="lookup_knowledge").retrieval_details
    assert {"caseId": case.case_id, "version": case.version, "status": "published"} in details["cases"]

    # Withdrawn, then the run is replayed: the case does not reach the replay, and the diff says withdrawn.
    case_publish(user=staff, case=case, publish=False)
    replay = run_execute(run_id=replay_submit(user=bob, run_id=used.run_id, options=ReplayOptions()).run_id)
    replay.refresh_from_db()
    assert replay.status == DiagnosisRun.Status.SUCCESS, (replay.error_code, replay.error_message)
    served = ToolInvocation.objects.get(run=replay, tool_name="lookup_knowledge")
    cases = [r for r in served.result["results"] if r["source_type"] == "case"]
    assert cases and all(r["content"] == "" and r["case_status"] == "withdrawn" for r in cases)
    assert {"caseId": case.case_id, "version": case.version, "status": "withdrawn"} in served.retrieval_details["cases"]
    facts = [run_facts(r, list(ToolInvocation.objects.filter(run=r).order_by("id"))) for r in (used, replay)]
    cases_row = next(d for d in runs_diff(*facts).lists if d.label == "cases used")
    assert cases_row.changed
    assert (f"{case.case_id} v{case.version} (withdrawn)", "added") in cases_row.right
