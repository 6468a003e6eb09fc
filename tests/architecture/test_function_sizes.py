"""No function longer than 60 lines without a docstring line saying why ("Why it is long: ..."), read
statically with `ast` over the production packages (diagnosis/, traces/, config/; not migrations, not tests).

Functions in modules other engineers are changing stand in a named allow-list with their length today: an
entry may not grow, and an entry that is split (or gone) must be removed, so the list only shrinks.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("diagnosis", "traces", "config")
MAX_FUNCTION_LINES = 60
LONG_REASON = "Why it is long:"

# Long functions in modules that are being rewritten or split elsewhere (the offline analyser's rewrite,
# the renderer, the localiser, the read side, the tool backends), each with its length today. Remove an
# entry when its function is split; give it a "Why it is long:" line when its module is next changed.
LONG_PENDING = {
}


def _production_modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts)


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _length(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def _says_why(node: ast.AST) -> bool:
    doc = ast.get_docstring(node) or ""
    return any(line.strip().startswith(LONG_REASON) for line in doc.splitlines())


@lru_cache(maxsize=None)
def _long_functions() -> dict[str, tuple[int, bool]]:
    """`module:qualified name` -> (length, says why) of every function over the limit."""
    found = {}
    for path in _production_modules():
        rel = path.relative_to(ROOT).as_posix()
        for name, node in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            if _length(node) > MAX_FUNCTION_LINES:
                found[f"{rel}:{name}"] = (_length(node), _says_why(node))
    return found


def _unexplained(found: dict[str, tuple[int, bool]], pending: dict[str, int]) -> list[str]:
    return sorted(f"{key} ({length} lines)" for key, (length, why) in found.items() if not why and key not in pending)


def test_no_function_is_longer_than_60_lines_without_saying_why():
    unexplained = _unexplained(_long_functions(), LONG_PENDING)
    assert not unexplained, f"split these, or add a '{LONG_REASON}' line to their docstring: {unexplained}"


def test_the_allow_list_only_shrinks():
    found = _long_functions()
    stale = sorted(key for key in LONG_PENDING if key not in found)
    grown = sorted(f"{key}: {found[key][0]} > {limit}" for key, limit in LONG_PENDING.items()
                   if key in found and found[key][0] > limit)
    assert not stale, f"split or gone: remove them from LONG_PENDING: {stale}"
    assert not grown, f"an allow-listed function may not grow: {grown}"


def test_the_check_flags_a_long_function_unless_its_docstring_says_why():
    """A guard against a check that cannot fail."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    plain = ast.parse(f"class C:\n  def f():\n{body}\n")
    explained = ast.parse(f'def f():\n    """Does f.\n\n    {LONG_REASON} one table."""\n{body}\n')
    short = ast.parse("def f():\n    return 1\n")
    (name, node), = [(n, f) for n, f in _functions(plain) if n == "C.f"]
    assert _length(node) > MAX_FUNCTION_LINES and not _says_why(node)
    assert _unexplained({f"m.py:{name}": (_length(node), _says_why(node))}, {}) == [f"m.py:C.f ({_length(node)} lines)"]
    assert _unexplained({"m.py:C.f": (99, False)}, {"m.py:C.f": 99}) == []
    assert _says_why(next(f for _, f in _functions(explained)))
    assert _length(next(f for _, f in _functions(short))) == 2
    assert "diagnosis/gatekeeper.py:verify_bindings" in _long_functions()
