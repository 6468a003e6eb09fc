"""The alert-analysis topology on the engine, branch by branch: every routing decision, the round cap,
the supervisor's and the reporter's technical-retry caps, and the recursion limit (no Django, fake ports)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnosis.graph.aiops_topology import (
    MAX_ROUNDS_LIMIT, AiOpsNodes, AiOpsPortContractError, Decision, Route, aiops_recursion_limit, build_aiops_graph,
    clamp_rounds, decide_executor, decide_report_check, decide_reporter, decide_supervisor, describe_aiops_topology,
    initial_aiops_state,
)
from diagnosis.graph.aiops_topology import AiOpsKey as K
from diagnosis.graph.aiops_topology import AiOpsNode as N
from diagnosis.graph.engine import END, GraphRecursionError, NodeExecutionError, RunConfig
from diagnosis.graph.trace import build_orchestration_trace
from tests.support.hypo import examples

# --------------------------------------------------------------------------- decisions, branch by branch


@pytest.mark.parametrize("status, retries, decision, expected", [
    ("COMPLETED", 0, {"decision": "FINISH"}, (Route.FINISH, "finish")),
    ("COMPLETED", 0, {"decision": "EXECUTE"}, (Route.EXECUTE, "execute")),
    ("COMPLETED", 0, {"decision": "PLAN"}, (Route.PLAN, "plan")),
    ("COMPLETED", 0, {"decision": "STOP", "reason": "tool_budget_spent"}, (Route.STOP, "tool_budget_spent")),
    ("COMPLETED", 0, {"decision": "STOP"}, (Route.STOP, "unknown_status")),
    ("COMPLETED", 0, {"decision": "MAYBE"}, (Route.STOP, "unknown_status")),
    ("COMPLETED", 0, None, (Route.STOP, "unknown_status")),
    ("INVALID_OUTPUT", 0, None, (Route.TECHNICAL_RETRY, "invalid_output")),
    ("RETRYABLE_FAILED", 0, None, (Route.TECHNICAL_RETRY, "retryable_failed")),
    ("INVALID_OUTPUT", 1, None, (Route.STOP, "retry_exhausted")),
    ("RETRYABLE_FAILED", 1, None, (Route.STOP, "retry_exhausted")),
    ("NON_RETRYABLE_FAILED", 0, None, (Route.STOP, "non_retryable_failed")),
    (None, 0, None, (Route.STOP, "missing_status")),
    ("SOMETHING", 0, None, (Route.STOP, "unknown_status")),
])
def test_every_supervisor_branch(status, retries, decision, expected):
    assert decide_supervisor(status, retries, decision) == expected


@pytest.mark.parametrize("status, expected", [
    ("COMPLETED", (Route.EXECUTED, "executed")),
    ("TOOL_BLOCKED", (Route.NEXT_ROUND, "tool_blocked")),
    ("FAILED", (Route.NEXT_ROUND, "failed")),
    ("INVALID_OUTPUT", (Route.NEXT_ROUND, "invalid_output")),
    ("RETRYABLE_FAILED", (Route.NEXT_ROUND, "unknown_status")),  # the executor is never retried
    (None, (Route.NEXT_ROUND, "missing_status")),
    (42, (Route.NEXT_ROUND, "unknown_status")),
])
def test_every_executor_branch(status, expected):
    assert decide_executor(status) == expected


@pytest.mark.parametrize("status, retries, expected", [
    ("COMPLETED", 0, (Route.COMPLETED, "report_written")),
    ("COMPLETED", 1, (Route.COMPLETED, "report_written")),
    ("INVALID_OUTPUT", 0, (Route.TECHNICAL_RETRY, "invalid_output")),
    ("RETRYABLE_FAILED", 0, (Route.TECHNICAL_RETRY, "retryable_failed")),
    ("INVALID_OUTPUT", 1, (Route.FALLBACK, "retry_exhausted")),
    ("NON_RETRYABLE_FAILED", 0, (Route.FALLBACK, "non_retryable_failed")),
    (None, 0, (Route.FALLBACK, "missing_status")),
])
def test_every_reporter_branch(status, retries, expected):
    assert decide_reporter(status, retries) == expected


@pytest.mark.parametrize("status, answer, expected", [
    ("checked", "report", (Route.CHECKED, "report_checked")),
    ("checked", "  ", (Route.FALLBACK, "no_verified_statement")),
    ("checked", None, (Route.FALLBACK, "no_verified_statement")),
    ("emptied", "report", (Route.FALLBACK, "no_verified_statement")),
    (None, None, (Route.FALLBACK, "no_verified_statement")),
])
def test_every_report_check_branch(status, answer, expected):
    assert decide_report_check(status, answer) == expected


# --------------------------------------------------------------------------- the graph with fake ports


class Ports:
    """Scripted ports: each node pops its next answer from a list (the last one repeats)."""

    def __init__(self, *, supervisor=None, executor=None, reporter=None, report_check=None):
        self.script = {
            "supervisor": list(supervisor or [{K.SUPERVISOR_STATUS: "COMPLETED", K.DECISION: {"decision": "FINISH"}}]),
            "executor": list(executor or [{K.EXECUTOR_STATUS: "COMPLETED", K.TASK_OUTPUT: {"claims": []}}]),
            "reporter": list(reporter or [{K.REPORTER_STATUS: "COMPLETED", K.REPORT_MARKDOWN: "report"}]),
            "report_check": list(report_check or [{K.REPORT_STATUS: "checked", K.FINAL_ANSWER: "checked report"}]),
        }
        self.calls: list[tuple[str, dict]] = []

    def _next(self, name, state):
        self.calls.append((name, dict(state)))
        items = self.script[name]
        return dict(items.pop(0) if len(items) > 1 else items[0])

    def nodes(self) -> AiOpsNodes:
        return AiOpsNodes(
            intake=lambda s, c: self.calls.append(("intake", {})) or {K.ALERTS: [{"alert_id": "a1"}],
                                                                      K.ALERTS_SOURCE: "request"},
            supervisor=lambda s, c: self._next("supervisor", s),
            executor=lambda s, c: self._next("executor", s),
            gatekeeper=lambda s, c: self.calls.append(("gatekeeper", {})) or {K.RESULTS: ["checked task"]},
            reporter=lambda s, c: self._next("reporter", s),
            report_check=lambda s, c: self._next("report_check", s),
            fallback=lambda s, c: self.calls.append(("fallback", {})) or {K.FINAL_ANSWER: "fallback report"},
        )

    def names(self):
        return [name for name, _ in self.calls]


def run(ports: Ports, max_rounds=4, config=None):
    graph = build_aiops_graph(ports.nodes(), max_rounds=max_rounds)
    steps = list(graph.stream(initial_aiops_state(), config))
    final = steps[-1][2]
    return final, [node for node, _, _ in steps]


EXECUTE = {K.SUPERVISOR_STATUS: "COMPLETED", K.DECISION: {"decision": "EXECUTE", "task_id": "t1"}}
PLAN = {K.SUPERVISOR_STATUS: "COMPLETED", K.DECISION: {"decision": "PLAN", "rationale": "split by service"}}
FINISH = {K.SUPERVISOR_STATUS: "COMPLETED", K.DECISION: {"decision": "FINISH"}}
INVALID = {K.SUPERVISOR_STATUS: "INVALID_OUTPUT", K.FAULT: "aiops_planner:model_invalid_output"}


def test_the_main_route_executes_a_task_checks_it_and_reports():
    final, nodes = run(Ports(supervisor=[EXECUTE, FINISH]))
    assert nodes == [N.INTAKE, N.SUPERVISOR, N.EXECUTOR, N.GATEKEEPER, N.SUPERVISOR, N.REPORTER, N.REPORT_CHECK]
    assert final[K.FINAL_ANSWER] == "checked report" and final[K.DEGRADED] is False
    assert final[K.RESULTS] == ("checked task",) and final[K.ROUND] == 2 and final[K.TERMINATION] == "finished"
    assert [d["decision"] for d in final[K.DECISIONS]] == ["EXECUTE", "FINISH"]
    trace = build_orchestration_trace(final[K.ORCHESTRATION_EVENTS], final, ended=True)
    assert trace["version"] == "stategraph-v1" and trace["termination_reason"] == "aiops_report_check_completed"
    assert [(t["from"], t["to"]) for t in trace["transitions"]][-1] == (N.REPORT_CHECK, "END")


def test_a_failed_task_goes_back_to_the_supervisor_without_its_gatekeeper():
    failed = {K.EXECUTOR_STATUS: "TOOL_BLOCKED", K.RESULTS: ["blocked task"]}
    final, nodes = run(Ports(supervisor=[EXECUTE, FINISH], executor=[failed]))
    assert nodes == [N.INTAKE, N.SUPERVISOR, N.EXECUTOR, N.SUPERVISOR, N.REPORTER, N.REPORT_CHECK]
    assert final[K.ORCHESTRATION_EVENTS][2]["reason_code"] == "tool_blocked"
    assert final[K.RESULTS] == ("blocked task",)


def test_the_supervisor_is_retried_once_then_the_run_reports_what_it_has_degraded():
    ports = Ports(supervisor=[INVALID])
    final, nodes = run(ports)
    assert nodes == [N.INTAKE, N.SUPERVISOR, N.SUPERVISOR, N.REPORTER, N.REPORT_CHECK]
    events = [e for e in final[K.ORCHESTRATION_EVENTS] if e["node"] == N.SUPERVISOR]
    assert [(e["reason_code"], e["attempt"]) for e in events] == [("invalid_output", 1), ("retry_exhausted", 2)]
    assert final[K.FAULT] == "aiops_planner:model_invalid_output" and final[K.TERMINATION] == "planner_failed"
    assert final[K.ROUND] == 1  # the retry is the same round
    assert [s[K.SUPERVISOR_RETRY_COUNT] for name, s in ports.calls if name == "supervisor"] == [0, 1]


def test_a_retry_that_succeeds_clears_the_fault_and_each_decision_gets_its_own_retry():
    final, nodes = run(Ports(supervisor=[INVALID, EXECUTE, INVALID, FINISH]))
    assert nodes.count(N.SUPERVISOR) == 4 and N.FALLBACK not in nodes
    assert not final.get(K.FAULT) and final[K.TERMINATION] == "finished" and final[K.ROUND] == 2
    attempts = [e["attempt"] for e in final[K.ORCHESTRATION_EVENTS] if e["node"] == N.SUPERVISOR]
    assert attempts == [1, 2, 1, 2]


def test_a_non_retryable_supervisor_failure_reports_at_once():
    final, nodes = run(Ports(supervisor=[{K.SUPERVISOR_STATUS: "NON_RETRYABLE_FAILED"}]))
    assert nodes.count(N.SUPERVISOR) == 1 and final[K.FAULT] == "aiops_planner:non_retryable_failed"


def test_the_round_cap_stops_a_supervisor_that_never_finishes_without_asking_it_again():
    ports = Ports(supervisor=[PLAN])
    final, nodes = run(ports, max_rounds=3)
    assert [name for name in ports.names() if name == "supervisor"] == ["supervisor"] * 3
    assert nodes.count(N.SUPERVISOR) == 4  # three PLAN decisions and the closing stop by rule
    last = [e for e in final[K.ORCHESTRATION_EVENTS] if e["node"] == N.SUPERVISOR][-1]
    assert (last["outcome"], last["reason_code"]) == (Decision.STOP, "max_rounds")
    assert final[K.TERMINATION] == "max_rounds" and final[K.ROUND] == 3 and not final.get(K.FAULT)


def test_a_stop_by_rule_does_not_use_a_round():
    stop = {K.SUPERVISOR_STATUS: "COMPLETED", K.DECISION: {"decision": "STOP", "reason": "tool_budget_spent"},
            K.TERMINATION: "tool_budget_spent"}
    final, nodes = run(Ports(supervisor=[EXECUTE, stop]))
    assert final[K.ROUND] == 1 and final[K.TERMINATION] == "tool_budget_spent" and not final.get(K.FAULT)
    assert nodes[-2:] == [N.REPORTER, N.REPORT_CHECK]


def test_the_reporter_is_retried_once_then_the_fallback_writes_the_report():
    failing = {K.REPORTER_STATUS: "RETRYABLE_FAILED", K.REPORTER_FAULT: "aiops_reporter:model_timeout"}
    final, nodes = run(Ports(reporter=[failing]))
    assert nodes[-3:] == [N.REPORTER, N.REPORTER, N.FALLBACK]
    assert final[K.DEGRADED] is True and final[K.FINAL_ANSWER] == "fallback report"
    assert final[K.FALLBACK_REASON] == "aiops_reporter:model_timeout"
    attempts = [(e["reason_code"], e["attempt"]) for e in final[K.ORCHESTRATION_EVENTS] if e["node"] == N.REPORTER]
    assert attempts == [("retryable_failed", 1), ("retry_exhausted", 2)]
    trace = build_orchestration_trace(final[K.ORCHESTRATION_EVENTS], final, ended=True)
    assert trace["termination_reason"] == "aiops_fallback_completed" and trace["degraded"] is True


def test_a_report_check_that_keeps_nothing_goes_to_the_fallback():
    final, nodes = run(Ports(report_check=[{K.REPORT_STATUS: "emptied"}]))
    assert nodes[-2:] == [N.REPORT_CHECK, N.FALLBACK]
    assert final[K.FALLBACK_REASON] == "aiops_report_check:no_verified_statement"
    assert final[K.FINAL_ANSWER] == "fallback report"


def test_the_recursion_limit_is_exactly_the_worst_case_of_the_bounds():
    """Every round: a supervisor retry, the decision, the task and its gatekeeper; then the closing stop,
    both reporter attempts, the report check and the fallback."""
    def worst():
        return Ports(supervisor=[INVALID, EXECUTE] * 3 + [INVALID], report_check=[{K.REPORT_STATUS: "emptied"}],
                     reporter=[{K.REPORTER_STATUS: "INVALID_OUTPUT"},
                               {K.REPORTER_STATUS: "COMPLETED", K.REPORT_MARKDOWN: "r"}])

    _final, nodes = run(worst(), max_rounds=3)
    assert len(nodes) == aiops_recursion_limit(3) == build_aiops_graph(worst().nodes(), max_rounds=3).recursion_limit
    with pytest.raises(GraphRecursionError) as caught:
        run(worst(), max_rounds=3, config=RunConfig(recursion_limit=aiops_recursion_limit(3) - 1))
    assert caught.value.node == N.FALLBACK and caught.value.code == "graph_recursion_limit"


def test_the_round_setting_is_clamped_so_every_step_fits_in_the_trace():
    assert clamp_rounds(1000) == MAX_ROUNDS_LIMIT and clamp_rounds(0) == 1 and clamp_rounds("x") == 4
    assert aiops_recursion_limit(MAX_ROUNDS_LIMIT) <= 64


def test_a_port_writing_what_the_topology_owns_is_a_contract_error():
    ports = Ports(supervisor=[{**FINISH, K.ROUND: 9}])
    with pytest.raises(NodeExecutionError) as caught:
        run(ports)
    assert isinstance(caught.value.__cause__, AiOpsPortContractError) and caught.value.node == N.SUPERVISOR


def test_the_described_topology_has_every_node_and_route():
    topology = describe_aiops_topology()
    assert {n["id"] for n in topology["nodes"]} >= set(N.ALL) and topology["entry"] == N.INTAKE
    edges = {(e["source"], e["target"], e["label"]) for e in topology["edges"]}
    assert (N.SUPERVISOR, N.SUPERVISOR, "technical_retry") in edges and (N.REPORTER, N.FALLBACK, "fallback") in edges
    assert (N.GATEKEEPER, N.SUPERVISOR, None) in edges and (N.REPORT_CHECK, END, "checked") in edges


# --------------------------------------------------------------------------- whatever the ports report

ANY = st.sampled_from(["COMPLETED", "INVALID_OUTPUT", "RETRYABLE_FAILED", "NON_RETRYABLE_FAILED", "TOOL_BLOCKED",
                       "FAILED", None, "BOGUS"])
SUPERVISOR_OUTPUTS = st.one_of(
    st.sampled_from([EXECUTE, PLAN, FINISH, INVALID]),
    st.builds(lambda status, choice: {K.SUPERVISOR_STATUS: status, K.DECISION: {"decision": choice}},
              ANY, st.sampled_from(["PLAN", "EXECUTE", "FINISH", "STOP", "MAYBE", None])),
)
EXECUTOR_OUTPUTS = st.builds(lambda status: {K.EXECUTOR_STATUS: status, K.TASK_OUTPUT: {"claims": []}}, ANY)
REPORTER_OUTPUTS = st.builds(lambda status: {K.REPORTER_STATUS: status, K.REPORT_MARKDOWN: "r"}, ANY)
CHECK_OUTPUTS = st.builds(lambda status, answer: {K.REPORT_STATUS: status, K.FINAL_ANSWER: answer},
                          st.sampled_from(["checked", "emptied", None]), st.sampled_from(["report", "", None]))
EDGES = {(e["source"], e["target"]) for e in describe_aiops_topology()["edges"]}


def scripted(outputs):
    return st.lists(outputs, min_size=1, max_size=8)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripted(SUPERVISOR_OUTPUTS), scripted(EXECUTOR_OUTPUTS), scripted(REPORTER_OUTPUTS), scripted(CHECK_OUTPUTS),
       st.integers(min_value=1, max_value=5))
def test_any_sequence_of_port_outcomes_ends_with_a_report_within_every_bound(supervisor, executor, reporter, check,
                                                                            max_rounds):
    ports = Ports(supervisor=supervisor, executor=executor, reporter=reporter, report_check=check)
    final, nodes = run(ports, max_rounds=max_rounds)

    assert nodes[-1] in (N.REPORT_CHECK, N.FALLBACK) and final[K.FINAL_ANSWER]
    assert len(nodes) <= aiops_recursion_limit(max_rounds)
    assert (nodes[-1] == N.FALLBACK) == (final[K.DEGRADED] is True)
    calls = ports.names()
    assert final[K.ROUND] <= max_rounds and len(final[K.DECISIONS]) <= max_rounds
    assert calls.count("supervisor") <= 2 * max_rounds and calls.count("reporter") <= 2
    assert calls.count("gatekeeper") <= calls.count("executor") <= max_rounds
    trace = build_orchestration_trace(final[K.ORCHESTRATION_EVENTS], final, ended=True)
    assert [t["from"] for t in trace["transitions"]] == nodes
    for t in trace["transitions"]:
        assert (t["from"], END if t["to"] == "END" else t["to"]) in EDGES and t["attempt"] in (1, 2)
