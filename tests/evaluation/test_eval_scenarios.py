"""The evaluation harness on the offline analyser: every shipped scenario, no unverified claim."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from diagnosis.models import DiagnosisRun
from diagnosis.evaluation import scenarios as evaluation
from diagnosis.evaluation.compare import side_by_side
from tests.offline.expectations import UNDETERMINED

pytestmark = pytest.mark.django_db


def test_the_offline_analyser_makes_no_unverified_claim_on_any_scenario(tmp_path, capsys):
    call_command("eval_scenarios", "--out", str(tmp_path))
    report = json.loads((tmp_path / "evaluation.json").read_text())
    shipped = len(evaluation.scenario_dirs(settings.DEMO_SCENARIOS_DIR))
    assert shipped >= 13 and report["summary"]["runs"] == 2 * shipped  # every scenario, English and Chinese
    assert report["summary"]["complete"] and report["summary"]["false_confidence"] == 0
    assert report["summary"]["planner_schema_valid_rate"] == 1.0 and report["summary"]["runs_reaching_executor"] == 2 * shipped
    assert len((tmp_path / "evaluation.jsonl").read_text().splitlines()) == 2 * shipped
    assert report["summary"]["unsupported_claims"] == 0
    assert report["summary"]["root_cause_hits"] >= 2 * (shipped - len(UNDETERMINED))  # the floor may only rise
    for row in report["scenarios"]:
        assert row["status"] == "SUCCESS", row
        assert row["unsupported_claims"] == 0, row
        assert row["citation_validity"] > 0, row
        # Offline end to end on database rows: the composer answers, naming the ground-truth cause.
        assert row["verdict"] in ("PASS", "LOW_CONFID") and not row["fallback_used"], row
        # A hit, or an honest undetermined where the gathered evidence does not separate the cause.
        assert row["root_cause_hit"] or (row["scenario"] in UNDETERMINED and row["undetermined"]), row
        assert row["planner_calls"] >= 1 and row["planner_schema_valid"] == row["planner_calls"], row
        assert row["reached_executor"] and row["tool_round_trips"] >= 1, row
        assert not row["false_confidence"], row
        run = DiagnosisRun.objects.get(run_id=row["run_id"])
        healthy = run.diagnosis["nothingWrong"]
        assert healthy or run.diagnosis["undetermined"] or run.diagnosis["rootCause"]["claimIds"], run.diagnosis
        run = DiagnosisRun.objects.get(run_id=row["run_id"])
        assert run.orchestration_trace["final_node"] == "composer"
        cited = set(evaluation.INVOCATION_REF_RE.findall(run.answer))
        assert cited and cited <= set(run.tool_invocations.values_list("invocation_id", flat=True))
        assert ("离线分析器" if row["language"] == "zh" else "Offline analyser") in run.answer
    assert "| scenario | lang |" in (tmp_path / "evaluation.md").read_text()
    assert "summary:" in capsys.readouterr().out


def test_the_harness_fails_when_an_answer_cites_unverified_evidence(tmp_path, monkeypatch):
    def fabricate(*, run_id):
        DiagnosisRun.objects.filter(run_id=run_id).update(
            status="SUCCESS", answer="The root cause is proven by [inv-0badc0de].",
            self_evaluation={"rule_evaluation": {}, "verifier_evaluation": {"verified_evidence": []}},
        )

    monkeypatch.setattr(evaluation, "run_execute", fabricate)
    with pytest.raises(CommandError, match="unverified claim"):
        call_command("eval_scenarios", "--lang", "en", "--out", str(tmp_path))
    shipped = len(evaluation.scenario_dirs(settings.DEMO_SCENARIOS_DIR))
    assert json.loads((tmp_path / "evaluation.json").read_text())["summary"]["unsupported_claims"] == shipped


def test_scoring_counts_a_missed_root_cause():
    run = DiagnosisRun(answer="Everything is on fire in checkout-service.", effective_verdict="PASS", self_evaluation={})
    score = evaluation.score_run(run, {"root_cause_service": "redis-cache", "cause_keywords": ["maxmemory"]})
    assert score["root_cause_hit"] is False and score["service_hit"] is False and score["cause_hit"] is False


def test_an_interrupted_evaluation_keeps_every_run_that_finished(tmp_path, monkeypatch):
    real = evaluation.evaluate_scenario
    finished = []

    def interrupt_on_the_third(**kwargs):
        if len(finished) == 2:
            raise KeyboardInterrupt  # what Ctrl-C or a killed slow model does mid-evaluation
        score = real(**kwargs)
        finished.append(score.run_id)
        return score

    monkeypatch.setattr(evaluation, "evaluate_scenario", interrupt_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        call_command("eval_scenarios", "--lang", "en", "--out", str(tmp_path))
    lines = [json.loads(line) for line in (tmp_path / "evaluation.jsonl").read_text().splitlines()]
    assert [row["run_id"] for row in lines] == finished
    report = json.loads((tmp_path / "evaluation.json").read_text())
    assert report["summary"]["runs"] == 2 and report["summary"]["complete"] is False
    assert [row["run_id"] for row in report["scenarios"]] == finished
    assert (tmp_path / "evaluation.md").read_text().count("\n| ") == 2  # two rows under the header


def _scored(diagnosis, verdict="PASS", answer=""):
    run = DiagnosisRun(answer=answer, effective_verdict=verdict, self_evaluation={}, diagnosis=diagnosis)
    return evaluation.score_run(run, {"root_cause_service": "redis-cache", "cause_keywords": ["maxmemory", "rebalance"]})


def _root(service, summary, cause=None):
    return {"rootCause": {"service": service, "cause": cause, "summary": summary, "startedAt": None, "claimIds": ["c1"]},
            "nothingWrong": False, "undetermined": False, "symptoms": []}


def test_strict_scoring_reads_the_root_cause_summary_never_quoted_evidence():
    answer = "Root cause: redis-cache. Evidence: “consumer group rebalance maxmemory” [inv-0000000a]"
    quoted = _scored(_root("redis-cache", 'Root cause (unknown): redis-cache — It began after: "maxmemory reached".'), answer=answer)
    assert quoted["service_hit"] and not quoted["cause_hit"] and not quoted["root_cause_hit"]
    assert quoted["false_confidence"] is True  # PASS on an unestablished cause
    assert quoted["lenient_hit"] is True  # what the former scorer would have counted
    named = _scored(_root("redis-cache", "Root cause (redis_maxmemory): redis-cache — maxmemory reached."))
    assert named["root_cause_hit"] and not named["false_confidence"]


def test_a_wrong_service_under_pass_is_false_confidence_and_undetermined_is_counted_apart():
    wrong = _scored(_root("checkout-service", "Root cause (maxmemory): checkout-service — maxmemory."))
    assert wrong["false_confidence"] and not wrong["root_cause_hit"]
    assert not _scored(_root("checkout-service", "x"), verdict="LOW_CONFID")["false_confidence"]
    undetermined = _scored({"rootCause": None, "nothingWrong": False, "undetermined": True, "symptoms": []},
                           verdict="LOW_CONFID")
    assert undetermined["undetermined"] and not undetermined["root_cause_hit"] and not undetermined["false_confidence"]
    healthy_claim = _scored({"rootCause": None, "nothingWrong": True, "undetermined": False, "symptoms": []})
    assert healthy_claim["false_confidence"]  # "nothing wrong" under PASS when something is


def test_healthy_scenarios_score_nothing_wrong():
    truth = {"root_cause_service": None, "expected_nothing_wrong": True, "cause_keywords": ["healthy"]}
    ok = evaluation.score_run(DiagnosisRun(answer="", effective_verdict="PASS", self_evaluation={},
                                           diagnosis={"rootCause": None, "nothingWrong": True, "undetermined": False,
                                                      "symptoms": []}), truth)
    assert ok["nothing_wrong_correct"] and ok["root_cause_hit"] and not ok["false_confidence"]
    bad = evaluation.score_run(DiagnosisRun(answer="", effective_verdict="PASS", self_evaluation={},
                                            diagnosis=_root("catalog-service", "x")), truth)
    assert bad["false_confidence"] and bad["nothing_wrong_correct"] is False


@pytest.mark.parametrize("kind", ["howto", "no_data"])
def test_a_howto_or_no_data_question_is_right_without_a_root_cause_and_never_nothing_wrong(kind):
    truth = {"root_cause_service": None, "expected_nothing_wrong": False, "question_kind": kind, "cause_keywords": []}

    def scored(diagnosis: dict) -> dict:
        return evaluation.score_run(DiagnosisRun(answer="", effective_verdict="PASS", self_evaluation={},
                                                 diagnosis=diagnosis), truth)

    answered = scored({"rootCause": None, "nothingWrong": False, "undetermined": True, "symptoms": []})
    assert answered["root_cause_hit"] and not answered["false_confidence"]
    healthy = scored({"rootCause": None, "nothingWrong": True, "undetermined": False, "symptoms": []})
    assert healthy["false_confidence"] and not healthy["root_cause_hit"]
    blamed = scored(_root("catalog-service", "x"))
    assert blamed["false_confidence"] and not blamed["root_cause_hit"]



def _score(**fields) -> evaluation.ScenarioScore:
    base = dict(scenario="s", language="en", run_id="run-x", status="SUCCESS", verdict="PASS", service_hit=False,
                cause_hit=False, root_cause_hit=False, nothing_wrong_correct=None, undetermined=False,
                false_confidence=False, lenient_hit=False, citation_validity=1.0, claims_verified=1, claims_total=1,
                unsupported_claims=0, fallback_used=False, steps=5, tool_calls=3, tokens=100, latency_ms=10)
    return evaluation.ScenarioScore(**{**base, **fields})


def test_summaries_side_by_side_put_each_figure_in_its_labels_column():
    on = evaluation.summary([_score(root_cause_hit=True, ranking_calls=1), _score()])
    off = {k: v for k, v in evaluation.summary([_score(), _score(false_confidence=True)]).items()
           if k != "runs_calling_ranking"}
    table = side_by_side({"hint on": on, "hint off": off}).splitlines()
    assert table[0] == "| | hint on | hint off |"
    rows = {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table[2:])}
    assert rows["root cause hits (strict)"] == ["1", "0"] and rows["FALSE CONFIDENCE"] == ["0", "1"]
    assert rows["runs calling the ranking"] == ["1", "-"]  # a figure a summary lacks is shown as missing
    assert rows["runs"] == ["2", "2"]
