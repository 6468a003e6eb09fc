"""verify_bindings: one reason code per failed check, verdicts, counts and malformed executor output."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.hypo import examples
from diagnosis.gatekeeper import (
    DEFAULT_MIN_EXCERPT_CHARS,
    GATEKEEPER_VERSION,
    ClaimReason,
    GatekeeperResult,
    OutcomeReason,
    BindingReason,
    Verdict,
    project_verified_input,
    verify_bindings,
)
from tests.gatekeeper.fakes import (
    OTHER_RUN_ID,
    RUN_ID,
    InMemoryLookup,
    binding,
    claim,
    executor_output,
    logs_result,
    metrics_result,
    record,
)

HIKARI = "HikariPool-1 - Connection is not available, request timed out after 30000ms."


@pytest.fixture
def lookup() -> InMemoryLookup:
    return InMemoryLookup([
        record("inv-00000001", logs_result(HIKARI, "GET /api/v1/pay 500 in 30012ms")),
        record("inv-00000002", metrics_result(), tool_name="query_metrics"),
        record("inv-00000003", {"error": "loki unavailable"}, status="ERROR"),
        record("inv-00000004", {"error": "tool 'shell' is not allowed"}, tool_name="shell", status="BLOCKED"),
        record("inv-00000009", logs_result("secret of another run"), run_id=OTHER_RUN_ID),
    ])


def verify(output, lookup, **kwargs) -> GatekeeperResult:
    return verify_bindings(executor_output=output, run_id=RUN_ID, lookup=lookup, **kwargs)


def reason_of(b: dict, lookup: InMemoryLookup, **kwargs) -> str:
    result = verify(executor_output(claim("c1", b)), lookup, **kwargs)
    return result.claims[0].bindings[0].reason_code


def test_a_binding_that_quotes_the_cited_value_is_verified(lookup):
    assert reason_of(binding("Connection is not available"), lookup) == BindingReason.VERIFIED


def test_an_unknown_invocation_id_is_invocation_not_found(lookup):
    assert reason_of(binding("Connection is not available", invocation_id="inv-deadbeef"), lookup) == "invocation_not_found"


def test_an_invocation_of_another_run_is_invocation_other_run(lookup):
    b = binding("secret of another run", invocation_id="inv-00000009")
    assert reason_of(b, lookup) == "invocation_other_run"


def test_the_current_runs_record_wins_when_another_run_reuses_the_same_invocation_id(lookup):
    lookup.add(record("inv-00000001", logs_result("something else entirely"), run_id=OTHER_RUN_ID))
    assert reason_of(binding("Connection is not available"), lookup) == "verified"
    assert reason_of(binding("something else entirely"), lookup) == "excerpt_mismatch"


def test_a_wrong_tool_name_is_tool_mismatch(lookup):
    assert reason_of(binding("Connection is not available", tool_name="query_metrics"), lookup) == "tool_mismatch"


RANKING = {"outcome": "root_cause", "reason": "", "subject": ["payment-service"],
           "candidates": [{"rank": 1, "service": "payment-service", "kind": "resource.pool",
                           "evidence": [{"invocationId": "inv-00000001", "tool": "query_logs",
                                         "rawPath": "$.records[0].message"}]}]}


def test_a_citation_of_the_ranking_hint_is_ranking_not_evidence_even_when_its_excerpt_is_there(lookup):
    lookup.add(record("inv-0000000a", RANKING, tool_name="rank_root_causes"))
    hint = binding("$.records[0].message", invocation_id="inv-0000000a", tool_name="rank_root_causes",
                   raw_path="$.candidates[0].evidence[0].rawPath")
    assert reason_of(hint, lookup) == "ranking_not_evidence"
    # Named under another tool's name it is refused all the same; a real record named as the ranking too.
    assert reason_of({**hint, "tool_name": "query_logs"}, lookup) == "ranking_not_evidence"
    assert reason_of(binding("Connection is not available", tool_name="rank_root_causes"), lookup) == "ranking_not_evidence"


def test_a_claim_that_cites_only_the_ranking_is_not_verified_and_the_run_is_not_pass(lookup):
    lookup.add(record("inv-0000000a", RANKING, tool_name="rank_root_causes"))
    # Both excerpts really are in the ranking's recorded output, at the cited paths.
    only_hint = claim("c1", binding("resource.pool", invocation_id="inv-0000000a", tool_name="rank_root_causes",
                                    raw_path="$.candidates[0].kind"),
                      binding("payment-service", invocation_id="inv-0000000a", tool_name="rank_root_causes",
                              raw_path="$.candidates[0]"))
    result = verify(executor_output(only_hint), lookup)
    assert result.verdict == Verdict.REJECT and result.claims[0].reason_code == ClaimReason.NO_VERIFIED_BINDING
    assert {b.reason_code for b in result.claims[0].bindings} == {BindingReason.RANKING_NOT_EVIDENCE}
    # The records the ranking names are what a claim cites: the same claim on the raw record passes.
    raw = verify(executor_output(claim("c1", binding("Connection is not available"))), lookup)
    assert raw.verdict == Verdict.PASS


def test_an_error_invocation_is_invocation_failed(lookup):
    b = binding("loki unavailable", invocation_id="inv-00000003", raw_path="$.error")
    assert reason_of(b, lookup) == "invocation_failed"


def test_a_blocked_invocation_is_invocation_failed(lookup):
    b = binding("tool 'shell' is not allowed", invocation_id="inv-00000004", tool_name="shell", raw_path="$.error")
    assert reason_of(b, lookup) == "invocation_failed"


def test_a_path_that_does_not_resolve_is_path_not_found(lookup):
    assert reason_of(binding("Connection is not available", raw_path="$.records[7].message"), lookup) == "path_not_found"
    assert reason_of(binding("Connection is not available", raw_path="$.records[0].msg"), lookup) == "path_not_found"


def test_a_path_outside_the_subset_is_path_malformed(lookup):
    for path in ("$..message", "$.records[*].message", "records[0]", "$.records[?(@.level)]", "__import__('os')"):
        assert reason_of(binding("Connection is not available", raw_path=path), lookup) == "path_malformed", path


def test_a_short_excerpt_is_excerpt_too_short(lookup):
    assert reason_of(binding("Hikari"), lookup) == "excerpt_too_short"


def test_a_one_character_excerpt_fails_even_when_the_caller_lowers_the_minimum(lookup):
    assert reason_of(binding("H"), lookup) == "excerpt_too_short"
    assert reason_of(binding("H"), lookup, min_excerpt_chars=1) == "excerpt_too_short"
    assert reason_of(binding("H"), lookup, min_excerpt_chars=0) == "excerpt_too_short"


def test_an_empty_or_blank_excerpt_is_excerpt_too_short(lookup):
    assert reason_of(binding(""), lookup) == "excerpt_too_short"
    assert reason_of(binding(" \n\t "), lookup) == "excerpt_too_short"


def test_cjk_characters_count_double_towards_the_minimum_length():
    lookup = InMemoryLookup([record("inv-00000001", logs_result("支付服务数据库连接池耗尽"))])
    assert reason_of(binding("数据库连接池耗尽"), lookup) == "verified"  # 8 CJK chars weigh 16
    assert reason_of(binding("连接池耗尽"), lookup) == "excerpt_too_short"  # 5 CJK chars weigh 10


def test_an_excerpt_that_is_not_in_the_cited_value_is_excerpt_mismatch(lookup):
    assert reason_of(binding("Connection pool is healthy"), lookup) == "excerpt_mismatch"


def test_an_excerpt_present_elsewhere_in_the_result_but_not_at_raw_path_is_excerpt_mismatch(lookup):
    b = binding("GET /api/v1/pay 500", raw_path="$.records[0].message")
    assert reason_of(b, lookup) == "excerpt_mismatch"


def test_matching_is_case_sensitive(lookup):
    assert reason_of(binding("connection is not available"), lookup) == "excerpt_mismatch"


def test_whitespace_is_normalised_on_both_sides():
    lookup = InMemoryLookup([record("inv-00000001", logs_result("pool   exhausted:\n\twaiting  threads=48"))])
    assert reason_of(binding("pool exhausted: waiting threads=48"), lookup) == "verified"
    assert reason_of(binding("  pool\u00a0exhausted:\n waiting\r\nthreads=48  "), lookup) == "verified"
    assert reason_of(binding("poolexhausted: waiting"), lookup) == "excerpt_mismatch"


def test_a_number_is_matched_against_its_string_form(lookup):
    b = binding("50.0", invocation_id="inv-00000002", tool_name="query_metrics", raw_path="$.series[0].stats.max")
    assert reason_of(b, lookup, min_excerpt_chars=4) == "verified"


def test_an_object_is_matched_against_its_json_text(lookup):
    b = binding('"level": "ERROR"', raw_path="$.records[0]")
    assert reason_of(b, lookup) == "verified"
    b = binding('{"__name__": "db_pool_active_connections", "service": "payment-service"}',
                invocation_id="inv-00000002", tool_name="query_metrics", raw_path="$.series[0].labels")
    assert reason_of(b, lookup) == "verified"


def test_a_message_quoted_verbatim_matches_when_citing_the_whole_record():
    message = 'upstream said "503 Service Unavailable"\nretrying'
    lookup = InMemoryLookup([record("inv-00000001", logs_result(message))])
    assert reason_of(binding('said "503 Service Unavailable" retrying', raw_path="$.records[0]"), lookup) == "verified"
    assert reason_of(binding('said "503 Service Unavailable" retrying', raw_path="$"), lookup) == "verified"


def test_an_excerpt_cannot_span_two_string_values_of_a_cited_object():
    lookup = InMemoryLookup([record("inv-00000001", {"a": 'x"y first part', "b": "second part"})])
    assert reason_of(binding('first part second part', raw_path="$"), lookup) == "excerpt_mismatch"


def test_bracket_and_dunder_paths_resolve(lookup):
    b = binding("db_pool_active_connections", invocation_id="inv-00000002", tool_name="query_metrics",
                raw_path='$.series[0]["labels"].__name__')
    assert reason_of(b, lookup) == "verified"


def test_a_truncated_stored_result_is_checked_as_stored():
    stored = {**logs_result("first line is kept"), "truncated": True}
    lookup = InMemoryLookup([record("inv-00000001", stored)])
    assert reason_of(binding("first line is kept"), lookup) == "verified"
    assert reason_of(binding("first line is kept", raw_path="$.records[1].message"), lookup) == "path_not_found"


@pytest.mark.parametrize("bad", [
    "not a dict",
    None,
    {"tool_name": "query_logs", "raw_path": "$", "evidence_excerpt": "Connection is not available"},
    binding(["Connection is not available"]),  # non-string excerpt
    {**binding("Connection is not available"), "source_invocation_id": 7},
    {**binding("Connection is not available"), "raw_path": ""},
    {**binding("Connection is not available"), "tool_name": None},
])
def test_a_malformed_binding_is_malformed_binding_and_never_raises(lookup, bad):
    result = verify(executor_output(claim("c1", bad)), lookup)
    assert result.claims[0].bindings[0].reason_code == "malformed_binding"
    assert result.verdict == Verdict.REJECT
    json.dumps(result.to_dict())


@pytest.mark.parametrize("output", [
    None, "claims", 42, [], {"version": "executor_evidence_v2", "claims": "c1"},
    {"version": "executor_evidence_v2", "claims": {"c1": {}}}, {"version": "executor_evidence_v2"},
])
def test_a_malformed_executor_output_is_rejected_without_raising(lookup, output):
    result = verify(output, lookup)
    assert result.verdict == Verdict.REJECT
    assert result.reason_code == OutcomeReason.MALFORMED_OUTPUT
    assert result.total_claim_count == 0
    assert lookup.calls == []


def test_an_output_of_another_version_is_rejected(lookup):
    output = {**executor_output(claim("c1", binding("Connection is not available"))), "version": "executor_evidence_v1"}
    result = verify(output, lookup)
    assert (result.verdict, result.reason_code) == (Verdict.REJECT, OutcomeReason.UNSUPPORTED_VERSION)


@pytest.mark.parametrize("bad_claim", [
    "c1",
    {"claim_id": "c1", "statement": "x", "evidence": "inv-00000001"},
    {"claim_id": "", "statement": "pool exhausted", "evidence": [binding("Connection is not available")]},
    {"claim_id": "c1", "statement": None, "evidence": [binding("Connection is not available")]},
    {"claim_id": ["c1"], "statement": "pool exhausted", "evidence": [binding("Connection is not available")]},
])
def test_a_malformed_claim_is_never_verified_even_with_a_good_binding(lookup, bad_claim):
    result = verify(executor_output(bad_claim, claim("c2", binding("Connection is not available"))), lookup)
    bad, good = result.claims
    assert bad.verified is False and bad.reason_code == ClaimReason.MALFORMED_CLAIM
    assert all(b.reason_code == "malformed_claim" and not b.verified for b in bad.bindings)
    assert good.verified is True
    assert result.verdict == Verdict.LOW_CONFID
    json.dumps(result.to_dict())


def test_a_repeated_claim_id_is_not_verified_twice(lookup):
    good = binding("Connection is not available")
    result = verify(executor_output(claim("c1", good), claim("c1", good, statement="again")), lookup)
    assert [c.reason_code for c in result.claims] == ["verified", "duplicate_claim_id"]
    assert result.verdict == Verdict.LOW_CONFID


def test_all_claims_verified_is_pass(lookup):
    output = executor_output(
        claim("c1", binding("Connection is not available")),
        claim("c2", binding("max 50 at 10:01, baseline 12", invocation_id="inv-00000002", tool_name="query_metrics",
                            raw_path="$.series[0].description")),
    )
    result = verify(output, lookup)
    assert result.verdict == Verdict.PASS
    assert result.verdict_ceiling == Verdict.PASS
    assert result.reason_code == OutcomeReason.ALL_CLAIMS_VERIFIED
    assert (result.verified_claim_count, result.total_claim_count) == (2, 2)
    assert result.citation_validity == 1.0


def test_some_claims_verified_is_low_confid(lookup):
    output = executor_output(
        claim("c1", binding("Connection is not available"), binding("fabricated line", raw_path="$.records[1].message")),
        claim("c2", binding("disk full on node-3")),
    )
    result = verify(output, lookup)
    assert result.verdict == result.verdict_ceiling == Verdict.LOW_CONFID
    assert result.reason_code == OutcomeReason.SOME_CLAIMS_VERIFIED
    assert (result.verified_binding_count, result.total_binding_count) == (1, 3)
    assert (result.verified_claim_count, result.total_claim_count) == (1, 2)
    assert result.citation_validity == pytest.approx(1 / 3)


def test_a_claim_is_verified_when_at_least_one_binding_is(lookup):
    output = executor_output(claim("c1", binding("disk full on node-3"), binding("Connection is not available")))
    result = verify(output, lookup)
    assert result.claims[0].verified is True
    assert [b.verified for b in result.claims[0].bindings] == [False, True]


def test_no_claim_verified_is_reject(lookup):
    result = verify(executor_output(claim("c1", binding("disk full on node-3"))), lookup)
    assert result.verdict == Verdict.REJECT
    assert result.reason_code == OutcomeReason.NO_CLAIM_VERIFIED
    assert result.citation_validity == 0.0


def test_no_claims_is_reject(lookup):
    result = verify(executor_output(), lookup)
    assert (result.verdict, result.reason_code) == (Verdict.REJECT, OutcomeReason.NO_CLAIMS)
    assert result.citation_validity == 0.0
    assert result.total_binding_count == 0


def test_a_claim_without_bindings_is_not_verified(lookup):
    result = verify(executor_output(claim("c1"), claim("c2", binding("Connection is not available"))), lookup)
    assert result.claims[0].reason_code == ClaimReason.NO_BINDINGS
    assert result.verdict == Verdict.LOW_CONFID


def test_all_invocations_are_fetched_in_one_batch(lookup):
    output = executor_output(
        claim("c1", binding("Connection is not available"), binding("xx", invocation_id="inv-00000009")),
        claim("c2", binding("max 50 at 10:01", invocation_id="inv-00000002", tool_name="query_metrics",
                            raw_path="$.series[0].description")),
        claim("c3", binding("Connection is not available")),
    )
    verify(output, lookup)
    assert len(lookup.calls) == 1
    assert sorted(lookup.calls[0]) == ["inv-00000001", "inv-00000002", "inv-00000009"]


def test_the_result_serialises_to_json_and_back(lookup):
    output = executor_output(claim("c1", binding("Connection is not available"), binding("nope, not there")))
    result = verify(output, lookup)
    stored = json.loads(json.dumps(result.to_dict()))
    assert stored["version"] == GATEKEEPER_VERSION
    assert stored["run_id"] == RUN_ID
    assert stored["audit"] == [{
        "claim_id": "c1",
        "statement": "payment-service DB pool exhausted",
        "verified": True,
        "reason_code": "verified",
        "bindings": [
            {**binding("Connection is not available"), "verified": True, "reason_code": "verified"},
            {**binding("nope, not there"), "verified": False, "reason_code": "excerpt_mismatch"},
        ],
    }]
    assert set(stored) == {
        "version", "run_id", "verdict", "verdict_ceiling", "reason_code", "verified_binding_count",
        "total_binding_count", "verified_claim_count", "total_claim_count", "citation_validity", "audit",
    }
    assert GatekeeperResult.from_dict(stored) == result


def test_from_dict_refuses_something_that_is_not_a_stored_result():
    with pytest.raises(ValueError):
        GatekeeperResult.from_dict({"verdict": "PASS"})


def test_an_empty_run_id_is_a_programming_error(lookup):
    with pytest.raises(ValueError):
        verify_bindings(executor_output=executor_output(), run_id="", lookup=lookup)


def test_the_default_minimum_excerpt_length_is_documented():
    assert DEFAULT_MIN_EXCERPT_CHARS == 12


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
BINDINGS = st.fixed_dictionaries(
    {},
    optional={
        "source_invocation_id": st.sampled_from(["inv-00000001", "inv-00000003", "inv-00000009", "inv-x"]) | JSON_VALUES,
        "tool_name": st.sampled_from(["query_logs", "query_metrics"]) | JSON_VALUES,
        "raw_path": st.sampled_from(["$", "$.records[0].message", "$.records", "$..x"]) | st.text(max_size=12),
        "evidence_excerpt": st.sampled_from(["Connection is not available", "H"]) | JSON_VALUES,
    },
) | JSON_VALUES
CLAIMS = st.fixed_dictionaries(
    {},
    optional={"claim_id": st.sampled_from(["c1", "c2"]) | JSON_VALUES, "statement": JSON_VALUES,
              "evidence": st.lists(BINDINGS, max_size=3) | JSON_VALUES},
) | JSON_VALUES
OUTPUTS = st.fixed_dictionaries(
    {"version": st.just("executor_evidence_v2")},
    optional={"claims": st.lists(CLAIMS, max_size=4) | JSON_VALUES, "summary": JSON_VALUES},
) | JSON_VALUES


@settings(max_examples=examples(300), deadline=None)
@given(OUTPUTS)
def test_no_executor_output_makes_the_gatekeeper_raise_and_counts_stay_consistent(output):
    lookup = InMemoryLookup([
        record("inv-00000001", logs_result(HIKARI)),
        record("inv-00000003", {"error": "x"}, status="ERROR"),
        record("inv-00000009", logs_result(HIKARI), run_id=OTHER_RUN_ID),
    ])
    result = verify(output, lookup)
    stored = json.loads(json.dumps(result.to_dict()))
    assert result.verdict in set(Verdict)
    assert 0 <= result.verified_binding_count <= result.total_binding_count
    assert result.total_claim_count == len(stored["audit"])
    for c in result.claims:
        for b in c.bindings:
            if b.verified:
                assert (b.source_invocation_id, b.tool_name) == ("inv-00000001", "query_logs")
                assert " ".join(b.evidence_excerpt.split()) in HIKARI
    verified_output, evidence = project_verified_input(executor_output=output, gatekeeper_result=result)
    assert len(evidence) == result.verified_binding_count
    assert len(verified_output["claims"]) == result.verified_claim_count


@pytest.mark.parametrize("statement", [["a", "list"], {"an": "object"}, ["Connection is not available"]])
def test_a_claim_whose_statement_is_not_text_is_malformed_and_projection_does_not_crash(lookup, statement):
    output = {"version": "executor_evidence_v2", "claims": [
        {"claim_id": "c1", "statement": statement, "evidence": [
            {"source_invocation_id": "inv-00000001", "tool_name": "query_logs", "raw_path": "$.records[0].message",
             "evidence_excerpt": "Connection is not available"}]},
    ]}
    result = verify_bindings(executor_output=output, run_id=RUN_ID, lookup=lookup)
    assert result.verdict == Verdict.REJECT and result.claims[0].reason_code == "malformed_claim"
    verified_output, evidence = project_verified_input(executor_output=output, gatekeeper_result=result)
    assert verified_output["claims"] == [] and evidence == []


def test_a_common_eleven_character_excerpt_is_too_short_and_twelve_is_enough():
    lookup = InMemoryLookup([record("inv-00000001", logs_result("upstream too many requests from gateway"))])
    assert reason_of(binding("too many re"), lookup) == "excerpt_too_short"
    assert reason_of(binding("too many requests"), lookup) == "verified"


def test_an_excerpt_must_begin_and_end_on_token_boundaries():
    lookup = InMemoryLookup([record("inv-00000001", logs_result("upstream too many requests from gateway"))])
    assert reason_of(binding("stream too many"), lookup) == "excerpt_mismatch"
    assert reason_of(binding("too many requests fr"), lookup) == "excerpt_mismatch"
    assert reason_of(binding("upstream too many"), lookup) == "verified"


def test_a_path_into_the_request_part_is_path_not_evidence():
    result = {"request": {"arguments": {"query": "database is on fire tonight"}, "query": "database is on fire tonight"},
              "records": [{"message": "all good here, nothing to see"}]}
    lookup = InMemoryLookup([record("inv-00000001", result)])
    assert reason_of(binding("database is on fire tonight", raw_path="$.request.query"), lookup) == "path_not_evidence"
    assert reason_of(binding("database is on fire tonight", raw_path="$.request"), lookup) == "path_not_evidence"
    assert reason_of(binding("database is on fire tonight", raw_path="$['request']['arguments']"), lookup) == "path_not_evidence"
    # The whole result cannot smuggle the request in either: citations resolve against the observed part.
    assert reason_of(binding("database is on fire tonight", raw_path="$"), lookup) == "excerpt_mismatch"
    assert reason_of(binding("all good here, nothing", raw_path="$"), lookup) == "verified"


def test_an_excerpt_that_repeats_the_question_or_a_tool_argument_is_excerpt_echoes_input():
    lookup = InMemoryLookup([record("inv-00000001", logs_result("payment-service checkout failed with HTTP 500"))])
    b = binding("payment-service checkout failed")
    assert reason_of(b, lookup) == "verified"
    assert reason_of(b, lookup, echo_sources=["Why has PAYMENT-SERVICE  checkout failed?"]) == "excerpt_echoes_input"
    assert reason_of(b, lookup, echo_sources=["payment-service checkout\u200b failed"]) == "excerpt_echoes_input"
    assert reason_of(b, lookup, echo_sources=["something else entirely"]) == "verified"


def test_every_binding_reason_has_its_help_line_in_the_console():
    from traces.run_detail import REASON_HELP

    assert set(REASON_HELP) == {str(r) for r in BindingReason}
    assert "rank_root_causes" in REASON_HELP[BindingReason.RANKING_NOT_EVIDENCE]
