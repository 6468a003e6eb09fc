"""One owner of the engine's texts in two languages: the gettext catalogue read by `diagnosis.i18n`.

Read statically (`ast` over diagnosis/, a small reader of the .po): every text the engine passes to
`i18n.text` or `i18n.mark` has its Chinese in the catalogue, with the same `{placeholders}`, and every
catalogue entry is still said somewhere; no hand-written `{"en": ..., "zh": ...}` table remains; the
committed .mo is the .po compiled (msgfmt, from the Debian `gettext` package that scripts/bootstrap.sh installs).
"""

from __future__ import annotations

import ast
import gettext
import json
import shutil
import string
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "diagnosis"
CATALOGUE = ENGINE / "locale" / "zh_Hans" / "LC_MESSAGES" / "diagnosis"
I18N_FUNCTIONS = ("text", "mark")
BRACE_FLAG = "python-brace-format"
OWNER = "diagnosis/i18n.py"  # maps the answer languages to locale directories (no text): not a table


def _unquote(line: str) -> str:
    return ast.literal_eval(line)  # a .po string is a C-like quoted string; these use only \\ \" \n \t


def read_po(text: str) -> dict[tuple[str | None, str], dict]:
    """(msgctxt, msgid) -> {"msgstr", "flags"} of every entry but the header."""
    entries: dict[tuple[str | None, str], dict] = {}
    current: dict = {}
    field = None

    def finish() -> None:
        if "msgid" in current and current["msgid"]:
            key = (current.get("msgctxt"), current["msgid"])
            assert key not in entries, f"duplicate catalogue entry {key}"
            entries[key] = {"msgstr": current.get("msgstr", ""), "flags": current.get("flags", set())}

    for raw in text.splitlines() + [""]:
        line = raw.strip()
        if not line:
            finish()
            current, field = {}, None
        elif line.startswith("#,"):
            current.setdefault("flags", set()).update(f.strip() for f in line[2:].split(","))
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            current[field] += _unquote(line)
        else:
            field, _, rest = line.partition(" ")
            current[field] = _unquote(rest)
    return entries


@lru_cache(maxsize=None)
def catalogue() -> dict[tuple[str | None, str], dict]:
    return read_po(CATALOGUE.with_suffix(".po").read_text(encoding="utf-8"))


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def _production_modules() -> list[Path]:
    return sorted(p for p in ENGINE.rglob("*.py") if "migrations" not in p.parts)


def said_texts(tree: ast.AST) -> set[tuple[str | None, str]]:
    """(msgctxt, msgid) of every `i18n.text("…")` / `i18n.mark("…")` call with a literal msgid."""
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in I18N_FUNCTIONS and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "i18n" and node.args):
            continue
        message = node.args[0]
        if isinstance(message, ast.Constant) and isinstance(message.value, str):
            context = next((k.value.value for k in node.keywords if k.arg == "context"
                            and isinstance(k.value, ast.Constant)), None)
            found.add((context, message.value))
    return found


@lru_cache(maxsize=None)
def engine_texts() -> set[tuple[str | None, str]]:
    return {key for path in _production_modules() for key in said_texts(ast.parse(path.read_text(encoding="utf-8")))}


def language_tables(tree: ast.AST) -> list[int]:
    """Lines of dict displays that hold a text per language: a "zh" key with a literal string (or strings)."""
    def literal_text(value: ast.AST) -> bool:
        if isinstance(value, (ast.Tuple, ast.List)):
            return bool(value.elts) and all(literal_text(v) for v in value.elts)
        return isinstance(value, ast.JoinedStr) or isinstance(value, ast.Constant) and isinstance(value.value, str)

    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Dict)
                  and any(isinstance(k, ast.Constant) and k.value == "zh" and literal_text(v)
                          for k, v in zip(node.keys, node.values)))


def json_language_tables(data) -> bool:
    """A JSON document holding a text per language under a "zh" key."""
    if isinstance(data, dict):
        return isinstance(data.get("zh"), str) or any(json_language_tables(v) for v in data.values())
    return isinstance(data, list) and any(json_language_tables(v) for v in data)


def test_every_entry_has_a_chinese_translation():
    entries = catalogue()
    assert len(entries) >= 70
    untranslated = sorted(key for key, entry in entries.items() if not entry["msgstr"].strip())
    fuzzy = sorted(key for key, entry in entries.items() if "fuzzy" in entry["flags"])
    assert not untranslated, f"give these a Chinese msgstr: {untranslated}"
    assert not fuzzy, f"review these fuzzy entries and drop the flag: {fuzzy}"


def test_placeholders_match_and_are_marked_python_brace_format():
    entries = catalogue()
    mismatched = {key: (_fields(key[1]), _fields(e["msgstr"])) for key, e in entries.items()
                  if _fields(key[1]) != _fields(e["msgstr"])}
    unmarked = sorted(key for key, e in entries.items() if bool(_fields(key[1])) != (BRACE_FLAG in e["flags"]))
    assert not mismatched, f"msgid and msgstr must have the same placeholders: {mismatched}"
    assert not unmarked, f"mark exactly the entries with placeholders '#, {BRACE_FLAG}': {unmarked}"
    assert any(BRACE_FLAG in e["flags"] for e in entries.values())


def test_every_text_the_engine_says_is_in_the_catalogue_and_every_entry_is_said():
    said, held = engine_texts(), set(catalogue())
    assert {("query_alerts", "metrics"), (None, "**Root cause**"), (None, "Coverage: {n} of {total} alert(s) analysed.")} <= said
    assert sorted(said - held, key=str) == [], "add these texts to the .po (docs/ARCHITECTURE.md, 'Texts in two languages')"
    assert sorted(held - said, key=str) == [], "no code says these catalogue entries any more: remove them from the .po"


def test_no_hand_written_language_table_remains_in_the_engine():
    tables = {str(p.relative_to(ROOT)): lines for p in _production_modules() if str(p.relative_to(ROOT)) != OWNER
              and (lines := language_tables(ast.parse(p.read_text(encoding="utf-8"))))}
    assert not tables, f"move these texts into the catalogue and say them with i18n.text: {tables}"
    data_files = sorted(str(p.relative_to(ROOT)) for p in ENGINE.rglob("*.json") if "demo" not in p.parts
                        and json_language_tables(json.loads(p.read_text(encoding="utf-8"))))
    assert not data_files, f"move these texts into the catalogue: {data_files}"


def test_the_checks_see_tables_and_texts():
    """A guard against checks that cannot fail."""
    code = ast.parse('T = {"k": {"en": "Yes", "zh": "是"}}\nG = {"zh": ("一", "二")}\n'
                     'Q = {"en": en.format(s=1), "zh": zh.format(s=1)}\n'
                     'x = i18n.text("Hello {name}", "zh", name=n)\ny = i18n.mark("metrics", context="query_alerts")\n'
                     'z = other.text("not a msgid", "zh")\n')
    assert language_tables(code) == [1, 2]
    assert said_texts(code) == {(None, "Hello {name}"), ("query_alerts", "metrics")}
    assert json_language_tables({"yes": {"en": "yes", "zh": "是"}}) and not json_language_tables({"question": "zh"})
    po = read_po('msgid ""\nmsgstr "h"\n\n#, python-brace-format\nmsgctxt "c"\nmsgid "a {x}"\n"b"\nmsgstr "甲 {x}"\n')
    assert po == {("c", "a {x}b"): {"msgstr": "甲 {x}", "flags": {BRACE_FLAG}}}


def test_the_committed_mo_is_the_po_compiled(tmp_path):
    msgfmt = shutil.which("msgfmt")
    if msgfmt is None:
        pytest.fail("msgfmt is missing: scripts/bootstrap.sh test installs it (Debian package gettext)")
    compiled = tmp_path / "diagnosis.mo"
    subprocess.run([msgfmt, "--check", "-o", str(compiled), str(CATALOGUE.with_suffix(".po"))], check=True)

    def read(path: Path) -> gettext.GNUTranslations:
        with path.open("rb") as fp:
            return gettext.GNUTranslations(fp)

    committed, fresh = read(CATALOGUE.with_suffix(".mo")), read(compiled)
    assert committed._catalog == fresh._catalog, "compile the catalogue: scripts/compile_messages.sh"
    assert len(fresh._catalog) == len(catalogue()) + 1  # the entries and the header
