"""The report of a localiser's scores on generated incidents (diagnosis/evaluation/generator/report.py)."""

from __future__ import annotations

from functools import lru_cache

from diagnosis.evaluation.generator import HELD_BACK_FROM, generate
from diagnosis.evaluation.generator.report import Outcome, markdown, summarise

SEEDS = range(120)


@lru_cache(maxsize=1)
def _generated() -> tuple:
    return tuple((seed, generate(seed).ground_truth) for seed in SEEDS)


def _truths() -> dict:
    return dict(_generated())


def _perfect(seed: int, truth: dict) -> Outcome:
    if truth["question_kind"] == "incident":
        return Outcome(seed, (truth["root_cause_service"], "x"), truth["cause_kind"], passed=True)
    return Outcome(seed, (), None, passed=True, nothing_wrong=True)


def test_a_perfect_localiser_scores_one_everywhere_and_no_false_confidence():
    truths = _truths()
    summary = summarise([_perfect(s, t) for s, t in truths.items()], truths)
    row = summary["overall"]["development"]
    assert row["runs"] == len(SEEDS)
    assert row["AC@1"] == row["AC@3"] == row["kind@1"] == row["nothing_wrong_accuracy"] == 1.0
    assert row["false_confidence"] == 0.0 and row["undetermined"] == 0.0
    assert set(summary["by_size"]) <= {"3-5", "6-10", "11-20", "21-30"}
    assert "healthy" in summary["by_question"] and "network.dns" in summary["by_kind"]


def test_naming_the_asked_service_with_confidence_is_false_confidence_whenever_it_is_not_the_root():
    truths = _truths()
    outcomes = [Outcome(s, tuple(t["asked_services"]), "resource.cpu", passed=True) for s, t in truths.items()]
    row = summarise(outcomes, truths)["overall"]["development"]
    incidents = [t for t in truths.values() if t["question_kind"] == "incident"]
    asked_root = sum(t["asked_services"] == [t["root_cause_service"]] for t in incidents)
    assert row["AC@1"] == round(asked_root / len(incidents), 3)
    wrong = len(incidents) - asked_root + sum(t["question_kind"] != "incident" for t in truths.values())
    assert row["false_confidence"] == round(wrong / len(truths), 3)
    assert row["nothing_wrong_accuracy"] == 0.0


def test_the_root_in_second_place_counts_for_ac3_only_and_undetermined_runs_are_counted():
    truths = {s: t for s, t in _truths().items() if t["question_kind"] == "incident"}
    outcomes = [Outcome(s, ("somewhere-else", t["root_cause_service"]), None, undetermined=True) for s, t in truths.items()]
    row = summarise(outcomes, truths)["overall"]["development"]
    assert row["AC@1"] == 0.0 and row["AC@3"] == 1.0 and row["undetermined"] == 1.0 and row["false_confidence"] == 0.0


def test_held_back_seeds_are_reported_in_their_own_column():
    truth = {"root_cause_service": "a", "cause_kind": "network.dns", "also_accepted_kinds": [], "question_kind": "incident",
             "format": "logfmt", "size": 4}
    seed = HELD_BACK_FROM + 3  # a made-up truth: held-back incidents are not generated to be looked at
    summary = summarise([Outcome(0, ("a",), "network.dns", passed=True), Outcome(seed, ("b",), None, passed=True)],
                        {0: truth, seed: truth})
    assert summary["overall"]["development"]["AC@1"] == 1.0
    assert summary["overall"]["held back"]["AC@1"] == 0.0 and summary["overall"]["held back"]["false_confidence"] == 1.0
    table = markdown(summary)
    assert "| all | 1 | 1 | 1.0 | 0.0 |" in table and "AC@1 (held back)" in table and "### By kind" in table
