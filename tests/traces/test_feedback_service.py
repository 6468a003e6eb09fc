"""diagnosis.services.feedback: run_feedback_give and the case it keeps."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from diagnosis.models import CaseLibraryEntry, DiagnosisRun, ToolInvocation
from diagnosis.services.feedback import RunNotFinished, root_cause_summary, run_feedback_give
from tests.traces.conftest import make_run

pytestmark = pytest.mark.django_db

VERIFIED = {"verifier_evaluation": {"verified_executor_output": {"claims": [
    {"claim_id": "c1", "statement": "The DB pool is exhausted.", "evidence": [{"source_invocation_id": "inv-00000001"}]},
    {"claim_id": "c2", "statement": "Latency rose at 10:02.", "evidence": [{"source_invocation_id": "inv-00000002"}]},
]}}}


def test_the_summary_is_made_of_the_verified_claims_when_there_are_any(alice):
    run = make_run(owner=alice, self_evaluation=VERIFIED, answer="# Report\n\nSomething else.")
    assert root_cause_summary(run=run) == "The DB pool is exhausted. Latency rose at 10:02."


def test_the_summary_never_falls_back_to_the_answers_free_text(alice):
    answer = "# Diagnosis\n\nThe pool is full\nbecause of a leak.\n\nSecond paragraph."
    run = make_run(owner=alice, self_evaluation={"verifier_evaluation": {"verified_executor_output": None}},
                   answer=answer)
    assert root_cause_summary(run=run) == ""


def test_the_summary_is_capped_at_500_characters(alice):
    claims = [{"claim_id": f"c{i}", "statement": "word " * 400, "evidence": [{"source_invocation_id": "inv-00000000"}]}
              for i in range(3)]
    run = make_run(owner=alice, self_evaluation={"verifier_evaluation": {"verified_executor_output": {"claims": claims}}})
    summary = root_cause_summary(run=run)
    assert len(summary) == 500 and summary.endswith("…")


def test_the_case_tags_are_the_services_the_tools_queried_once_each(alice):
    run = make_run(owner=alice)
    for i, arguments in enumerate([{"service": "payment"}, {"service": "db"}, {"service": "payment"}, {"q": "x"}, []]):
        ToolInvocation.objects.create(run=run, session_id=run.session.session_id, invocation_id=f"inv-{i:08x}",
                                      tool_name="query_logs", status="SUCCESS", arguments=arguments)
    given = run_feedback_give(user=alice, run=run, feedback="useful", comment="")
    assert given.case.tags == ["payment", "db"]


def test_it_writes_only_the_feedback_columns(alice):
    run = make_run(owner=alice)
    with CaptureQueriesContext(connection) as captured:
        run_feedback_give(user=alice, run=run, feedback="not_useful", comment="")
    updates = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("UPDATE") and "diagnosis_run" in q["sql"]]
    assert len(updates) == 1
    assigned = updates[0].split(" WHERE ")[0]
    assert '"status"' not in assigned and "`status`" not in assigned


def test_it_refuses_a_run_that_is_no_longer_finished_in_the_database_even_if_the_object_says_so(alice):
    run = make_run(owner=alice, status=DiagnosisRun.Status.RUNNING)
    run.status = DiagnosisRun.Status.SUCCESS  # stale object
    with pytest.raises(RunNotFinished) as raised:
        run_feedback_give(user=alice, run=run, feedback="useful", comment="")
    assert raised.value.code == "run_not_finished"
    assert not CaseLibraryEntry.objects.exists()


def test_it_rejects_an_unknown_feedback_value(alice):
    run = make_run(owner=alice)
    with pytest.raises(ValueError):
        run_feedback_give(user=alice, run=run, feedback="meh", comment="")


def test_it_rejects_a_comment_over_the_limit(alice):
    run = make_run(owner=alice)
    with pytest.raises(ValueError):
        run_feedback_give(user=alice, run=run, feedback="useful", comment="x" * 2001)
    run.refresh_from_db()
    assert run.feedback is None


def test_retrieval_returns_only_published_cases_and_only_their_verified_claims(alice, support_staff):
    from diagnosis.services.feedback import case_publish
    from diagnosis.services.wiring import KnowledgeSearch

    def rated(statement: str, question: str):
        claim = {"claim_id": "c1", "statement": statement,
                 "evidence": [{"source_invocation_id": "inv-00000001", "tool_name": "query_logs",
                               "raw_path": "$.records[0].message", "evidence_excerpt": "zebrapool exhausted at noon"}]}
        run = make_run(owner=alice, question=question, answer=f"{question} ANSWERTOKEN",
                       self_evaluation={"verifier_evaluation": {"verified_executor_output": {"claims": [claim]}}})
        return run_feedback_give(user=alice, run=run, feedback="useful", comment="").case

    candidate = rated("zebrapool candidate claim", "QUESTIONTOKEN1 zebrapool")
    published = rated("zebrapool published claim", "QUESTIONTOKEN2 zebrapool")
    case_publish(user=support_staff, case=published)
    results = KnowledgeSearch().search(query="zebrapool exhausted", top_k=10, exclude_chunk_ids=set())
    cases = [r for r in results if r["source_type"] == "case"]
    assert [r["source_id"] for r in cases] == [published.case_id]  # never the run it came from
    text = " ".join(f"{r['title']} {r['content']}" for r in cases)
    assert "zebrapool published claim" in text and "zebrapool exhausted at noon" in text
    assert "QUESTIONTOKEN" not in text and "ANSWERTOKEN" not in text and candidate.source_run_id not in text
