"""diagnosis.contracts: each stored shape is read back in one place, and odd stored data never raises."""

from __future__ import annotations

import json

import pytest

from diagnosis.contracts import (
    EXECUTOR_MAX_CLAIMS, EXECUTOR_SUMMARY_CHARS, TRACE_VERSION, EvidenceShapeError, ExecutorEvidence, GatekeeperResult,
    SelfEvaluation, StoredAudit, StructuredDiagnosis, Verdict, orchestration_trace_read,
)

ODD = [None, "", "not json", 3, [], ["x"], {"verifier_evaluation": 3}, {"verifier_evaluation": {"gatekeeper_audit": []}}]


@pytest.mark.parametrize("value", ODD)
def test_odd_stored_self_evaluations_read_as_empty(value):
    evaluation = SelfEvaluation.read(value)
    assert evaluation.verified_claims == () and evaluation.verifier.gatekeeper_audit is None
    assert evaluation.rule_evaluation == {} and evaluation.verifier.suggestions == ()


def test_a_stored_audit_reads_back_claim_by_claim_and_skips_what_is_not_an_object():
    result = GatekeeperResult(run_id="run-1", verdict=Verdict.LOW_CONFID, reason_code="some_claims_verified",
                              verified_binding_count=1, total_binding_count=2, verified_claim_count=1,
                              total_claim_count=1)
    stored = result.to_dict()
    stored["audit"] = [{"claim_id": "c1", "statement": "s", "verified": True, "reason_code": "verified",
                        "bindings": [{"source_invocation_id": "inv-0a1b2c3d", "verified": True, "reason_code": "verified"},
                                     "not a binding"]}, 7]
    audit = StoredAudit.read(json.dumps(stored))
    assert (audit.verdict, audit.verified_binding_count, audit.citation_validity) == ("LOW_CONFID", 1, 0.5)
    assert [c.claim_id for c in audit.claims] == ["c1"]
    assert [b.source_invocation_id for b in audit.claims[0].bindings] == ["inv-0a1b2c3d"]
    assert StoredAudit.read({}) is None


def test_executor_evidence_keeps_only_claims_with_a_statement():
    evidence = ExecutorEvidence.read({"claims": [{"claim_id": "c1", "statement": " pool exhausted ", "evidence": [{}, 1]},
                                                 {"claim_id": "c2", "statement": "  "}, {"claim_id": "c3"}, "x"]})
    assert [(c.claim_id, len(c.evidence)) for c in evidence.claims] == [("c1", 1)]


def test_the_orchestration_trace_is_read_only_in_its_version():
    trace = {"version": TRACE_VERSION, "transitions": []}
    assert orchestration_trace_read(trace) == trace
    assert orchestration_trace_read(json.dumps(trace)) == trace
    assert orchestration_trace_read({"version": "stategraph-v0"}) is None
    assert orchestration_trace_read("{") is None


def test_the_structured_diagnosis_reads_its_camel_case_keys():
    diagnosis = StructuredDiagnosis.read({"rootCause": {"service": "payment"}, "nothingWrong": False,
                                          "undetermined": True, "symptoms": [{"service": "api"}, 2]})
    assert diagnosis.root_cause == {"service": "payment"} and diagnosis.undetermined and len(diagnosis.symptoms) == 1
    assert StructuredDiagnosis.read("garbage") == StructuredDiagnosis()


@pytest.mark.parametrize(("value", "field"), [
    (None, "version"), ({"version": "executor_evidence_v1", "claims": []}, "version"),
    ({"version": "executor_evidence_v2"}, "claims"), ({"version": "executor_evidence_v2", "claims": {"c1": {}}}, "claims"),
    ({"version": "executor_evidence_v2", "claims": [{"claim_id": "c1", "evidence": []}, "c2"]}, "claims[1]"),
    ({"version": "executor_evidence_v2", "claims": [{"claim_id": 1, "evidence": []}]}, "claims[0]"),
    ({"version": "executor_evidence_v2", "claims": [{"claim_id": "c1", "evidence": "inv-0a1b2c3d"}]}, "claims[0]"),
])
def test_the_executor_answer_that_is_not_one_is_refused_where_it_enters(value, field):
    with pytest.raises(EvidenceShapeError) as refused:
        ExecutorEvidence.parse(value)
    assert refused.value.field == field


def test_the_executor_answer_is_parsed_bounded_and_keeps_what_the_gatekeeper_audits():
    claims = [{"claim_id": f"c{i}", "statement": ["not", "text"] if i == 0 else "s", "evidence": [7, {"raw_path": "$"}],
               "extra": "dropped"} for i in range(EXECUTOR_MAX_CLAIMS + 3)]
    parsed = ExecutorEvidence.parse({"version": "executor_evidence_v2", "summary": "x" * (EXECUTOR_SUMMARY_CHARS + 5),
                                     "claims": claims, "open_questions": ["why?", 3]})
    assert len(parsed.claims) == EXECUTOR_MAX_CLAIMS and len(parsed.summary) == EXECUTOR_SUMMARY_CHARS
    first = parsed.to_dict()["claims"][0]
    assert first == {"claim_id": "c0", "statement": ["not", "text"], "evidence": [7, {"raw_path": "$"}]}
    assert parsed.open_questions == ("why?",)
    assert ExecutorEvidence.read(json.dumps(parsed.to_dict())).claims[0].claim_id == "c1"  # read keeps text statements
