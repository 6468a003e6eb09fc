"""effective_verdict: the lower of the Verifier's verdict and the Gatekeeper ceiling; unknown fails closed."""

from __future__ import annotations

import pytest

from diagnosis.gatekeeper import Verdict, effective_verdict

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


@pytest.mark.parametrize("unknown", [None, "", "MAYBE", "LOW_CONFIDENCE", 2, {"verdict": "PASS"}, ["PASS"]])
def test_an_unknown_model_verdict_fails_closed_to_reject(unknown):
    assert effective_verdict(unknown, "PASS") == Verdict.REJECT


@pytest.mark.parametrize("unknown", [None, "", "OK"])
def test_an_unknown_ceiling_fails_closed_to_reject(unknown):
    assert effective_verdict("PASS", unknown) == Verdict.REJECT


def test_case_and_surrounding_spaces_of_a_known_verdict_are_forgiven():
    assert effective_verdict(" pass ", "PASS") == Verdict.PASS
    assert effective_verdict("low_confid", "PASS") == Verdict.LOW_CONFID
