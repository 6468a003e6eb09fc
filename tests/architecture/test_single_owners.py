"""One owner per shape: a structure or a piece of machinery is declared in one module and imported
everywhere else. Read statically with `ast` over diagnosis/, traces/ and config/ (no module is imported)."""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("diagnosis", "traces", "config")
GRAPH = ROOT / "diagnosis" / "graph"
PORTS = "diagnosis/graph/ports.py"
TOPOLOGIES = ("diagnosis/graph/topology.py", "diagnosis/graph/aiops_topology.py")

# Top-level class names defined in more than one module today, each with why it stands. A new pair
# fails the test: give the shape one owner, or add it here with its reason. Remove an entry when its
# shape gets one owner (not enforced: the offline analyser's rewrite, issue 26, removes some on its own).
KNOWN_CLASS_PAIRS = {
    # Django's convention: every management command is a class named Command.
    "Command": "one per management command, as Django requires",
    # Two topologies, two different sets of route keys (each drawn on its own graph).
    "Route": "the route keys of each topology; different sets",
    # The alert-analysis API view and the console's alert-analysis view of a run: different layers.
    "AiOpsView": "diagnosis/api/aiops.py (the endpoint) and traces/run_detail.py (a console view model)",
    # Issue 30, item 1 (one typed owner of the executor evidence and the diagnosis choice): not done yet.
    "ExecutorEvidence": "diagnosis.contracts (stored shape) and diagnosis.llm.schemas (model output schema); issue 30 item 1",
    "EvidenceClaim": "as ExecutorEvidence; issue 30 item 1",
    "DiagnosisChoice": "diagnosis.structured_diagnosis and diagnosis.llm.schemas; issue 30 item 1",
    # The offline analyser is being rewritten (issue 26); its private shapes go with it.
    "ClaimCheck": "diagnosis.llm.schemas and diagnosis.llm.offline.verifier; issue 26",
    "KnowledgeChunk": "the model row and diagnosis.llm.offline.observations' parsed chunk; issue 26",
    # The wiring's protocol of a knowledge search and the tool registry's: issue 30 item 1.
    "KnowledgeSearch": "diagnosis.services.wiring and diagnosis.tools.registry; issue 30 item 1",
}


@lru_cache(maxsize=None)
def _tree(rel: str) -> ast.Module:
    return ast.parse((ROOT / rel).read_text(encoding="utf-8"))


def _production_modules() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for package in PACKAGES for p in (ROOT / package).rglob("*.py")
                  if "migrations" not in p.parts)


def _calls_a_port(function: ast.AST) -> bool:
    """The function calls its port argument: `port(state, config)`."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "port" and len(n.args) == 2
               for n in ast.walk(function))


def test_the_port_machinery_has_one_module_that_both_topologies_use():
    callers = sorted(
        f"{path.relative_to(ROOT)}:{node.name}" for path in GRAPH.glob("*.py")
        for node in _tree(str(path.relative_to(ROOT))).body
        if isinstance(node, ast.FunctionDef) and _calls_a_port(node)
    )
    assert callers == [f"{PORTS}:call_port"], f"only ports.call_port calls a port: {callers}"
    contract_errors = sorted(
        f"{path.relative_to(ROOT)}:{node.name}" for path in GRAPH.glob("*.py")
        for node in _tree(str(path.relative_to(ROOT))).body
        if isinstance(node, ast.ClassDef) and "graph_port_contract" in ast.unparse(node)
    )
    assert contract_errors == [f"{PORTS}:PortContractError"], contract_errors
    for topology in TOPOLOGIES:
        imported = {alias.name for node in _tree(topology).body if isinstance(node, ast.ImportFrom)
                    and node.module == "ports" and node.level == 1 for alias in node.names}
        assert {"call_port", "technical_route", "append_event", "normalise_status", "unbound_port"} <= imported, topology


def test_no_class_is_declared_in_two_modules_without_a_stated_reason():
    where = defaultdict(list)
    for rel in _production_modules():
        for node in _tree(rel).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(rel)
    duplicated = {name: paths for name, paths in where.items() if len(paths) > 1}
    unexplained = {name: paths for name, paths in duplicated.items() if name not in KNOWN_CLASS_PAIRS}
    assert not unexplained, f"give each shape one owner (or state why in KNOWN_CLASS_PAIRS): {unexplained}"


def test_the_checks_see_the_definitions_they_judge():
    """A guard against a check that cannot fail: the port caller and a known duplicate are really found."""
    assert _calls_a_port(next(n for n in _tree(PORTS).body if isinstance(n, ast.FunctionDef) and n.name == "call_port"))
    commands = [rel for rel in _production_modules() if rel.startswith("diagnosis/management/commands/")
                and any(isinstance(n, ast.ClassDef) and n.name == "Command" for n in _tree(rel).body)]
    assert len(commands) >= 5
