"""effective_verdict (diagnosis.contracts, the only one): the lower of the Verifier's verdict and the
Gatekeeper ceiling. No readable model verdict gives None (no verdict is invented; the topology routes
it to the fallback); no readable ceiling caps the verdict at REJECT."""

from __future__ import annotations

import pytest

from diagnosis.contracts import Verdict, effective_verdict, known_verdict, min_verdict

TABLE = [
    ("PASS", "PASS", "PASS"),
    ("PASS", "LOW_CONFID", "LOW_CONFID"),
    ("PASS", "REJECT", "REJECT"),
    ("LOW_CONFID", "PASS", "LOW_CONFID"),
    ("LOW_CONFID", "LOW_CONFID", "LOW_CONFID"),
    ("LOW_CONFID", "REJECT", "REJECT"),
    ("REJECT", "PASS", "REJECT"),
    ("REJECT", "LOW_CONFID", "REJECT"),
    ("REJECT", "REJECT", "REJECT"),
]


@pytest.mark.parametrize(("model", "ceiling", "expected"), TABLE)
def test_the_effective_verdict_is_the_lower_of_model_and_ceiling(model, ceiling, expected):
    assert effective_verdict(model, ceiling) == expected
    assert effective_verdict(Verdict(model), Verdict(ceiling)) is Verdict(expected)


@pytest.mark.parametrize("unknown", [None, "", "MAYBE", "LOW_CONFIDENCE", " pass ", "pass", 2, {"verdict": "PASS"},
                                     ["PASS"]])
def test_a_missing_or_unreadable_model_verdict_gives_no_verdict(unknown):
    assert effective_verdict(unknown, "PASS") is None
    assert known_verdict(unknown) is None


@pytest.mark.parametrize("unknown", [None, "", "OK", "pass"])
def test_a_missing_or_unreadable_ceiling_caps_the_verdict_at_reject(unknown):
    for model in Verdict:
        assert effective_verdict(model, unknown) is Verdict.REJECT


def test_no_verdict_at_all_is_the_weakest():
    assert min_verdict() is Verdict.REJECT
    assert min_verdict("PASS", "nonsense") is Verdict.REJECT


def test_the_graph_state_and_the_gatekeeper_use_the_same_verdict():
    from diagnosis.gatekeeper import Verdict as GatekeeperVerdict
    from diagnosis.graph import state
    from diagnosis.models import DiagnosisRun

    assert GatekeeperVerdict is Verdict and state.Verdict is Verdict and state.effective_verdict is effective_verdict
    assert [value for value, _ in DiagnosisRun.Verdict.choices] == [v.value for v in Verdict]
