"""The diagnosis topology's declaration: ports, initial state, verdict order, rendering, no framework."""

import subprocess
import sys
from pathlib import Path

import pytest

from diagnosis.graph.engine import END, START, GraphValidationError
from diagnosis.graph.state import NodeName as N
from diagnosis.graph.state import PlannerMode
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.state import effective_verdict, min_verdict
from diagnosis.graph.topology import (
    DiagnosisNodes,
    build_diagnosis_graph,
    current_attempt,
    initial_diagnosis_state,
    route_gatekeeper,
    route_verifier,
)

from .fake_nodes import GAP, ScriptedPorts

DIAGNOSIS_EDGES = {
    (START, "planner"),
    ("planner", "executor"), ("planner", "planner"), ("planner", "fallback"),
    ("executor", "gatekeeper"), ("executor", "fallback"),
    ("gatekeeper", "verified_input"), ("gatekeeper", "fallback"),
    ("verified_input", "verifier"),
    ("verifier", "composer"), ("verifier", "evidence_retry"), ("verifier", "verifier"), ("verifier", "fallback"),
    ("evidence_retry", "planner"),
    ("composer", END), ("composer", "composer"), ("composer", "fallback"),
    ("fallback", END),
}


@pytest.fixture
def graph():
    return build_diagnosis_graph(ScriptedPorts.with_scripts().nodes())


def test_the_topology_has_exactly_the_edges_of_the_routing_table(graph):
    edges = {(e["source"], e["target"]) for e in graph.describe()["edges"]}

    assert edges == DIAGNOSIS_EDGES


def test_the_ports_can_be_given_as_a_mapping_keyed_by_node_name():
    ports = ScriptedPorts.with_scripts()

    graph = build_diagnosis_graph({name: ports.port(name) for name in N.ALL})

    assert graph.invoke(initial_diagnosis_state("why?"))[K.FINAL_ANSWER]


def test_a_missing_or_unknown_port_is_named():
    ports = ScriptedPorts.with_scripts()
    mapping = {name: ports.port(name) for name in N.ALL if name != N.VERIFIER}
    mapping["critic"] = ports.port(N.PLANNER)

    with pytest.raises(GraphValidationError) as caught:
        build_diagnosis_graph(mapping)

    assert "Node port 'verifier' missing; pass it in DiagnosisNodes" in str(caught.value)
    assert "Node port 'critic' is not a diagnosis node" in str(caught.value)


def test_a_port_that_is_not_callable_is_named():
    ports = ScriptedPorts.with_scripts()
    nodes = DiagnosisNodes(**{name: ports.port(name) for name in N.ALL} | {"composer": "composer"})

    with pytest.raises(GraphValidationError, match="Node port 'composer' must be callable"):
        build_diagnosis_graph(nodes)


def test_the_initial_state_holds_only_the_context_the_mode_and_zero_counters():
    state = initial_diagnosis_state("why is payment-service failing?")

    assert state == {
        K.DIAGNOSIS_CONTEXT: {"query": "why is payment-service failing?",
                              "original_query": "why is payment-service failing?"},
        K.PLANNER_MODE: PlannerMode.NORMAL,
        K.PLANNER_RETRY_COUNT: 0,
        K.VERIFIER_RETRY_COUNT: 0,
        K.COMPOSER_RETRY_COUNT: 0,
        K.EVIDENCE_RETRY_COUNT: 0,
        K.DEGRADED: False,
        K.ORCHESTRATION_EVENTS: [],
    }
    assert initial_diagnosis_state("rewritten", original_query="raw")[K.DIAGNOSIS_CONTEXT] == {
        "query": "rewritten", "original_query": "raw"}


@pytest.mark.parametrize(
    "verdicts, weakest",
    [
        (("PASS", "PASS"), "PASS"),
        (("PASS", "LOW_CONFID"), "LOW_CONFID"),
        (("LOW_CONFID", "REJECT"), "REJECT"),
        (("PASS", "REJECT"), "REJECT"),
        (("PASS", None), "REJECT"),
        (("PASS", "pass"), "REJECT"),
    ],
)
def test_min_verdict_orders_reject_below_low_confid_below_pass(verdicts, weakest):
    assert min_verdict(*verdicts) == weakest


def test_the_effective_verdict_is_capped_by_the_ceiling_and_needs_a_model_verdict():
    assert effective_verdict("PASS", "LOW_CONFID") == "LOW_CONFID"
    assert effective_verdict("LOW_CONFID", "PASS") == "LOW_CONFID"
    assert effective_verdict("PASS", None) == "REJECT"
    assert effective_verdict(None, "PASS") is None
    assert effective_verdict(["PASS"], "PASS") is None


def test_routers_read_the_state_alone_and_fail_closed_on_odd_values():
    assert route_gatekeeper({}) == "fallback"
    assert route_gatekeeper({K.GATEKEEPER_RESULT: {"verdict": ["PASS"]}}) == "fallback"
    assert route_verifier({}) == "fallback"
    assert route_verifier({
        K.VERIFIER_STATUS: "COMPLETED",
        K.VERIFIER_OUTPUT: {"verdict": "LOW_CONFID", "critical_evidence_gaps": [GAP]},
        K.VERDICT_CEILING: "PASS",
        K.EVIDENCE_RETRY_COUNT: 0,
    }) == "evidence_gap"


def test_a_port_reads_its_attempt_from_the_state():
    assert current_attempt({K.PLANNER_RETRY_COUNT: 0}, N.PLANNER) == 1
    assert current_attempt({K.VERIFIER_RETRY_COUNT: 1}, N.VERIFIER) == 2
    assert current_attempt({}, N.EXECUTOR) == 1


def test_the_graph_package_imports_nothing_from_django_or_langgraph():
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys, diagnosis.graph.engine, diagnosis.graph.topology, diagnosis.graph.trace;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'langgraph', 'langchain_core'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )

    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stdout + result.stderr
