"""Whatever the nodes report, a diagnosis run ends at END through composer or fallback, within bounds."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hypo import examples
from diagnosis.graph.state import DIAGNOSIS_RECURSION_LIMIT
from diagnosis.graph.state import NodeName as N
from diagnosis.graph.state import NodeStatus as S
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import build_diagnosis_graph

from .fake_nodes import GAP, ScriptedPorts, composer, executor, gatekeeper, planner, run_diagnosis, verifier

ANY_STATUS = st.sampled_from(
    [S.COMPLETED, S.INVALID_OUTPUT, S.RETRYABLE_FAILED, S.NON_RETRYABLE_FAILED, S.TOOL_BLOCKED, S.FAILED, None, "BOGUS"]
)
# one_of picks its branches about evenly: the plain success branches make deep runs common.
STATUSES = st.one_of(st.just(S.COMPLETED), st.just(S.COMPLETED), ANY_STATUS)
VERDICTS = st.sampled_from(["PASS", "LOW_CONFID", "REJECT", None, "MAYBE"])
BINDINGS = st.sampled_from([1, 3, 0, None, True])
GAPS = st.sampled_from([[GAP], [GAP, "second gap"], None, [], ["  "]])


def scripts(outputs):
    return st.lists(outputs, min_size=1, max_size=6)


RUN_SCRIPTS = st.fixed_dictionaries(
    {
        "planner": scripts(STATUSES.map(planner)),
        "executor": scripts(STATUSES.map(executor)),
        "gatekeeper": scripts(st.one_of(st.just(gatekeeper()), st.builds(gatekeeper, VERDICTS, BINDINGS))),
        "verifier": scripts(
            st.one_of(
                st.just(verifier(verdict="LOW_CONFID", gaps=[GAP])),
                st.just(verifier()),
                st.builds(verifier, STATUSES, VERDICTS, GAPS),
            )
        ),
        "composer": scripts(STATUSES.map(composer)),
    }
)

EDGES = {
    (edge["source"], edge["target"])
    for edge in build_diagnosis_graph(ScriptedPorts.with_scripts().nodes()).describe()["edges"]
}
LONGEST_LEGAL_RUN = 17
FALLBACK_REASONS = {
    "retry_exhausted", "non_retryable_failed", "tool_blocked", "failed", "missing_status", "unknown_status",
    "no_verified_binding", "gatekeeper_reject", "unknown_verdict",
}


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RUN_SCRIPTS)
def test_any_sequence_of_node_outcomes_ends_at_end_through_composer_or_fallback(run_scripts):
    run = run_diagnosis(**run_scripts)

    assert run.visited[-1] in (N.COMPOSER, N.FALLBACK)
    assert len(run.visited) <= LONGEST_LEGAL_RUN < DIAGNOSIS_RECURSION_LIMIT
    assert run.state[K.FINAL_ANSWER]
    if run.visited[-1] == N.FALLBACK:
        assert run.state[K.DEGRADED] is True
        assert run.trace["termination_reason"] == "fallback_completed"
    else:
        assert run.state[K.COMPOSER_STATUS] == S.COMPLETED
        assert run.state[K.DEGRADED] is False
        assert run.trace["termination_reason"] == "composer_completed"


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RUN_SCRIPTS)
def test_the_trace_transitions_match_the_nodes_actually_visited(run_scripts):
    run = run_diagnosis(**run_scripts)

    transitions = run.trace["transitions"]
    assert [t["from"] for t in transitions] == run.visited
    assert [t["to"] for t in transitions] == run.visited[1:] + ["END"]
    assert len(run.state[K.ORCHESTRATION_EVENTS]) == len(run.visited)
    assert run.trace["final_node"] == run.visited[-1]
    for t in transitions:
        assert (t["from"], "__end__" if t["to"] == "END" else t["to"]) in EDGES
        assert t["attempt"] in (1, 2)
        # The executor is never retried, so its invalid_output is a fallback reason too.
        executor_invalid = (t["from"], t["reason_code"]) == (N.EXECUTOR, "invalid_output")
        assert (t["to"] == N.FALLBACK) == (t["reason_code"] in FALLBACK_REASONS or executor_invalid), t


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RUN_SCRIPTS)
def test_retry_budgets_hold_in_every_run(run_scripts):
    run = run_diagnosis(**run_scripts)

    calls = run.ports.count
    phases = 1 + calls(N.EVIDENCE_RETRY)
    assert calls(N.EVIDENCE_RETRY) <= 1
    assert calls(N.EXECUTOR) <= phases
    assert calls(N.GATEKEEPER) <= phases
    assert calls(N.PLANNER) <= 2 * phases
    assert calls(N.VERIFIER) <= 2 * phases and calls(N.VERIFIER) <= 3
    assert calls(N.COMPOSER) <= 2
    assert calls(N.FALLBACK) <= 1
    assert run.trace["evidence_retry_count"] == calls(N.EVIDENCE_RETRY)


def test_the_longest_legal_run_takes_seventeen_steps():
    run = run_diagnosis(
        planner=[planner(S.INVALID_OUTPUT), planner(), planner(S.RETRYABLE_FAILED), planner()],
        verifier=[verifier(S.RETRYABLE_FAILED), verifier(verdict="LOW_CONFID", gaps=[GAP]), verifier()],
        composer=[composer(S.INVALID_OUTPUT), composer(S.INVALID_OUTPUT)],
    )

    assert len(run.visited) == LONGEST_LEGAL_RUN
    assert run.visited == [
        "planner", "planner", "executor", "gatekeeper", "verified_input", "verifier", "verifier", "evidence_retry",
        "planner", "planner", "executor", "gatekeeper", "verified_input", "verifier", "composer", "composer",
        "fallback",
    ]
    assert run.trace["termination_reason"] == "fallback_completed"
