"""The layering, enforced on the import graph (docs/ARCHITECTURE.md, "Layers").

Read statically from the source (no module is imported; imports under `if TYPE_CHECKING:` are
ignored), so the test costs no database and catches an import whether or not its code path runs:
- no cycle among the modules' imports, top-level or inside function bodies, but for the task layer's
  imports of its services (the HackSoft direction: services import `tasks` at the top, a task imports
  its service inside), and no import hidden in a function body in the services;
- the graph engine, the Gatekeeper, the contracts and the model clients import no framework (Django,
  DRF, Celery), not even through another module of the project;
- the write side (services, agents, tasks, evaluation) never imports the read side (`traces`);
- services know no HTTP (no rest_framework, no django.http);
- no module grows past 450 lines without a `# size:` line near its top saying why.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("diagnosis", "traces", "config")
FRAMEWORKS = ("django", "rest_framework", "celery", "kombu", "drf_spectacular")
MAX_LINES = 450
SIZE_REASON = "# size:"
# Modules whose length is not judged here: generated migrations (tests live outside the packages judged).
SIZE_EXEMPT_PREFIXES = ("diagnosis/migrations/", "traces/migrations/")
# Long modules that other engineers are changing or splitting now (traces/admin.py is being split), with
# their length today: each may not grow, and an entry whose module is split below MAX_LINES must be removed,
# so the list only shrinks. Each still says at its top why it is long.
SIZE_PENDING: dict[str, int] = {}
# Lazily imported on purpose: a tool backend is loaded only when settings configure it.
LATE_IMPORT_ALLOWED = {"diagnosis.services.wiring"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=None)
def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    package = base if _modules().get(module, Path()).name == "__init__.py" else base[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _targets(module: str, node: ast.AST) -> list[str]:
    """The modules one import statement loads: `from a import b` is `a.b` when b is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        source = _resolve(module, node)
        return [f"{source}.{a.name}" if f"{source}.{a.name}" in _modules() else source for a in node.names]
    return []


@lru_cache(maxsize=None)
def _imports(module: str) -> tuple[frozenset[str], frozenset[str]]:
    """(top-level imports, imports inside function bodies) of one module."""
    tree = ast.parse(_modules()[module].read_text(encoding="utf-8"))
    top, late = set(), set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            (late if in_function else top).update(_targets(module, child))
            visit(child, nested)

    visit(tree, False)
    return frozenset(top), frozenset(late)


def _project(name: str) -> str | None:
    """The project module `name` refers to (itself or its nearest package), or None when external."""
    while name:
        if name in _modules():
            return name
        name = name.rpartition(".")[0]
    return None


def _in(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


# The task layer imports its services inside the task body (HackSoft's direction: the service imports
# `tasks` at the top to enqueue, the task imports the service when it runs). Those late edges are the
# one sanctioned way back; every other late import counts as an edge, so none can hide a cycle.
LATE_EDGES_ALLOWED_FROM = ("diagnosis.tasks",)
# No package is exempt: the offline analyser's records moved to `observed`, which both its reader and its
# analysis import, and the late import that hid their cycle is gone.
CYCLE_EXEMPT: tuple[str, ...] = ()


def _import_graph(*, late: bool) -> dict[str, set[str]]:
    graph = {}
    for module in _modules():
        if _in(module, *CYCLE_EXEMPT):
            continue
        top, inside = _imports(module)
        targets = set(top)
        if late and not _in(module, *LATE_EDGES_ALLOWED_FROM):
            targets |= inside
        graph[module] = {t for t in map(_project, targets) if t and t != module and not _in(t, *CYCLE_EXEMPT)}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def strongconnect(v: str) -> None:  # recursive: the import graph is a few modules deep
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            strongconnect(module)
    return cycles


def test_the_module_level_import_graph_has_no_cycle():
    cycles = _cycles(_import_graph(late=False))
    assert not cycles, f"import cycles among top-level imports: {cycles}"


def test_no_late_import_hides_a_cycle():
    cycles = _cycles(_import_graph(late=True))
    assert not cycles, f"import cycles through imports inside function bodies: {cycles}"


def test_the_cycle_check_finds_a_cycle_and_the_sanctioned_task_edges():
    """A guard against a check that cannot fail."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    tasks_late = {_project(t) for t in _imports("diagnosis.tasks")[1]}
    assert "diagnosis.services.execution" in tasks_late  # the edge back that LATE_EDGES_ALLOWED_FROM permits
    assert "diagnosis.tasks" in _import_graph(late=True)["diagnosis.services.submission"]
    assert not any(_in(m, *CYCLE_EXEMPT) for m in _import_graph(late=True))


def test_services_and_the_task_layer_import_what_they_use_at_the_top():
    hidden = {m: sorted(t for t in _imports(m)[1] if _project(t))
              for m in _modules() if _in(m, "diagnosis.services") and m not in LATE_IMPORT_ALLOWED}
    assert not {m: t for m, t in hidden.items() if t}, "a late import hides a dependency (or a cycle)"


def _closure(module: str) -> set[str]:
    """Every external module `module` loads, through the project's modules, at any depth (late imports too)."""
    seen, external, todo = set(), set(), [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        top, late = _imports(current)
        for target in top | late:
            inside = _project(target)
            if inside is None:
                external.add(target)
            elif _in(inside, "diagnosis.llm.offline") and not _in(module, "diagnosis.llm"):
                continue
            else:
                todo.append(inside)
    return external


FRAMEWORK_FREE = ("diagnosis.graph", "diagnosis.gatekeeper", "diagnosis.contracts", "diagnosis.llm",
                  "diagnosis.jsonpath", "diagnosis.model_text", "diagnosis.redaction", "diagnosis.answer_render",
                  "diagnosis.claim_sentences", "diagnosis.localisation", "diagnosis.ranking_view", "diagnosis.alert_render", "diagnosis.i18n")


@pytest.mark.parametrize("module", sorted(m for m in _modules() if _in(m, *FRAMEWORK_FREE)))
def test_the_engine_the_gatekeeper_the_contracts_and_the_model_clients_import_no_framework(module):
    frameworks = sorted(name for name in _closure(module) if name.split(".")[0] in FRAMEWORKS)
    assert not frameworks, f"{module} loads {frameworks}"


WRITE_SIDE = ("diagnosis.services", "diagnosis.agents", "diagnosis.tasks", "diagnosis.evaluation")


def test_the_write_side_never_imports_the_read_side():
    offenders = {m: sorted(t for t in _imports(m)[0] | _imports(m)[1] if t.split(".")[0] == "traces")
                 for m in _modules() if _in(m, *WRITE_SIDE)}
    assert not {m: t for m, t in offenders.items() if t}


# An API token is a model row, not HTTP: creating an API client is a service.
HTTP_ALLOWED = {("diagnosis.services.users", "rest_framework.authtoken.models")}


def test_services_import_no_http():
    offenders = {
        (m, t) for m in _modules() if _in(m, "diagnosis.services")
        for t in _imports(m)[0] | _imports(m)[1] if _in(t, "rest_framework", "django.http")
    }
    assert offenders <= HTTP_ALLOWED, sorted(offenders - HTTP_ALLOWED)


def test_no_module_is_longer_than_450_lines_without_a_reason_at_its_top():
    too_long = []
    for module, path in sorted(_modules().items()):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(SIZE_EXEMPT_PREFIXES):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        if _too_long_without_reason(lines):
            too_long.append(f"{rel} ({len(lines)} lines)")
    assert not too_long, f"split these, or say why at the top with a '{SIZE_REASON}' line: {too_long}"


def _line_count(rel: str) -> int:
    return len((ROOT / rel).read_text(encoding="utf-8").splitlines())


def test_the_long_modules_being_split_elsewhere_only_shrink():
    stale = sorted(rel for rel in SIZE_PENDING if _line_count(rel) <= MAX_LINES)
    grown = sorted(f"{rel}: {_line_count(rel)} > {limit}" for rel, limit in SIZE_PENDING.items() if _line_count(rel) > limit)
    assert not stale, f"split below {MAX_LINES} lines: remove them from SIZE_PENDING: {stale}"
    assert not grown, f"a module being split may not grow: {grown}"


def _too_long_without_reason(lines: list[str]) -> bool:
    return len(lines) > MAX_LINES and not any(line.startswith(SIZE_REASON) for line in lines[:25])


def test_the_size_check_flags_a_long_module_unless_its_top_says_why():
    body = ["x = 1"] * MAX_LINES
    assert _too_long_without_reason(['"""doc."""', *body])
    assert not _too_long_without_reason([f"{SIZE_REASON} one table, read as one.", '"""doc."""', *body])
    assert not _too_long_without_reason(body)
    assert _too_long_without_reason([*body[:30], f"{SIZE_REASON} too late to count", *body])


def test_the_contract_tests_see_the_imports_they_judge():
    """A guard against a test that cannot fail: the graph really holds the edges the rules are about."""
    assert "diagnosis.tasks" in _imports("diagnosis.services.submission")[0]
    assert "diagnosis.services.execution" in _imports("diagnosis.tasks")[1]
    assert any(t.startswith("django") for t in _closure("diagnosis.services.execution"))
    assert "diagnosis.contracts" in {_project(t) for t in _imports("diagnosis.gatekeeper")[0]}


# The keys of a run's stored self_evaluation: only diagnosis.contracts reads them back.
STORED_KEYS = re.compile(r'\.get\(\s*"(verifier_evaluation|gatekeeper_audit|verified_executor_output|verified_evidence'
                         r'|rule_evaluation|aiops_rule_evaluation|aiops_audit)"')


def test_no_module_but_the_contracts_parses_a_stored_self_evaluation():
    parsers = sorted(
        f"{path.relative_to(ROOT)}:{number}" for module, path in _modules().items()
        if module != "diagnosis.contracts" and not _in(module, "diagnosis.llm.offline")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if STORED_KEYS.search(line)
    )
    assert not parsers, f"read these through diagnosis.contracts.SelfEvaluation: {parsers}"
