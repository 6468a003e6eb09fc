"""Fake diagnosis node ports for graph tests: they replay scripted outputs and record each call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from diagnosis.graph.engine import RunConfig
from diagnosis.graph.state import NodeName as N
from diagnosis.graph.state import NodeStatus as S
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import DiagnosisNodes, build_diagnosis_graph, initial_diagnosis_state
from diagnosis.graph.trace import build_orchestration_trace


def planner(status: Any = S.COMPLETED) -> dict:
    return {K.PLANNER_STATUS: status, K.PLANNER_PLAN: {"steps": ["query_logs payment-service"]}}


def executor(status: Any = S.COMPLETED) -> dict:
    return {
        K.EXECUTOR_STATUS: status,
        K.EXECUTOR_OUTPUT: {"version": "executor_evidence_v2", "summary": "pool exhausted", "claims": []},
    }


def gatekeeper(verdict: Any = "PASS", bindings: Any = 2) -> dict:
    return {K.GATEKEEPER_RESULT: {"verdict": verdict, "verified_binding_count": bindings, "audit": []}}


def verified_input() -> dict:
    return {K.VERIFIED_EXECUTOR_OUTPUT: {"claims": []}, K.VERIFIED_EVIDENCE: []}


GAP = {"gap": "no metric for the DB pool", "suggested_query": "hikaricp_connections_active"}


def verifier(status: Any = S.COMPLETED, verdict: Any = "PASS", gaps: Any = None) -> dict:
    output = {"verdict": verdict, "score": 0.9, "claim_checks": [], "fact_checks": [], "rationale": "ok"}
    if gaps is not None:
        output["critical_evidence_gaps"] = gaps
    return {K.VERIFIER_STATUS: status, K.VERIFIER_OUTPUT: output}


def composer(status: Any = S.COMPLETED) -> dict:
    answer = "payment-service DB pool exhausted (inv-3f9a2c1b)" if status == S.COMPLETED else ""
    return {K.COMPOSER_STATUS: status, K.COMPOSER_OUTPUT: {"answer": answer}, K.FINAL_ANSWER: answer}


def fallback() -> dict:
    return {K.FINAL_ANSWER: "Fallback: nothing could be verified; check the runbook.", K.FALLBACK_OUTPUT: {}}


HAPPY = {
    N.PLANNER: planner(),
    N.EXECUTOR: executor(),
    N.GATEKEEPER: gatekeeper(),
    N.VERIFIED_INPUT: verified_input(),
    N.VERIFIER: verifier(),
    N.EVIDENCE_RETRY: None,
    N.COMPOSER: composer(),
    N.FALLBACK: fallback(),
}


@dataclass
class ScriptedPorts:
    """Each node replays its script in order (the last entry repeats); an exception entry is raised.

    A script entry is an output dict, None, an exception, or a callable ``(state, config) -> output``.
    """

    scripts: dict[str, list] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    seen: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    configs: list[RunConfig] = field(default_factory=list)

    @classmethod
    def with_scripts(cls, **scripts: list) -> ScriptedPorts:
        return cls(scripts={name: list(scripts.get(name, [HAPPY[name]])) for name in N.ALL})

    def port(self, name: str) -> Callable:
        def run(state, config):
            self.calls.append(name)
            self.seen.setdefault(name, []).append(state)
            self.configs.append(config)
            script = self.scripts[name]
            entry = script.pop(0) if len(script) > 1 else script[0]
            if isinstance(entry, BaseException):
                raise entry
            if callable(entry):
                return entry(state, config)
            return dict(entry) if isinstance(entry, dict) else entry

        return run

    def nodes(self) -> DiagnosisNodes:
        return DiagnosisNodes(**{name: self.port(name) for name in N.ALL})

    def count(self, name: str) -> int:
        return self.calls.count(name)


@dataclass
class Run:
    state: dict
    visited: list[str]
    trace: dict | None
    ports: ScriptedPorts

    @property
    def route(self) -> list[tuple[str, str, str, int]]:
        return [(t["from"], t["to"], t["reason_code"], t["attempt"]) for t in self.trace["transitions"]]


CONFIG = RunConfig.for_run(run_id="run-" + "a" * 32, session_id="s-test")


def run_diagnosis(**scripts: list) -> Run:
    ports = ScriptedPorts.with_scripts(**scripts)
    graph = build_diagnosis_graph(ports.nodes())
    visited: list[str] = []
    state: Mapping[str, Any] = {}
    for node, _, state in graph.stream(initial_diagnosis_state("why is payment-service failing?"), CONFIG):
        visited.append(node)
    final = dict(state)
    return Run(final, visited, build_orchestration_trace(final[K.ORCHESTRATION_EVENTS], final), ports)
