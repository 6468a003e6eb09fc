"""diagnosis.contracts: each stored shape is read back in one place, and odd stored data never raises."""

from __future__ import annotations

import json

import pytest

from diagnosis.contracts import (
    TRACE_VERSION, ExecutorEvidence, GatekeeperResult, SelfEvaluation, StoredAudit, StructuredDiagnosis, Verdict,
    orchestration_trace_read,
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
