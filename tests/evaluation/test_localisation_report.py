"""The localisation report scores strictly from the structured result, and keeps the held-back range apart."""

import pytest

from diagnosis.evaluation import localisation_report as report
from diagnosis.evaluation.generator import HELD_BACK_FROM
from diagnosis.localisation.outcome import Localisation
from diagnosis.localisation.ranking import Candidate

TRUTH = {"question_kind": "incident", "root_cause_service": "vorla", "cause_kind": "resource.pool",
         "also_accepted_kinds": ["dependency.database"], "format": "logfmt", "size": 7}


def _found(outcome, root=None, kind=None, ranked=("vorla",)):
    return Localisation(outcome, root=root, kind=kind, candidates=[Candidate(s, [], None, 1.0) for s in ranked])


@pytest.mark.parametrize("found, hit, wrong", [
    (_found("root_cause", "vorla", "resource.pool"), True, False),
    (_found("root_cause", "vorla", "dependency.database"), True, False),  # also accepted
    (_found("root_cause", "vorla", "network.timeout"), False, True),  # right service, wrong kind
    (_found("root_cause", "pemski", "resource.pool", ("pemski", "vorla")), False, True),
    (_found("undetermined", "vorla", "resource.pool"), False, False),
])
def test_an_incident_is_a_hit_only_with_a_decisive_right_service_and_kind(found, hit, wrong):
    scored = report.score(TRUTH, found, 3, 0.0, False)
    assert (scored.hit, scored.false_confidence) == (hit, wrong)


def test_ranking_accuracy_reads_the_ranked_candidates():
    scored = report.score(TRUTH, _found("undetermined", ranked=("pemski", "vorla")), 3, 0.0, False)
    assert (scored.ac1, scored.ac3) == (False, True)


@pytest.mark.parametrize("question", ["healthy", "no_data"])
def test_any_root_cause_where_there_is_none_to_find_is_false_confidence(question):
    truth = {"question_kind": question, "root_cause_service": None, "expected_nothing_wrong": question == "healthy"}
    assert report.score(truth, _found("root_cause", "vorla", "resource.cpu"), 1, 0.0, False).false_confidence
    right = "nothing_wrong" if question == "healthy" else "no_data"
    assert report.score(truth, _found(right, ranked=()), 1, 0.0, False).hit


def test_the_development_range_cannot_reach_into_the_held_back_seeds(capsys):
    with pytest.raises(SystemExit):
        report.main(["--seeds", f"0:{HELD_BACK_FROM + 5}"])
    assert "held-back" in capsys.readouterr().err


def test_a_small_range_is_generated_localised_and_tabled(capsys):
    assert report.main(["--seeds", "0:6", "--breakdown"]) == 0
    out = capsys.readouterr().out
    assert "| AC@1 |" in out and "| false confidence |" in out and "| kind | incidents |" in out


def test_the_report_is_repeatable_whatever_the_wall_clock():
    """Each seed is served at its own fixed moment, so two evaluations agree outcome for outcome."""
    first = [(s.seed, s.outcome, s.ac1, s.hit) for s in report.evaluate(range(3, 6))]
    second = [(s.seed, s.outcome, s.ac1, s.hit) for s in report.evaluate(range(3, 6))]
    assert first == second and len(first) == 3
    assert report.moment_of(3) != report.moment_of(4)


def test_on_a_development_range_the_localiser_is_never_confidently_wrong_and_mostly_right():
    """A guard on generated incidents (seeds 0-99, a development range; the held-back seeds are scored by
    the report's command only): no false confidence, the true root ranked first almost always and named
    decisively in most incidents, every healthy question "nothing wrong" and every question about a
    service without telemetry "no data". A rule that trades a right answer for a confident wrong one, or
    blurs what was decisive, fails here."""
    scores = report.evaluate(range(0, 100))
    incidents = [s for s in scores if s.question == "incident"]
    assert len(incidents) >= 70
    assert [s.seed for s in scores if s.false_confidence] == []
    assert sum(s.ac1 for s in incidents) >= 0.95 * len(incidents)
    assert sum(s.hit for s in incidents) >= 0.85 * len(incidents)
    assert all(s.hit for s in scores if s.question in ("healthy", "no_data"))
