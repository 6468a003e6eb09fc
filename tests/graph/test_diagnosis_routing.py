"""The diagnosis topology routes exactly as SPEC §3 says, run on the real compiled graph with fake ports."""

import pytest

from diagnosis.graph.state import NodeName as N
from diagnosis.graph.state import NodeStatus as S
from diagnosis.graph.state import PlannerMode
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import FALLBACK_SAFETY_ANSWER

from .fake_nodes import GAP, composer, executor, gatekeeper, planner, run_diagnosis, verifier

TECHNICAL = [S.INVALID_OUTPUT, S.RETRYABLE_FAILED]
REASON = {S.INVALID_OUTPUT: "invalid_output", S.RETRYABLE_FAILED: "retryable_failed"}

HAPPY_ROUTE = [
    ("planner", "executor", "completed", 1),
    ("executor", "gatekeeper", "completed", 1),
    ("gatekeeper", "verified_input", "gatekeeper_pass", 1),
    ("verified_input", "verifier", "completed", 1),
    ("verifier", "composer", "verdict_pass", 1),
    ("composer", "END", "completed", 1),
]


def assert_fell_back(run):
    assert run.visited[-1] == N.FALLBACK
    assert run.state[K.DEGRADED] is True
    assert run.state[K.FINAL_ANSWER]
    assert run.route[-1] == ("fallback", "END", "fallback_completed", 1)
    assert run.trace["final_node"] == "fallback"
    assert run.trace["termination_reason"] == "fallback_completed"
    assert run.trace["degraded"] is True


# --------------------------------------------------------------------------- normal path


def test_the_pass_path_runs_every_stage_once_and_ends_after_the_composer():
    run = run_diagnosis()

    assert run.visited == ["planner", "executor", "gatekeeper", "verified_input", "verifier", "composer"]
    assert run.route == HAPPY_ROUTE
    assert run.trace == {
        "version": "stategraph-v1",
        "transitions": [
            {"from": f, "to": t, "reason_code": r, "attempt": a} for f, t, r, a in HAPPY_ROUTE
        ],
        "final_node": "composer",
        "termination_reason": "composer_completed",
        "degraded": False,
        "evidence_retry_count": 0,
    }
    assert run.state[K.FINAL_ANSWER].startswith("payment-service")
    assert run.state[K.EFFECTIVE_VERDICT] == "PASS"
    assert run.state[K.VERDICT_CEILING] == "PASS"


def test_every_port_receives_the_run_config_with_thread_and_metadata():
    run = run_diagnosis()

    assert {c.thread_id for c in run.ports.configs} == {"run-" + "a" * 32}
    assert all(c.metadata == {"session_id": "s-test", "run_id": "run-" + "a" * 32} for c in run.ports.configs)


# --------------------------------------------------------------------------- planner


@pytest.mark.parametrize("failure", TECHNICAL)
def test_the_planner_is_retried_once_after_a_technical_failure_and_then_continues(failure):
    run = run_diagnosis(planner=[planner(failure), planner()])

    assert run.ports.count(N.PLANNER) == 2
    assert run.route[:2] == [
        ("planner", "planner", REASON[failure], 1),
        ("planner", "executor", "completed", 2),
    ]
    assert run.route[2:] == HAPPY_ROUTE[1:]
    assert run.state[K.PLANNER_RETRY_COUNT] == 1
    assert run.trace["termination_reason"] == "composer_completed"


@pytest.mark.parametrize("first", TECHNICAL)
@pytest.mark.parametrize("second", TECHNICAL)
def test_a_second_planner_failure_goes_to_fallback(first, second):
    run = run_diagnosis(planner=[planner(first), planner(second)])

    assert run.route == [
        ("planner", "planner", REASON[first], 1),
        ("planner", "fallback", "retry_exhausted", 2),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert_fell_back(run)
    assert run.ports.count(N.EXECUTOR) == 0


def test_a_non_retryable_planner_failure_goes_straight_to_fallback():
    run = run_diagnosis(planner=[planner(S.NON_RETRYABLE_FAILED)])

    assert run.route == [
        ("planner", "fallback", "non_retryable_failed", 1),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert run.ports.count(N.PLANNER) == 1
    assert_fell_back(run)


def test_the_planner_port_sees_its_second_attempt_in_the_retry_counter():
    run = run_diagnosis(planner=[planner(S.INVALID_OUTPUT), planner()])

    first, second = run.ports.seen[N.PLANNER]
    assert first[K.PLANNER_RETRY_COUNT] == 0
    assert second[K.PLANNER_RETRY_COUNT] == 1


# --------------------------------------------------------------------------- executor


def test_a_completed_executor_hands_over_to_the_gatekeeper():
    run = run_diagnosis()

    assert ("executor", "gatekeeper", "completed", 1) in run.route


@pytest.mark.parametrize(
    "status, reason",
    [(S.INVALID_OUTPUT, "invalid_output"), (S.TOOL_BLOCKED, "tool_blocked"), (S.FAILED, "failed")],
)
def test_an_executor_failure_goes_to_fallback_and_the_executor_is_never_called_twice(status, reason):
    run = run_diagnosis(executor=[executor(status), executor()])

    assert run.route == [
        ("planner", "executor", "completed", 1),
        ("executor", "fallback", reason, 1),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert run.ports.count(N.EXECUTOR) == 1
    assert run.ports.count(N.GATEKEEPER) == 0
    assert_fell_back(run)


# --------------------------------------------------------------------------- gatekeeper


def test_a_gatekeeper_pass_goes_to_verified_input():
    run = run_diagnosis(gatekeeper=[gatekeeper("PASS", 3)])

    assert ("gatekeeper", "verified_input", "gatekeeper_pass", 1) in run.route
    assert run.trace["termination_reason"] == "composer_completed"


def test_a_low_confidence_gatekeeper_with_a_verified_binding_goes_to_verified_input():
    run = run_diagnosis(gatekeeper=[gatekeeper("LOW_CONFID", 1)], verifier=[verifier(verdict="PASS")])

    assert ("gatekeeper", "verified_input", "gatekeeper_low_confid", 1) in run.route
    assert run.state[K.VERDICT_CEILING] == "LOW_CONFID"
    # The ceiling caps the verifier's PASS.
    assert run.state[K.EFFECTIVE_VERDICT] == "LOW_CONFID"
    assert ("verifier", "composer", "ceiling_below_pass", 1) in run.route


@pytest.mark.parametrize(
    "result, reason",
    [
        (gatekeeper("LOW_CONFID", 0), "no_verified_binding"),
        (gatekeeper("LOW_CONFID", None), "no_verified_binding"),
        (gatekeeper("LOW_CONFID", True), "no_verified_binding"),
        (gatekeeper("REJECT", 0), "gatekeeper_reject"),
        (gatekeeper("MAYBE", 4), "unknown_status"),
        (gatekeeper(None, 4), "missing_status"),
        ({K.GATEKEEPER_RESULT: None}, "missing_status"),
        ({K.GATEKEEPER_RESULT: "PASS"}, "missing_status"),
        (None, "missing_status"),
    ],
)
def test_a_gatekeeper_without_verified_evidence_goes_to_fallback(result, reason):
    run = run_diagnosis(gatekeeper=[result])

    assert run.route == [
        ("planner", "executor", "completed", 1),
        ("executor", "gatekeeper", "completed", 1),
        ("gatekeeper", "fallback", reason, 1),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert run.ports.count(N.VERIFIER) == 0
    assert_fell_back(run)


# --------------------------------------------------------------------------- verifier


@pytest.mark.parametrize("failure", TECHNICAL)
def test_the_verifier_is_retried_once_after_a_technical_failure(failure):
    run = run_diagnosis(verifier=[verifier(failure), verifier()])

    assert run.route[4:] == [
        ("verifier", "verifier", REASON[failure], 1),
        ("verifier", "composer", "verdict_pass", 2),
        ("composer", "END", "completed", 1),
    ]
    assert run.state[K.VERIFIER_RETRY_COUNT] == 1


@pytest.mark.parametrize("failure", TECHNICAL)
def test_a_second_verifier_failure_goes_to_fallback(failure):
    run = run_diagnosis(verifier=[verifier(failure)])

    assert run.route[4:] == [
        ("verifier", "verifier", REASON[failure], 1),
        ("verifier", "fallback", "retry_exhausted", 2),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert run.ports.count(N.COMPOSER) == 0
    assert_fell_back(run)


def test_a_non_retryable_verifier_failure_goes_to_fallback():
    run = run_diagnosis(verifier=[verifier(S.NON_RETRYABLE_FAILED)])

    assert run.route[4:] == [
        ("verifier", "fallback", "non_retryable_failed", 1),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert run.ports.count(N.VERIFIER) == 1


@pytest.mark.parametrize("verdict, reason", [("PASS", "verdict_pass"), ("REJECT", "verdict_reject")])
def test_a_pass_or_reject_verdict_goes_to_the_composer(verdict, reason):
    run = run_diagnosis(verifier=[verifier(verdict=verdict, gaps=[GAP])])

    assert run.route[4:] == [("verifier", "composer", reason, 1), ("composer", "END", "completed", 1)]
    assert run.state[K.EFFECTIVE_VERDICT] == verdict
    assert run.ports.count(N.EVIDENCE_RETRY) == 0


def test_a_completed_verifier_without_a_readable_verdict_fails_closed():
    run = run_diagnosis(verifier=[verifier(verdict="GOOD")])

    assert run.route[4] == ("verifier", "fallback", "unknown_verdict", 1)
    assert_fell_back(run)


def test_a_low_confidence_verdict_with_every_guard_met_retries_for_evidence_exactly_once():
    run = run_diagnosis(
        planner=[planner(S.INVALID_OUTPUT), planner()],
        verifier=[verifier(verdict="LOW_CONFID", gaps=[GAP])],
        composer=[composer(S.RETRYABLE_FAILED), composer()],
    )

    assert run.route == [
        ("planner", "planner", "invalid_output", 1),
        ("planner", "executor", "completed", 2),
        ("executor", "gatekeeper", "completed", 1),
        ("gatekeeper", "verified_input", "gatekeeper_pass", 1),
        ("verified_input", "verifier", "completed", 1),
        ("verifier", "evidence_retry", "evidence_gap", 1),
        ("evidence_retry", "planner", "evidence_gap_only", 1),
        ("planner", "executor", "completed", 1),
        ("executor", "gatekeeper", "completed", 1),
        ("gatekeeper", "verified_input", "gatekeeper_pass", 1),
        ("verified_input", "verifier", "completed", 1),
        ("verifier", "composer", "evidence_retry_exhausted", 1),
        ("composer", "composer", "retryable_failed", 1),
        ("composer", "END", "completed", 2),
    ]
    assert run.trace["evidence_retry_count"] == 1
    assert run.trace["termination_reason"] == "composer_completed"
    assert run.ports.count(N.EVIDENCE_RETRY) == 1


def test_the_evidence_retry_restarts_the_planner_in_gap_only_mode_with_a_fresh_retry_budget():
    run = run_diagnosis(
        planner=[planner(S.INVALID_OUTPUT), planner()],
        verifier=[verifier(S.RETRYABLE_FAILED), verifier(verdict="LOW_CONFID", gaps=[GAP]), verifier()],
        composer=[composer(S.INVALID_OUTPUT), composer()],
    )

    before, after = run.ports.seen[N.PLANNER][1], run.ports.seen[N.PLANNER][2]
    assert before[K.PLANNER_MODE] == PlannerMode.NORMAL
    assert after[K.PLANNER_MODE] == PlannerMode.EVIDENCE_GAP_ONLY
    assert before[K.PLANNER_RETRY_COUNT] == 1
    assert after[K.PLANNER_RETRY_COUNT] == 0
    assert after[K.EVIDENCE_RETRY_COUNT] == 1
    # Other counters are untouched by the evidence retry.
    assert after[K.VERIFIER_RETRY_COUNT] == 1
    assert after[K.COMPOSER_RETRY_COUNT] == 0
    assert after[K.RETRY_CONTEXT] == {"critical_evidence_gaps": [GAP], "previous_verdict": "LOW_CONFID"}
    assert run.state[K.COMPOSER_RETRY_COUNT] == 1
    assert run.trace["termination_reason"] == "composer_completed"


def test_the_gap_only_planner_gets_its_own_technical_retry():
    run = run_diagnosis(
        planner=[planner(), planner(S.RETRYABLE_FAILED), planner()],
        verifier=[verifier(verdict="LOW_CONFID", gaps=[GAP]), verifier()],
    )

    assert ("evidence_retry", "planner", "evidence_gap_only", 1) in run.route
    assert ("planner", "planner", "retryable_failed", 1) in run.route
    assert run.trace["termination_reason"] == "composer_completed"
    assert run.ports.count(N.PLANNER) == 3


def test_a_verifier_technical_retry_used_before_the_evidence_retry_is_not_given_again():
    run = run_diagnosis(
        verifier=[verifier(S.INVALID_OUTPUT), verifier(verdict="LOW_CONFID", gaps=[GAP]), verifier(S.INVALID_OUTPUT)],
    )

    assert run.route[-2:] == [
        ("verifier", "fallback", "retry_exhausted", 2),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert run.state[K.EVIDENCE_RETRY_COUNT] == 1


def test_a_low_confidence_verdict_after_the_evidence_retry_goes_to_the_composer():
    # Every LOW_CONFID carries a gap, so only evidence_retry_count < 1 stops a second retry.
    run = run_diagnosis(verifier=[verifier(verdict="LOW_CONFID", gaps=[GAP])])

    assert run.ports.count(N.EVIDENCE_RETRY) == 1
    assert run.ports.count(N.VERIFIER) == 2
    assert run.route[-2:] == [
        ("verifier", "composer", "evidence_retry_exhausted", 1),
        ("composer", "END", "completed", 1),
    ]
    assert run.trace["evidence_retry_count"] == 1


@pytest.mark.parametrize(
    "scripts, reason",
    [
        pytest.param(
            {"gatekeeper": [gatekeeper("LOW_CONFID", 1)], "verifier": [verifier(verdict="LOW_CONFID", gaps=[GAP])]},
            "ceiling_below_pass",
            id="the ceiling no longer allows PASS",
        ),
        pytest.param(
            {"gatekeeper": [gatekeeper("LOW_CONFID", 1)], "verifier": [verifier(verdict="PASS", gaps=[GAP])]},
            "ceiling_below_pass",
            id="a PASS capped to LOW_CONFID by the ceiling",
        ),
        pytest.param(
            {"verifier": [verifier(verdict="LOW_CONFID")]}, "no_critical_gap", id="the gap list is missing"
        ),
        pytest.param(
            {"verifier": [verifier(verdict="LOW_CONFID", gaps=[])]}, "no_critical_gap", id="the gap list is empty"
        ),
        pytest.param(
            {"verifier": [verifier(verdict="LOW_CONFID", gaps=["  ", {"gap": ""}, 7])]},
            "no_critical_gap",
            id="no gap is extractable",
        ),
    ],
)
def test_a_low_confidence_verdict_missing_a_guard_goes_to_the_composer(scripts, reason):
    run = run_diagnosis(**scripts)

    assert run.route[4:] == [("verifier", "composer", reason, 1), ("composer", "END", "completed", 1)]
    assert run.ports.count(N.EVIDENCE_RETRY) == 0
    assert run.state[K.EFFECTIVE_VERDICT] == "LOW_CONFID"
    assert run.trace["evidence_retry_count"] == 0


# --------------------------------------------------------------------------- composer


@pytest.mark.parametrize("failure", TECHNICAL)
def test_the_composer_is_retried_once_after_a_technical_failure(failure):
    run = run_diagnosis(composer=[composer(failure), composer()])

    assert run.route[5:] == [
        ("composer", "composer", REASON[failure], 1),
        ("composer", "END", "completed", 2),
    ]
    assert run.state[K.DEGRADED] is False


@pytest.mark.parametrize("failure", TECHNICAL)
def test_an_exhausted_composer_goes_to_fallback(failure):
    run = run_diagnosis(composer=[composer(failure)])

    assert run.route[5:] == [
        ("composer", "composer", REASON[failure], 1),
        ("composer", "fallback", "retry_exhausted", 2),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert_fell_back(run)


def test_a_non_retryable_composer_failure_goes_to_fallback():
    run = run_diagnosis(composer=[composer(S.NON_RETRYABLE_FAILED)])

    assert run.route[5:] == [
        ("composer", "fallback", "non_retryable_failed", 1),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert run.ports.count(N.COMPOSER) == 1
    assert_fell_back(run)


# --------------------------------------------------------------------------- fallback


def test_the_fallback_marks_the_run_degraded_keeps_its_answer_and_ends():
    run = run_diagnosis(executor=[executor(S.FAILED)])

    assert run.state[K.FINAL_ANSWER] == "Fallback: nothing could be verified; check the runbook."
    assert run.visited == ["planner", "executor", "fallback"]
    assert_fell_back(run)


@pytest.mark.parametrize("answer", [None, "", "   ", 42])
def test_a_fallback_port_without_an_answer_still_ends_with_a_safe_one(answer):
    run = run_diagnosis(executor=[executor(S.FAILED)], fallback=[{K.FINAL_ANSWER: answer}])

    assert run.state[K.FINAL_ANSWER] == FALLBACK_SAFETY_ANSWER
    assert_fell_back(run)


def test_the_fallback_port_can_read_why_it_was_reached():
    from diagnosis.graph.topology import last_event

    reasons = []
    run = run_diagnosis(
        executor=[executor(S.TOOL_BLOCKED)],
        fallback=[lambda state, config: reasons.append(last_event(state)["reason_code"]) or None],
    )

    assert reasons == ["tool_blocked"]
    assert_fell_back(run)


# --------------------------------------------------------------------------- fail closed

UNKNOWN_STATUSES = [None, "DONE", "completed", 42, {"status": "COMPLETED"}]

STATUS_NODES = {
    "planner": lambda status: {"planner": [planner(status)]},
    "executor": lambda status: {"executor": [executor(status)]},
    "gatekeeper": lambda status: {"gatekeeper": [gatekeeper(status)]},
    "verifier": lambda status: {"verifier": [verifier(status)]},
    "composer": lambda status: {"composer": [composer(status)]},
}


@pytest.mark.parametrize("node", list(STATUS_NODES))
@pytest.mark.parametrize("status", UNKNOWN_STATUSES, ids=repr)
def test_a_missing_or_unknown_status_at_any_node_fails_closed_to_fallback(node, status):
    run = run_diagnosis(**STATUS_NODES[node](status))

    expected = "missing_status" if status is None else "unknown_status"
    assert (node, "fallback", expected, 1) in run.route
    assert run.ports.count(node) == 1
    assert_fell_back(run)


@pytest.mark.parametrize("node", ["planner", "executor", "verifier", "composer"])
def test_a_port_returning_nothing_fails_closed_to_fallback(node):
    run = run_diagnosis(**{node: [None]})

    assert (node, "fallback", "missing_status", 1) in run.route
    assert_fell_back(run)


@pytest.mark.parametrize("node", ["planner", "verifier", "composer"])
@pytest.mark.parametrize("status", [S.TOOL_BLOCKED, S.FAILED])
def test_an_executor_only_status_elsewhere_fails_closed(node, status):
    run = run_diagnosis(**STATUS_NODES[node](status))

    assert (node, "fallback", "unknown_status", 1) in run.route
    assert_fell_back(run)


def test_a_stale_status_from_an_earlier_phase_never_routes_a_later_attempt():
    # The gap-only executor returns no status: its COMPLETED from the first phase must not count.
    run = run_diagnosis(
        executor=[executor(), None],
        verifier=[verifier(verdict="LOW_CONFID", gaps=[GAP])],
    )

    assert run.route[-2:] == [
        ("executor", "fallback", "missing_status", 1),
        ("fallback", "END", "fallback_completed", 1),
    ]
    assert run.state[K.EXECUTOR_STATUS] is None
