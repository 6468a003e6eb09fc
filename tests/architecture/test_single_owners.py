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
    "AiOpsView": "diagnosis/api/aiops.py (the endpoint) and traces/run_detail_audit.py (a console view model)",
    # Issue 30, item 1 (one typed owner of the diagnosis choice): not done yet.
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


# Shapes and rules given one owner (issue 30): each name is defined at the top level of its owner only.
ONE_OWNER = {
    "ExecutorEvidence": "diagnosis/contracts.py",  # the executor's answer: parsed once, read back once
    "EvidenceClaim": "diagnosis/contracts.py",
    "EvidenceShapeError": "diagnosis/contracts.py",
    "effective_verdict": "diagnosis/contracts.py",  # min(verifier, Gatekeeper ceiling)
    "min_verdict": "diagnosis/contracts.py",
    "served_verdict": "diagnosis/agents/results.py",  # the chat answer's verdict, computed once per run
    "service_name": "diagnosis/structured_diagnosis.py",  # what reads as a service name
    "localise_results": "diagnosis/llm/offline/localised.py",  # the one entry into the localiser
}
CONTRACTS = "diagnosis/contracts.py"
WIRE_SCHEMAS = "diagnosis/llm/schemas.py"
# (wire schema class, the contract's tuple of its fields)
WIRE_OF = {"ExecutorEvidenceSchema": "EXECUTOR_EVIDENCE_FIELDS", "EvidenceClaimSchema": "EVIDENCE_CLAIM_FIELDS"}
EXECUTOR_VERSION = "executor_evidence_v2"
# Only the localiser's own package and its one entry call `localise` itself, and the localisation report,
# which measures the localiser alone on generated evidence (docs/EVALUATION.md).
LOCALISE_CALLERS = ("diagnosis/localisation/", "diagnosis/llm/offline/localised.py",
                    "diagnosis/evaluation/localisation_report.py")


def _definitions(modules: list[str], tree_of=_tree) -> dict[str, list[str]]:
    """Top-level class and function names -> the modules that define them."""
    where = defaultdict(list)
    for rel in modules:
        for node in tree_of(rel).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                where[node.name].append(rel)
    return where


def _misplaced(where: dict[str, list[str]], owners: dict[str, str]) -> dict[str, list[str]]:
    return {name: where.get(name, []) for name, owner in owners.items() if where.get(name, []) != [owner]}


def test_each_consolidated_shape_is_defined_once_in_its_owner():
    assert not _misplaced(_definitions(_production_modules()), ONE_OWNER)


def _fields(rel: str, cls: str) -> tuple[str, ...]:
    """The annotated fields of a class (its ClassVars left out)."""
    node = next(n for n in _tree(rel).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return tuple(s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                 and "ClassVar" not in ast.unparse(s.annotation))


def _constant(rel: str, name: str):
    node = next(n for n in _tree(rel).body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in n.targets))
    return ast.literal_eval(node.value)


def test_the_wire_schema_of_the_executor_answer_has_the_owners_fields():
    for schema, fields in WIRE_OF.items():
        assert _fields(WIRE_SCHEMAS, schema) == _constant(CONTRACTS, fields), schema
    assert _fields(CONTRACTS, "ExecutorEvidence") == _constant(CONTRACTS, "EXECUTOR_EVIDENCE_FIELDS")
    assert _fields(CONTRACTS, "EvidenceClaim") == _constant(CONTRACTS, "EVIDENCE_CLAIM_FIELDS")


def _version_literals(modules: list[str], tree_of=_tree) -> list[str]:
    return sorted(rel for rel in modules for node in ast.walk(tree_of(rel))
                  if isinstance(node, ast.Constant) and node.value == EXECUTOR_VERSION)


def test_only_the_owner_spells_the_executor_answers_version_and_the_node_parses_through_it():
    assert _version_literals(_production_modules()) == [CONTRACTS]
    validate = next(n for n in _tree("diagnosis/agents/nodes.py").body
                    if isinstance(n, ast.FunctionDef) and n.name == "validate_evidence")
    assert "ExecutorEvidence.parse(" in ast.unparse(validate)
    assert not any(isinstance(n, ast.Raise) and "claims" in ast.unparse(n) for n in ast.walk(validate))


def _localise_callers(modules: list[str], tree_of=_tree) -> list[str]:
    return sorted(rel for rel in modules if not rel.startswith(LOCALISE_CALLERS) for node in ast.walk(tree_of(rel))
                  if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "localise")


def test_the_localiser_is_entered_through_one_function():
    assert _localise_callers(_production_modules()) == []


def test_the_owner_checks_fail_on_a_second_definition_a_spelled_version_and_a_direct_call():
    """A guard against checks that cannot fail, on made-up modules."""
    fake = {"a.py": ast.parse("class ExecutorEvidence: pass\ndef service_name(v): return v\n"),
            "b.py": ast.parse("X = {'version': 'executor_evidence_v2'}\nfrom l import localise\nlocalise([], [])\n"),
            "c.py": ast.parse("import l\nl.outcome.localise([])\n")}
    where = _definitions(list(fake), fake.__getitem__)
    assert _misplaced(where, {"ExecutorEvidence": CONTRACTS, "service_name": "a.py"}) == {"ExecutorEvidence": ["a.py"]}
    assert _misplaced(where, {"effective_verdict": CONTRACTS}) == {"effective_verdict": []}
    assert _version_literals(list(fake), fake.__getitem__) == ["b.py"]
    assert _localise_callers(list(fake), fake.__getitem__) == ["b.py", "c.py"]
    assert _fields(WIRE_SCHEMAS, "ExecutorEvidenceSchema")[:2] == ("version", "summary")
