"""Regression sets and `manage.py regress`: a faithful replay passes, a worse model is a regression,
a tool call outside the recording is refused and the run still ends honestly."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from diagnosis.models import DiagnosisRun, RegressionSet, RunReview
from diagnosis.services.regression import RegressionSetError, regression_set_build
from diagnosis.services.replay import ReplayOptions, replay_submit
from tests.diagnosis.conftest import tool_outputs, user_payload
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff(support_user):
    support_user.groups.add(Group.objects.get_or_create(name="support_staff")[0])
    return support_user


def rate_useful(run, user):
    DiagnosisRun.objects.filter(pk=run.pk).update(feedback="useful", feedback_by=user)


def test_a_set_holds_the_runs_support_staff_rated_useful_and_the_listed_and_reviewed_ones(alice, staff, recorded):
    by_staff, by_owner, reviewed, listed = (recorded(n) for n in (
        "payment-db-pool-exhaustion", "inventory-disk-full", "order-memory-leak-oom", "user-slow-downstream"))
    rate_useful(by_staff, staff)
    rate_useful(by_owner, alice)  # the owner's own rating is not a support judgement
    RunReview.objects.create(run=reviewed, trigger="manual", status="resolved", resolution="answer_ok")
    built = regression_set_build(name="gold", useful=True)
    assert list(built.runs.values_list("run_id", flat=True)) == [by_staff.run_id]
    built = regression_set_build(name="gold", useful=True, reviewed=True, run_ids=[listed.run_id])
    assert set(built.runs.values_list("run_id", flat=True)) == {by_staff.run_id, reviewed.run_id, listed.run_id}
    assert RegressionSet.objects.count() == 1 and built.filters["reviewed"] is True
    with pytest.raises(RegressionSetError):
        regression_set_build(name="empty")
    with pytest.raises(RegressionSetError, match="run-0"):
        regression_set_build(name="bad", run_ids=["run-" + "0" * 32])


def test_regress_with_the_same_offline_model_reports_no_regression(staff, recorded, eager_tasks, tmp_path, capsys):
    runs = [recorded(n) for n in ("payment-db-pool-exhaustion", "catalog-healthy")]
    for run in runs:
        rate_useful(run, staff)
    call_command("regression_set", "gold", "--useful")
    call_command("regress", "gold", "--model", "offline", "--prompt-version", "current", "--out", str(tmp_path))
    report = json.loads((tmp_path / "regression.json").read_text())
    summary = report["summary"]
    assert summary["runs"] == 2 and report["breaches"] == []
    assert summary["rootCauseAgreement"] == 1.0 and summary["verdictDrops"] == 0
    assert summary["claimsLost"] == summary["claimsAdded"] == summary["unsupportedClaims"] == 0
    assert summary["claimsVerified"] > 0 and summary["failedReplays"] == 0
    assert {r["runId"] for r in report["runs"]} == {r.run_id for r in runs}
    assert "**OK**" in (tmp_path / "regression.md").read_text()
    assert "root-cause agreement 1.0" in capsys.readouterr().out


def worse_model(fake, source):
    """Calls one tool the recorded run called, cites one real log line and never names a root cause."""
    recorded_call = source.tool_invocations.filter(tool_name="query_logs", status="SUCCESS").order_by("id").first()
    fake.always(Reply.json({"version": "planner_plan_v1", "goal": "look at the logs", "services": [],
                            "steps": [{"tool": "query_logs", "arguments": recorded_call.arguments}]}), role="planner")
    fake.enqueue(Reply.tool_calls(("query_logs", recorded_call.arguments, "call_1")), role="executor")

    def evidence(request):
        claims = []
        for out in tool_outputs(request):
            if out["result"] and out["result"].get("records"):
                message = out["result"]["records"][-1]["message"]
                claims.append({"claim_id": "c1", "statement": "The service wrote log lines.",
                               "evidence": [{"source_invocation_id": out["invocation_id"], "tool_name": "query_logs",
                                             "raw_path": f"$.records[{len(out['result']['records']) - 1}].message",
                                             "evidence_excerpt": message[:60]}]})
                break
        return Reply.json({"version": "executor_evidence_v2", "summary": "logs", "claims": claims, "open_questions": []})

    fake.always(evidence, role="executor")
    fake.always(Reply.json({"verdict": "LOW_CONFID", "score": 0.4, "claim_checks": [], "critical_evidence_gaps": []}),
                role="verifier")

    def compose(request):
        ids = sorted({e["source_invocation_id"] for e in user_payload(request)["verified_evidence"]})
        return Reply.json({"answer_markdown": f"The service wrote log lines [{ids[0]}].", "cited_invocation_ids": ids})

    fake.always(compose, role="composer")


def test_a_model_that_drops_the_root_cause_claim_is_a_regression_and_regress_fails(
        staff, recorded, openai_llm, eager_tasks, tmp_path, settings):
    settings.LLM_PROVIDER = "offline"  # the recorded run: the offline analyser
    source = recorded("payment-db-pool-exhaustion")
    assert any(c.startswith("Root cause") for c in _verified(source))
    rate_useful(source, staff)
    call_command("regression_set", "gold", "--useful")
    worse_model(openai_llm, source)
    with pytest.raises(CommandError, match="regression beyond thresholds") as failure:
        call_command("regress", "gold", "--model", "fake-worse", "--out", str(tmp_path))
    report = json.loads((tmp_path / "regression.json").read_text())
    row = report["runs"][0]
    assert row["status"] == "SUCCESS" and row["rootCauseAgree"] is False
    assert any(c.startswith("Root cause") for c in row["claims"]["lostClaims"])
    assert row["verdict"]["dropped"] is True and row["unsupportedClaims"] == 0
    assert "lost claims" in str(failure.value) and "root-cause disagreements: 1 > 0" in str(failure.value)
    assert {r.model for r in openai_llm.requests} == {"fake-worse"}
    assert "REGRESSION" in (tmp_path / "regression.md").read_text()
    # The same report passes when the thresholds allow what this model lost.
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-worse": {"prompt": 2.0, "completion": 8.0}, "*": {"prompt": 0, "completion": 0}}))
    call_command("regress", "gold", "--model", "fake-worse", "--out", str(tmp_path / "lenient"), "--prices", str(prices),
                 "--max-verdict-drops", "1", "--max-lost-claims", "99", "--max-root-cause-disagreements", "1")
    lenient = json.loads((tmp_path / "lenient" / "regression.json").read_text())
    assert lenient["breaches"] == []
    replay = DiagnosisRun.objects.get(run_id=lenient["runs"][0]["replayRunId"])
    assert replay.prompt_tokens > 0
    expected = round((replay.prompt_tokens * 2.0 + replay.completion_tokens * 8.0) / 1e6, 6)
    assert lenient["summary"]["costUsd"]["replay"] == lenient["runs"][0]["costUsd"]["replay"] == expected


def _verified(run) -> list[str]:
    audit = run.self_evaluation["verifier_evaluation"]["gatekeeper_audit"]["audit"]
    return [c["statement"] for c in audit if c["verified"]]


def test_a_tool_call_with_new_arguments_gets_not_in_recording_and_the_run_ends_honestly(
        alice, recorded, openai_llm, eager_tasks, settings, django_capture_on_commit_callbacks):
    settings.LLM_PROVIDER = "offline"
    source = recorded("payment-db-pool-exhaustion")
    new_args = {"service": "payment-service", "query": "a question nobody asked at the time"}
    openai_llm.always(Reply.json({"version": "planner_plan_v1", "goal": "x", "services": [],
                                  "steps": [{"tool": "query_logs", "arguments": new_args}]}), role="planner")
    openai_llm.enqueue(Reply.tool_calls(("query_logs", new_args, "call_1")), role="executor")
    openai_llm.always(Reply.json({"version": "executor_evidence_v2", "summary": "no data", "claims": [],
                                  "open_questions": ["the logs were not available"]}), role="executor")
    openai_llm.always(Reply.json({"verdict": "PASS", "score": 0.9, "claim_checks": [], "critical_evidence_gaps": []}),
                      role="verifier")
    openai_llm.always(Reply.json({"answer_markdown": "Everything is fine.", "cited_invocation_ids": []}), role="composer")
    with django_capture_on_commit_callbacks(execute=True):
        replay = replay_submit(user=alice, run_id=source.run_id, options=ReplayOptions(model="fake-new-args"))
    replay.refresh_from_db()
    assert replay.is_terminal
    miss = replay.tool_invocations.get()
    assert miss.status == "ERROR" and miss.replay_mode == "not_in_recording" and miss.source_invocation_id is None
    assert "not_in_recording" in miss.error_message and miss.result is None
    # The executor's request carried the refusal, not a live answer.
    assert any("not_in_recording" in (m.get("content") or "") for r in openai_llm.requests_for("executor")
               for m in r.tool_results)
    # No evidence, no claim: the run is degraded with no PASS verdict, whatever the model asserted.
    assert replay.degraded and replay.effective_verdict != "PASS" and "Everything is fine" not in replay.answer
    assert source.tool_invocations.count() == DiagnosisRun.objects.get(pk=source.pk).tool_count


def test_the_root_cause_is_read_from_the_structured_diagnosis_before_the_claims():
    from traces.replay_compare import root_cause

    pool = {"rootCause": {"service": "payment-service", "cause": "connection pool exhausted",
                          "summary": "The pool is exhausted.", "claimIds": ["c1"]}, "nothingWrong": False}
    disk = {"rootCause": {"service": "payment-service", "cause": "disk full", "summary": "The disk is full."}}
    claims = ["Root cause (memory leak): order-service is killed for memory."]
    left, right = root_cause(DiagnosisRun(diagnosis=pool), claims), root_cause(DiagnosisRun(diagnosis=disk), claims)
    assert left == {"source": "structured_diagnosis", "text": "The pool is exhausted.",
                    "key": "connection pool exhausted:payment-service"}
    assert right["key"] == "disk full:payment-service"  # same claims, different structured causes: they disagree
    assert root_cause(DiagnosisRun(diagnosis=None), claims) == {
        "source": "claims", "text": claims[0], "key": "memory leak:order-service"}
