"""The localiser's view kept in a run's diagnosis: the ranking bounded, the outcome, and the agreement."""

from __future__ import annotations

from diagnosis import ranking_view as view_module
from diagnosis.localisation.outcome import localise
from diagnosis.ranking_view import MAX_CANDIDATES, bounded_candidates, ranking_view
from tests.localisation.support import Results, caller_and_database, flat, stepped

QUESTION = "Why is fobrel-api slow?"


def test_the_view_ranks_the_dependency_first_and_says_whether_the_diagnosis_agreed():
    results = caller_and_database()
    view = ranking_view(results.items, question=QUESTION, root_service="quastor-db")
    assert [(c["rank"], c["service"], c["explainedBy"]) for c in view["candidates"]] == \
        [(1, "quastor-db", None), (2, "fobrel-api", "quastor-db")]
    assert view["candidates"][0]["explains"] == ["fobrel-api"] and view["candidates"][0]["kind"] == "dependency.database"
    assert view["localisation"] == {"outcome": "root_cause", "reason": None, "subject": ["fobrel-api"], "withoutData": []}
    assert view["agreement"] == "agrees"
    ids = {item["invocation_id"]: item["tool_name"] for item in results.items}
    assert all(ids[e["invocationId"]] == e["tool"] for c in view["candidates"] for e in c["evidence"])
    assert all(c["evidence"] for c in view["candidates"])  # each candidate links to the records that show it
    # The asked service is the symptom: a diagnosis that names it differs from the ranking.
    assert ranking_view(results.items, question=QUESTION, root_service="fobrel-api")["agreement"] == "differs"
    assert ranking_view(results.items, question=QUESTION, root_service=None)["agreement"] == "no_root_cause"


def test_the_view_is_the_same_for_the_same_recorded_outputs():
    results = caller_and_database()
    assert ranking_view(results.items, question=QUESTION, root_service=None) == \
        ranking_view(list(results.items), question=QUESTION, root_service=None)


def test_failed_calls_are_not_read_and_nothing_anomalous_is_no_ranking():
    results = Results()
    results.metric({"__name__": "http_request_duration_seconds", "service": "pemvak-web"}, flat(0.1))
    healthy = list(results.items)
    failed = [{**item, "status": "ERROR"} for item in caller_and_database().items]
    view = ranking_view(healthy + failed, question="Is pemvak-web healthy?", root_service="pemvak-web")
    assert view["candidates"] == [] and view["agreement"] == "no_ranking"
    assert view["localisation"]["outcome"] == "nothing_wrong"


def test_a_service_asked_about_without_telemetry_is_named_without_data():
    view = ranking_view(caller_and_database().items, question="Is zzyzx-api down?", root_service=None)
    assert view["localisation"]["outcome"] == "no_data" and view["localisation"]["withoutData"] == ["zzyzx-api"]


def test_hostile_names_kinds_and_references_are_left_out():
    ranking = [
        {"rank": 1, "service": "<img src=x onerror=alert(1)>", "kind": "resource.pool", "onset": 1.0, "strength": 1.0,
         "explainedBy": None, "explains": ["ok-svc"], "evidence": []},
        {"rank": 2, "service": "ok-svc", "kind": "<b>kind</b>", "onset": float("nan"), "strength": 0.5,
         "explainedBy": "<svg onload=alert(1)>", "explains": ["x" * 300, "node:n1", "fine-svc"],
         "evidence": [{"invocationId": "inv-0000000a", "tool": "query_logs", "rawPath": "$.records[1].message"},
                      {"invocationId": "inv-0000000b", "tool": "query_logs", "rawPath": "$.records[2]"},
                      {"invocationId": "inv-0000000a", "tool": "query_metrics", "rawPath": "$.records[3]"},
                      {"invocationId": "inv-0000000a", "tool": "query_logs", "rawPath": "records[<b>]"}]},
    ]
    out = bounded_candidates(ranking, {"inv-0000000a": "query_logs"})
    assert [c["rank"] for c in out] == [2]  # the rank stays: the gap shows a candidate was left out
    candidate = out[0]
    assert candidate["kind"] is None and candidate["onset"] is None and candidate["explainedBy"] is None
    assert candidate["explains"] == ["node:n1", "fine-svc"]
    assert candidate["evidence"] == [{"invocationId": "inv-0000000a", "tool": "query_logs",
                                      "rawPath": "$.records[1].message"}]


def test_the_ranking_kept_is_at_most_the_top_five():
    results = Results()
    for i, name in enumerate(["alda-svc", "bexo-svc", "cimu-svc", "dova-svc", "elti-svc", "fapo-svc", "gemu-svc"]):
        results.metric({"__name__": "process_resident_memory_bytes", "service": name}, stepped(2e8, 9e8, 30 + 3 * i))
    view = ranking_view(results.items, question="What is wrong?", root_service="alda-svc")
    assert len(view["candidates"]) == MAX_CANDIDATES and view["candidates"][0]["service"] == "alda-svc"


def test_the_agreement_is_judged_on_the_candidates_as_stored(monkeypatch):
    """A top root left out of the stored candidates (its name is no service name) cannot decide the agreement."""
    results = caller_and_database()
    loc = localise(results.items, ["fobrel-api"])
    ranking = loc.ranking(limit=MAX_CANDIDATES, refs_per_candidate=4)
    hostile = {**ranking[0], "service": "<b>quastor-db</b>", "rank": 0}
    monkeypatch.setattr(loc, "ranking", lambda **_: [hostile, *ranking])
    monkeypatch.setattr(view_module, "localise_results", lambda *_: loc)
    view = ranking_view(results.items, question=QUESTION, root_service="quastor-db")
    assert [c["service"] for c in view["candidates"]] == ["quastor-db", "fobrel-api"]
    assert view["agreement"] == "agrees"
