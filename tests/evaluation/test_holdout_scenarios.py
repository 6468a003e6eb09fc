"""The held-back scenarios: kept out of development until 2026-12-04 (two were read then; see
docs/EVALUATION.md), checked only through the scorer.

They measure how the analyser generalises; docs/EVALUATION.md reports their figures apart from the
shipped ones. The test holds the invariants that must never break (every run finishes, nothing
unverified is cited, a healthy service is not given a root cause) and keeps the honest figures
visible; it does not pin the hit rate, which is a measurement, not a contract, but it holds a floor
under it: an analyser or a scorer that stops finding most held-back root causes is broken, not measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnosis.evaluation import scenarios as evaluation

pytestmark = pytest.mark.django_db
HOLDOUT = Path(__file__).resolve().parents[1] / "holdout_scenarios"


def test_held_back_scenarios_are_scored_strictly_and_cite_only_verified_evidence():
    scores = evaluation.evaluate_folder(folder=HOLDOUT)
    assert len(scores) == 2 * len(evaluation.scenario_dirs(HOLDOUT)) >= 6
    for score in scores:
        assert score.status == "SUCCESS", score
        assert score.unsupported_claims == 0, score
        assert not score.false_confidence, score  # a PASS on a wrong root cause is the worst outcome
        assert score.root_cause_hit == (score.service_hit and score.cause_hit), score
        if score.nothing_wrong_correct is not None:  # the healthy-but-noisy one
            assert score.nothing_wrong_correct, score
    figures = evaluation.summary(scores)
    hits = [s for s in scores if s.root_cause_hit]
    assert (figures["runs"], figures["root_cause_hits"]) == (len(scores), len(hits))
    assert figures["root_cause_hit_rate"] == round(len(hits) / len(scores), 3)
    # docs/EVALUATION.md reports the measured figure (8 of 10 today; a drop is worth a look, a rise a docs
    # update). Below 70 %, the bar set for incident sets written elsewhere, the analyser no longer
    # generalises as it must: that is a failure.
    assert len(hits) * 10 >= 7 * len(scores), [(s.scenario, s.language) for s in scores if not s.root_cause_hit]
