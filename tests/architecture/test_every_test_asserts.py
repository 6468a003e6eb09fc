"""Every test asserts something: a test that only runs code reads as green whatever the code does.

Read statically from the source with `ast`. A test function counts as asserting when its body (nested
functions included) holds one of:
- an `assert` statement, `pytest.raises`, `pytest.warns`, `pytest.deprecated_call` or `pytest.fail`;
- a call whose name says it asserts: unittest's `self.assert…`, mock's `assert_called…`,
  `django_assert_num_queries`, or a helper named `assert_…` / `expect_…`;
- a call of a helper of the test suite that itself asserts (transitively): a function or method of the
  same module, or one imported from another `tests` module, by name or through its module.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
ASSERTING_NAME = re.compile(r"^(assert|expect_)|_assert_|^django_assert")
PYTEST_CHECKS = {"raises", "warns", "deprecated_call", "fail"}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class Suite:
    """The test modules of one tree, parsed once, and which of their helpers assert."""

    def __init__(self, modules: dict[str, str]):
        self.trees = {name: ast.parse(source) for name, source in modules.items()}
        self.functions = {name: self._functions(tree) for name, tree in self.trees.items()}
        self.imports = {name: self._imports(tree) for name, tree in self.trees.items()}
        self._memo: dict[tuple[str, str], bool] = {}

    @staticmethod
    def _functions(tree: ast.Module) -> dict[str, ast.AST]:
        """Module-level functions and the methods of module-level classes, by name."""
        found: dict[str, ast.AST] = {}
        for node in tree.body:
            if isinstance(node, FUNCTIONS):
                found[node.name] = node
            elif isinstance(node, ast.ClassDef):
                for method in node.body:
                    if isinstance(method, FUNCTIONS):
                        found.setdefault(method.name, method)
        return found

    def _imports(self, tree: ast.Module) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
        """(names imported from tests modules -> (module, name), aliases of imported tests modules)."""
        names: dict[str, tuple[str, str]] = {}
        modules: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in self.trees:
                        modules[alias.asname or alias.name] = full
                    else:
                        names[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in self.trees and alias.asname:
                        modules[alias.asname] = alias.name
        return names, modules

    def helper_asserts(self, module: str, name: str, seen: frozenset = frozenset()) -> bool:
        key = (module, name)
        if key in seen:
            return False
        if key not in self._memo:
            function = self.functions.get(module, {}).get(name)
            if function is not None:
                self._memo[key] = self.asserts(module, function, seen | {key})
            else:
                imported = self.imports.get(module, ({}, {}))[0].get(name)
                self._memo[key] = bool(imported) and self.helper_asserts(*imported, seen | {key})
        return self._memo[key]

    def asserts(self, module: str, function: ast.AST, seen: frozenset = frozenset()) -> bool:
        modules = self.imports[module][1]
        for node in ast.walk(function):
            if isinstance(node, ast.Assert):
                return True
            if not isinstance(node, ast.Call):
                continue
            callee = node.func
            if isinstance(callee, ast.Name):
                if ASSERTING_NAME.search(callee.id) or self.helper_asserts(module, callee.id, seen):
                    return True
            elif isinstance(callee, ast.Attribute):
                base = callee.value.id if isinstance(callee.value, ast.Name) else None
                if ASSERTING_NAME.search(callee.attr) or (base == "pytest" and callee.attr in PYTEST_CHECKS):
                    return True
                if base in ("self", "cls") and self.helper_asserts(module, callee.attr, seen):
                    return True
                if base in modules and self.helper_asserts(modules[base], callee.attr, seen):
                    return True
        return False

    def tests_without_assertion(self, is_test_module=lambda name: name.rpartition(".")[2].startswith("test_")):
        return sorted(
            f"{module}::{node.name} (line {node.lineno})"
            for module, tree in self.trees.items() if is_test_module(module)
            for node in ast.walk(tree) if isinstance(node, FUNCTIONS) and node.name.startswith("test")
            and not self.asserts(module, node)
        )


@lru_cache(maxsize=None)
def _suite() -> Suite:
    return Suite({_module_name(path): path.read_text(encoding="utf-8") for path in TESTS.rglob("*.py")})


def test_every_test_function_asserts_something():
    missing = _suite().tests_without_assertion()
    assert not missing, f"these tests assert nothing a bug could break; add an assertion: {missing}"


SAMPLE = {
    "tests.support.checks": (
        "def expect_ok(r):\n    if r != 1:\n        raise AssertionError(r)\n"
        "def page_has(html, text):\n    assert text in html\n"
        "def renders(html):\n    return page_has(html, 'x')\n"
        "def load(path):\n    return open(path).read()\n"
    ),
    "tests.test_sample": (
        "import pytest\n"
        "from tests.support import checks\n"
        "from tests.support.checks import renders, load\n"
        "def test_runs_only():\n    load('x')\n"
        "def test_asserts():\n    assert load('x')\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n"
        "def test_by_helper_name(r):\n    checks.expect_ok(r)\n"
        "def test_by_transitive_helper():\n    renders('<p>x</p>')\n"
        "def test_by_mock(m):\n    m.assert_called_once_with(1)\n"
        "def test_by_query_count(django_assert_num_queries):\n    with django_assert_num_queries(2):\n        load('x')\n"
        "class TestCase:\n"
        "    def check(self, x):\n        self.assertEqual(x, 1)\n"
        "    def test_by_method(self):\n        self.check(1)\n"
        "    def test_calls_only(self):\n        self.run(1)\n"
    ),
}


def test_the_check_flags_a_test_that_only_runs_code_and_accepts_every_kind_of_assertion():
    """A guard against the check itself being vacuous."""
    missing = Suite(SAMPLE).tests_without_assertion()
    assert missing == ["tests.test_sample::test_calls_only (line 25)", "tests.test_sample::test_runs_only (line 4)"]


def test_the_check_sees_the_whole_suite():
    suite = _suite()
    assert len(suite.trees) > 100 and "tests.conftest" in suite.trees
    assert suite.helper_asserts("tests.graph.test_diagnosis_routing", "assert_fell_back")
    assert not suite.helper_asserts("tests.support.fake_openai", "answer_plan")
