"""The served verdict is computed once when a run finishes and stored: the run's column and its stored
self-evaluation hold the same value, and the read side reads it back (SelfEvaluation.stored_verdict)."""

from __future__ import annotations

import pytest

from diagnosis.agents import results
from diagnosis.contracts import SelfEvaluation, Verdict
from diagnosis.graph.state import NodeStatus as S
from diagnosis.graph.state import StateKey as K


def finished(verdict: str, **render) -> dict:
    return {K.VERIFIER_STATUS: S.COMPLETED, K.VERIFIER_OUTPUT: {"verdict": verdict}, K.EFFECTIVE_VERDICT: verdict,
            K.VERDICT_CEILING: "PASS", K.COMPOSER_OUTPUT: {"render": render}, K.FINAL_ANSWER: "answer"}


@pytest.mark.parametrize(("state", "expected"), [
    (finished("PASS"), Verdict.PASS),
    (finished("PASS", knowledge_only_root=True), Verdict.LOW_CONFID),  # the cap of a knowledge-only root
    (finished("PASS", diagnosis={"undetermined": True}), Verdict.LOW_CONFID),
    (finished("REJECT"), Verdict.REJECT),
    ({**finished("PASS"), K.DEGRADED: True}, None),
])
def test_the_column_and_the_stored_evaluation_hold_the_one_served_verdict(state, expected, monkeypatch):
    calls = []
    real = results.served_verdict
    monkeypatch.setattr(results, "served_verdict", lambda s: calls.append(s) or real(s))
    result = results.map_run_result(state=state, outcomes=[], budget={}, prompt_audit={})
    assert len(calls) == 1
    assert result.effective_verdict == expected
    stored = SelfEvaluation.read(result.self_evaluation)
    assert stored.verifier.effective_verdict == (str(expected) if expected else None)
    assert stored.stored_verdict == expected


def test_an_alert_analysis_verdict_is_read_back_from_its_stored_rule_evaluation():
    assert SelfEvaluation.read({"aiops_rule_evaluation": {"verdict": "LOW_CONFID"}}).stored_verdict is Verdict.LOW_CONFID
    assert SelfEvaluation.read({"aiops_rule_evaluation": {"verdict": "maybe"}}).stored_verdict is None
    assert SelfEvaluation.read({}).stored_verdict is None
