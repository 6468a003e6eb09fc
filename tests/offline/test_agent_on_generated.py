"""The offline analyser as a run uses it, on generated incidents: it gathers its own evidence within the tool
budget (12 calls), so it must follow what the records point at (an IP through the cluster's Services, the
dependency an error names, the firing alert when the asked service shows nothing), answer a how-to question
from the runbooks, and stay honest where its evidence ends. Scored strictly from the structured diagnosis.

Development seeds only (``diagnosis/evaluation/generator``: never the held-back range).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from diagnosis.evaluation.generator import generate, write_incident
from diagnosis.evaluation.scenarios import score_run
from diagnosis.graph.state import StateKey as K
from diagnosis.models import DiagnosisRun
from tests.offline.pipeline import run_question

GUARD_SEEDS = range(400, 440)


def _diagnosis(run) -> dict:
    """The served structured diagnosis; a run that ended on the fallback answer names nothing."""
    composed = run.state.get(K.COMPOSER_OUTPUT) or {}
    return (composed.get("render") or {}).get("diagnosis") or {
        "rootCause": None, "nothingWrong": False, "undetermined": True, "symptoms": []}


def _incident(seed: int, tmp: Path):
    incident = generate(seed)
    folder = write_incident(incident, tmp / incident.name)
    return incident.ground_truth, folder, incident.scenario["default_question"]


def _howto_seeds(count: int) -> list[int]:
    return [seed for seed in range(0, 200) if generate(seed).ground_truth.get("question_kind") == "howto"][:count]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_howto_question_is_answered_from_the_runbooks_and_never_with_a_root_cause(tmp_path, language):
    for seed in _howto_seeds(2):
        truth, folder, questions = _incident(seed, tmp_path)
        run = run_question(folder, questions[language])
        diagnosis = _diagnosis(run)
        assert diagnosis["rootCause"] is None and not diagnosis["nothingWrong"], (seed, diagnosis)
        assert not {"query_logs", "query_metrics", "query_kubernetes"} & set(run.tools_called), run.tools_called
        assert "Cause not established" not in run.answer and "未能确定" not in run.answer
        if language == "en":  # the runbook of the asked service, quoted step by step
            assert 'Runbook "' in run.answer and truth["asked_services"][0] in run.answer, run.answer


def test_the_agent_names_roots_on_generated_incidents_and_is_rarely_confidently_wrong(tmp_path):
    """A guard, not a target: on these development seeds the analyser had 13 of 40 right with 5 false
    confidences before it followed addresses, alerts and quiet hops, and 30 with 1 before it read the node a
    quiet dependency runs on, and 32 before its first round left the runbooks and the asked service's state for
    later and a backlog waited for its consumers, and 34 before a stated symptom nothing shows was answered
    "nothing wrong" and a series' name was read as the localiser reads it; it has 36 with none now."""
    counts: Counter = Counter()
    for seed in GUARD_SEEDS:
        truth, folder, questions = _incident(seed, tmp_path)
        run = run_question(folder, questions["en"])
        served = DiagnosisRun(answer=run.answer, effective_verdict=run.verdict, self_evaluation={},
                              diagnosis=_diagnosis(run))
        score = score_run(served, truth)
        counts["right"] += score["root_cause_hit"]
        counts["false_confidence"] += score["false_confidence"]
    assert counts["false_confidence"] == 0, counts
    assert counts["right"] >= 35, counts


@pytest.mark.parametrize(("language", "question"), [
    ("en", "Users report failures on trovaskel. What is going on?"),
    ("zh", "用户反馈 trovaskel 请求失败，发生了什么？"),
])
def test_a_question_about_a_plain_name_no_record_knows_says_no_data_and_names_no_root(tmp_path, language, question):
    """A plain word that is no English word is a name: the run reads that service's logs and metrics, finds
    none, and says so with the empty answers cited, even with alerts firing on other services (it never
    answers about one of those, nor claims that the evidence shows a problem)."""
    seed = next(s for s in GUARD_SEEDS if generate(s).ground_truth.get("question_kind") == "incident"
                and any(a.get("state") == "firing" for a in generate(s).alerts.get("alerts", [])))
    _truth, folder, _questions = _incident(seed, tmp_path)
    run = run_question(folder, question)
    diagnosis = _diagnosis(run)
    assert diagnosis["rootCause"] is None and not diagnosis["nothingWrong"] and not diagnosis["symptoms"], diagnosis
    assert run.verdict == "LOW_CONFID", run.verdict
    assert {"query_logs", "query_metrics"} <= set(run.tools_called), run.tools_called
    assert "No telemetry of trovaskel was found" in run.answer and '"records": []' in run.answer, run.answer
    assert "Cause not established" not in run.answer and "未能确定原因" not in run.answer
    assert ("Check the service's name" if language == "en" else "请核对服务名称") in run.answer
