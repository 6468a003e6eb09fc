"""One offline diagnosis localises each distinct evidence set once: the role that plans the next queries
and the role that writes the claims share the localisation of the same tool results, and nothing is
shared between two models (two runs)."""

from __future__ import annotations

from collections import Counter

import diagnosis.llm.offline.localised as localised
from diagnosis.demo.loader import load_scenario_meta, scenario_dir
from diagnosis.llm.offline.localised import LocalisationMemo
from tests.offline.pipeline import run_question

SCENARIO = "payment-db-pool-exhaustion"


def _count(monkeypatch) -> tuple[Counter, list[int]]:
    """Localiser runs by (invocation ids, subject), and the number of requests the memo answered."""
    runs: Counter = Counter()
    requests = [0]
    real_localise, real_memo = localised.localise, LocalisationMemo.localise

    def counted_localise(results, subject=()):
        results = list(results)
        runs[(tuple(r.get("invocation_id") for r in results), tuple(subject))] += 1
        return real_localise(results, subject)

    def counted_request(self, results, subject):
        requests[0] += 1
        return real_memo(self, results, subject)

    monkeypatch.setattr(localised, "localise", counted_localise)
    monkeypatch.setattr(LocalisationMemo, "localise", counted_request)
    return runs, requests


def test_one_offline_diagnosis_localises_each_distinct_evidence_once(monkeypatch):
    runs, requests = _count(monkeypatch)
    question = load_scenario_meta(scenario_dir(SCENARIO))["default_question"]["en"]
    outcome = run_question(scenario_dir(SCENARIO), question)
    assert outcome.answer and runs, "the diagnosis ran and localised its evidence"
    assert requests[0] > len(runs), "the roles asked for the same evidence more than once (the case under test)"
    repeated = {key: n for key, n in runs.items() if n > 1}
    assert not repeated, f"evidence localised more than once: {repeated}"


def _result(invocation_id: str, message: str) -> dict:
    return {"invocation_id": invocation_id, "tool_name": "query_logs", "status": "SUCCESS",
            "arguments": {"service": "payment-service"},
            "result": {"records": [{"timestamp": "2026-01-01T10:00:00Z", "service": "payment-service",
                                    "level": "ERROR", "message": message}]}}


def test_the_memo_localises_again_for_other_content_other_subject_or_another_model(monkeypatch):
    runs, _ = _count(monkeypatch)
    memo = LocalisationMemo()
    first = [_result("inv-1", "connection pool exhausted: timeout after 30000ms")]
    assert memo.localise(first, ["payment-service"]) is memo.localise(list(first), ["payment-service"])
    assert sum(runs.values()) == 1
    memo.localise([_result("inv-1", "disk full: no space left on device")], ["payment-service"])  # same id, other content
    memo.localise(first, ["other-service"])
    LocalisationMemo().localise(first, ["payment-service"])  # another run's model
    assert sum(runs.values()) == 4
    memo.localise([{k: v for k, v in first[0].items() if k != "invocation_id"}], ["payment-service"])
    memo.localise([{k: v for k, v in first[0].items() if k != "invocation_id"}], ["payment-service"])
    assert sum(runs.values()) == 6, "results without an invocation id are never remembered"
