"""Per-invoke orchestration overhead of the diagnosis graph: this engine against LangGraph.

Both engines run the very same topology (the wrapped node functions and routers from
``diagnosis.graph.topology``) with no-op ports, on the 6-step PASS path and on the longest
legal path (17 steps: every technical retry plus the evidence retry, ending in fallback).
LangGraph is a bench-only dependency (requirements-bench.txt).

    .venv/bin/python bench/engine_overhead.py [--iterations 3000] [--langgraph-iterations 600]
"""

from __future__ import annotations

import argparse
import gc
import operator
import statistics
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from diagnosis.graph.engine import END, RunConfig  # noqa: E402
from diagnosis.graph.state import DIAGNOSIS_RECURSION_LIMIT  # noqa: E402
from diagnosis.graph.state import NodeName as N  # noqa: E402
from diagnosis.graph.state import NodeStatus as S  # noqa: E402
from diagnosis.graph.state import StateKey as K  # noqa: E402
from diagnosis.graph.topology import (  # noqa: E402
    build_diagnosis_graph,
    build_diagnosis_topology,
    initial_diagnosis_state,
)

RUN_ID = "run-" + "0" * 32

PLANNED = {K.PLANNER_STATUS: S.COMPLETED, K.PLANNER_PLAN: {"steps": []}}
PLANNER_FAILED = {K.PLANNER_STATUS: S.INVALID_OUTPUT}
EXECUTED = {K.EXECUTOR_STATUS: S.COMPLETED, K.EXECUTOR_OUTPUT: {"claims": []}}
GATE_PASS = {K.GATEKEEPER_RESULT: {"verdict": "PASS", "verified_binding_count": 1}}
VERIFIED = {K.VERIFIED_EXECUTOR_OUTPUT: {"claims": []}, K.VERIFIED_EVIDENCE: []}
VERIFIER_PASS = {K.VERIFIER_STATUS: S.COMPLETED, K.VERIFIER_OUTPUT: {"verdict": "PASS"}}
VERIFIER_FAILED = {K.VERIFIER_STATUS: S.RETRYABLE_FAILED}
VERIFIER_GAP = {
    K.VERIFIER_STATUS: S.COMPLETED,
    K.VERIFIER_OUTPUT: {"verdict": "LOW_CONFID", "critical_evidence_gaps": [{"gap": "pool metric"}]},
}
COMPOSED = {K.COMPOSER_STATUS: S.COMPLETED, K.FINAL_ANSWER: "answer"}
COMPOSER_FAILED = {K.COMPOSER_STATUS: S.INVALID_OUTPUT}
FALLBACK = {K.FINAL_ANSWER: "safe answer"}


def happy_ports() -> dict[str, Any]:
    return {
        N.PLANNER: lambda state, config: PLANNED,
        N.EXECUTOR: lambda state, config: EXECUTED,
        N.GATEKEEPER: lambda state, config: GATE_PASS,
        N.VERIFIED_INPUT: lambda state, config: VERIFIED,
        N.VERIFIER: lambda state, config: VERIFIER_PASS,
        N.EVIDENCE_RETRY: lambda state, config: None,
        N.COMPOSER: lambda state, config: COMPOSED,
        N.FALLBACK: lambda state, config: FALLBACK,
    }


def longest_ports() -> dict[str, Any]:
    """Each port decides from the state alone, so one graph replays the 17-step path every time."""

    def planner(state, config):
        return PLANNER_FAILED if state[K.PLANNER_RETRY_COUNT] == 0 else PLANNED

    def verifier(state, config):
        if state[K.EVIDENCE_RETRY_COUNT]:
            return VERIFIER_PASS
        return VERIFIER_FAILED if state[K.VERIFIER_RETRY_COUNT] == 0 else VERIFIER_GAP

    return happy_ports() | {
        N.PLANNER: planner,
        N.VERIFIER: verifier,
        N.COMPOSER: lambda state, config: COMPOSER_FAILED,
    }


def langgraph_of(ports: dict[str, Any]):
    """The same topology, node functions and routers, compiled by LangGraph."""
    from langgraph.graph import END as LG_END
    from langgraph.graph import START as LG_START
    from langgraph.graph import StateGraph as LGStateGraph

    fields: dict[str, Any] = {key: Any for key in K.ALL}
    fields[K.ORCHESTRATION_EVENTS] = Annotated[list, operator.add]
    schema = TypedDict("DiagnosisState", fields, total=False)  # type: ignore[misc]

    ours = build_diagnosis_topology(ports)
    graph = LGStateGraph(schema)
    for name, fn in ours.nodes.items():
        graph.add_node(name, fn)
    graph.add_edge(LG_START, ours.entry)
    for src, dst in ours.edges:
        graph.add_edge(src, LG_END if dst == END else dst)
    for src, (router, table) in ours.conditional_edges.items():
        graph.add_conditional_edges(src, router, {key: LG_END if dst == END else dst for key, dst in table.items()})
    return graph.compile()


def measure(engines: dict[str, tuple], rounds: int = 10) -> dict[str, list[float]]:
    """Time every engine in interleaved rounds, so load from other processes hits both alike."""
    samples: dict[str, list[float]] = {name: [] for name in engines}
    clock = time.perf_counter_ns
    for name, (run, _, warmup) in engines.items():
        for _ in range(warmup):
            run()
    for _ in range(rounds):
        for name, (run, iterations, _) in engines.items():
            gc.collect()
            for _ in range(max(1, iterations // rounds)):
                start = clock()
                run()
                samples[name].append((clock() - start) / 1000)
    return samples


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def route(events) -> list[tuple]:
    return [(e["node"], e["reason_code"], e["attempt"]) for e in events]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3000, help="timed invokes per path on this engine")
    parser.add_argument("--langgraph-iterations", type=int, default=600, help="timed invokes per path on LangGraph")
    args = parser.parse_args()

    import langgraph  # noqa: F401  (fail early with a clear message when the bench extra is missing)
    from importlib.metadata import version

    initial = initial_diagnosis_state("why is payment-service failing?")
    ours_config = RunConfig.for_run(run_id=RUN_ID, session_id="s-bench")
    lg_config = {
        "recursion_limit": DIAGNOSIS_RECURSION_LIMIT,
        "configurable": {"thread_id": RUN_ID},
        "metadata": {"session_id": "s-bench", "run_id": RUN_ID},
    }

    print(f"python {sys.version.split()[0]}, langgraph {version('langgraph')}")
    print(f"{'path':<14}{'steps':>6}  {'engine':<10}{'median µs':>11}{'p95 µs':>10}{'µs/step':>9}")
    ratios = []
    for label, ports in (("pass", happy_ports()), ("longest", longest_ports())):
        ours = build_diagnosis_graph(ports)
        theirs = langgraph_of(ports)
        ours_final = ours.invoke(initial, ours_config)
        theirs_final = theirs.invoke(initial, lg_config)
        steps = len(ours_final[K.ORCHESTRATION_EVENTS])
        if route(ours_final[K.ORCHESTRATION_EVENTS]) != route(theirs_final[K.ORCHESTRATION_EVENTS]):
            raise SystemExit(f"{label}: the engines took different routes; the comparison would be meaningless")

        samples = measure(
            {
                "stategraph": (lambda: ours.invoke(initial, ours_config), args.iterations, 300),
                "langgraph": (lambda: theirs.invoke(initial, lg_config), args.langgraph_iterations, 50),
            }
        )
        ours_med, ours_p95 = summary(samples["stategraph"])
        lg_med, lg_p95 = summary(samples["langgraph"])
        print(f"{label:<14}{steps:>6}  {'stategraph':<10}{ours_med:>11.1f}{ours_p95:>10.1f}{ours_med / steps:>9.2f}")
        print(f"{'':<14}{'':>6}  {'langgraph':<10}{lg_med:>11.1f}{lg_p95:>10.1f}{lg_med / steps:>9.2f}")
        ratio = lg_med / ours_med
        ratios.append(ratio)
        print(f"{'':<14}{'':>6}  {'ratio':<10}{ratio:>10.1f}x{lg_p95 / ours_p95:>9.1f}x")
    verdict = "meets" if min(ratios) >= 10 else "MISSES"
    print(f"lowest median ratio {min(ratios):.1f}x ({verdict} the >= 10x goal)")


if __name__ == "__main__":
    main()
