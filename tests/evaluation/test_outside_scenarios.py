"""Incidents written by someone else, in two sets of 18 written on 2026-12-05 from the scenario format alone,
by authors who did not read the analyser (docs/EVALUATION.md, "Incidents written by someone else"):

- ``tests/outside_scenarios``: metric-led faults of the kinds RCA benchmarks inject; dependencies named only
  the way real software logs them, one story in Chinese; Kubernetes and changes; three healthy but alarming.
- ``tests/outside_scenarios_2``: traces and changes with the root two or three hops below; saturation and
  capacity where the loud service is not the root; the same faults in the wording of other stacks (Go, Node.js,
  Rust, .NET, Elixir, Envoy, Elasticsearch, RabbitMQ), one story in Chinese; three healthy but alarming.

docs/EVALUATION.md reports each set's first, blind figure and the figure since the general rules their
failures showed. Both sets were read while those rules were written, so they now guard against regressions;
they no longer measure generalisation. The test holds what must never break, on every run: it finishes, cites
only verified evidence, and is never confidently wrong. It does not pin the hit rate, which is a measurement,
but keeps a floor under it (26 and 20 of 36 today)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnosis.evaluation import scenarios as evaluation

pytestmark = pytest.mark.django_db
TESTS = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("folder, floor", [("outside_scenarios", 24), ("outside_scenarios_2", 20)])
def test_incidents_written_elsewhere_are_never_answered_with_confidence_on_a_wrong_root(folder, floor):
    scores = evaluation.evaluate_folder(folder=TESTS / folder)
    assert len(scores) == 2 * len(evaluation.scenario_dirs(TESTS / folder)) == 36
    for score in scores:
        assert score.status == "SUCCESS", score
        assert score.unsupported_claims == 0, score
        assert not score.false_confidence, (score.scenario, score.language)
        assert score.root_cause_hit == (score.service_hit and score.cause_hit), score
    hits = [s for s in scores if s.root_cause_hit or s.nothing_wrong_correct]
    assert len(hits) >= floor, [(s.scenario, s.language) for s in scores if s not in hits]
