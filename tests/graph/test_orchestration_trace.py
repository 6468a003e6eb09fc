"""The stategraph-v1 orchestration trace: exact shape, honest endings, nothing but routing facts."""

import json

import pytest

from diagnosis.graph.engine import GraphRecursionError, NodeExecutionError, RunConfig
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import build_diagnosis_graph, initial_diagnosis_state
from diagnosis.graph.trace import MAX_TRACE_TRANSITIONS, build_orchestration_trace

from .fake_nodes import GAP, ScriptedPorts, executor, run_diagnosis, verifier


def event(node, reason="completed", attempt=1, outcome="COMPLETED"):
    return {"node": node, "outcome": outcome, "reason_code": reason, "attempt": attempt}


def test_a_run_without_events_has_no_trace():
    assert build_orchestration_trace([], {}) is None
    assert build_orchestration_trace(None, None) is None


def test_the_trace_has_exactly_the_stategraph_v1_keys():
    trace = run_diagnosis().trace

    assert set(trace) == {"version", "transitions", "final_node", "termination_reason", "degraded",
                          "evidence_retry_count"}
    assert all(set(t) == {"from", "to", "reason_code", "attempt"} for t in trace["transitions"])
    assert json.loads(json.dumps(trace)) == trace


def test_the_trace_never_carries_prompts_answers_or_raw_outputs():
    secret = "password=hunter2 raw model output"
    run = run_diagnosis(
        executor=[{K.EXECUTOR_STATUS: "COMPLETED", K.EXECUTOR_OUTPUT: {"summary": secret}}],
        composer=[{K.COMPOSER_STATUS: "COMPLETED", K.FINAL_ANSWER: secret, K.COMPOSER_OUTPUT: {"prompt": secret}}],
    )

    assert secret in run.state[K.FINAL_ANSWER]
    assert secret not in json.dumps(run.trace)


def test_a_fallback_run_ends_with_fallback_completed():
    run = run_diagnosis(executor=[executor("FAILED")])

    assert run.trace["final_node"] == "fallback"
    assert run.trace["termination_reason"] == "fallback_completed"
    assert run.trace["degraded"] is True
    assert run.trace["transitions"][-1] == {"from": "fallback", "to": "END", "reason_code": "fallback_completed",
                                            "attempt": 1}


def test_a_node_failure_mid_run_keeps_the_real_partial_state_and_events_for_the_trace():
    ports = ScriptedPorts.with_scripts(verifier=[RuntimeError("verifier crashed")])
    graph = build_diagnosis_graph(ports.nodes())

    with pytest.raises(NodeExecutionError) as caught:
        graph.invoke(initial_diagnosis_state("why?"), RunConfig.for_run(run_id="run-x", session_id="s"))

    error = caught.value
    assert error.node == "verifier"
    assert [node for node, _ in error.events] == ["planner", "executor", "gatekeeper", "verified_input"]
    assert error.partial_state[K.GATEKEEPER_RESULT]["verdict"] == "PASS"
    assert K.VERIFIER_STATUS not in error.partial_state
    trace = build_orchestration_trace(error.partial_state[K.ORCHESTRATION_EVENTS], error.partial_state,
                                      interrupted_at=error.node)
    assert [(t["from"], t["to"]) for t in trace["transitions"]] == [
        ("planner", "executor"), ("executor", "gatekeeper"), ("gatekeeper", "verified_input"),
        ("verified_input", "verifier"),
    ]
    assert trace["final_node"] == "verifier"
    assert trace["termination_reason"] == "verifier_interrupted"
    assert trace["degraded"] is False


def test_a_partial_trace_without_the_failing_node_ends_at_the_last_real_event():
    trace = build_orchestration_trace([event("planner"), event("executor")], {})

    assert [(t["from"], t["to"]) for t in trace["transitions"]] == [("planner", "executor")]
    assert trace["final_node"] == "executor"
    assert trace["termination_reason"] == "executor_interrupted"


def test_a_failure_in_the_first_node_leaves_no_events_and_so_no_trace():
    ports = ScriptedPorts.with_scripts(planner=[ValueError("no model")])

    with pytest.raises(NodeExecutionError) as caught:
        build_diagnosis_graph(ports.nodes()).invoke(initial_diagnosis_state("why?"))

    assert caught.value.events == ()
    assert build_orchestration_trace(caught.value.partial_state[K.ORCHESTRATION_EVENTS],
                                     caught.value.partial_state) is None


def test_a_port_writing_a_key_it_does_not_own_is_a_node_failure_naming_the_port():
    ports = ScriptedPorts.with_scripts(executor=[{K.EXECUTOR_STATUS: "COMPLETED", K.GATEKEEPER_RESULT: {"verdict": "PASS"}}])

    with pytest.raises(NodeExecutionError) as caught:
        build_diagnosis_graph(ports.nodes()).invoke(initial_diagnosis_state("why?"))

    assert caught.value.node == "executor"
    assert caught.value.__cause__.code == "graph_port_contract"
    assert "Node port 'executor' wrote ['gatekeeper_result']" in str(caught.value)


def test_a_diagnosis_run_forced_past_the_recursion_limit_raises_the_named_error():
    ports = ScriptedPorts.with_scripts(verifier=[verifier(verdict="LOW_CONFID", gaps=[GAP])])
    graph = build_diagnosis_graph(ports.nodes())

    with pytest.raises(GraphRecursionError) as caught:
        graph.invoke(initial_diagnosis_state("why?"), RunConfig(thread_id="run-x", recursion_limit=9))

    assert caught.value.code == "graph_recursion_limit"
    assert caught.value.node == "verified_input"
    trace = build_orchestration_trace(caught.value.partial_state[K.ORCHESTRATION_EVENTS],
                                      caught.value.partial_state, interrupted_at=caught.value.node)
    assert len(trace["transitions"]) == 9
    assert trace["termination_reason"] == "verified_input_interrupted"
    assert trace["evidence_retry_count"] == 1


def test_the_diagnosis_graph_is_compiled_with_a_recursion_limit_of_32():
    assert build_diagnosis_graph(ScriptedPorts.with_scripts().nodes()).recursion_limit == 32


def test_the_number_of_transitions_is_capped():
    events = [event("planner", "invalid_output")] * (MAX_TRACE_TRANSITIONS + 10)

    trace = build_orchestration_trace(events, {})

    assert len(trace["transitions"]) == MAX_TRACE_TRANSITIONS


def test_the_trace_copies_only_short_routing_facts_from_an_event():
    odd = {"node": "planner", "outcome": "x", "reason_code": "r" * 500, "attempt": "2", "prompt": "secret"}

    trace = build_orchestration_trace([odd, event("fallback", "fallback_completed")], {K.DEGRADED: True})

    first = trace["transitions"][0]
    assert first == {"from": "planner", "to": "fallback", "reason_code": "r" * 64, "attempt": 1}
    assert "secret" not in json.dumps(trace)


def test_the_evidence_retry_count_comes_from_the_final_state_or_else_from_the_events():
    events = [event("verifier", "evidence_gap"), event("evidence_retry", "evidence_gap_only"), event("planner")]

    assert build_orchestration_trace(events, {K.EVIDENCE_RETRY_COUNT: 1})["evidence_retry_count"] == 1
    assert build_orchestration_trace(events, None)["evidence_retry_count"] == 1
