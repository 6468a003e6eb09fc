"""The small JSONPath subset that evidence citations use (``$``, ``$.a.b``, ``$.a[3].c``, ``$["k-1"]``).

Stdlib only and no ``eval``: a path is parsed by hand into member names and list indexes. There are
no wildcards, slices, filters or recursive descent, so a path names at most one value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

MAX_PATH_LENGTH = 2048
MAX_SEGMENTS = 128

Segment = str | int

# A dotted member name: a letter or underscore, then letters, digits, underscores or dashes
# (``$.labels.__name__``, ``$.x-request-id``). Anything else needs the bracket form ``$["…"]``.
_DOT_NAME = re.compile(r"[^\W\d][\w-]*")
_INDEX = re.compile(r"-?\d{1,9}")
_SIMPLE_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class JsonPathError(ValueError):
    """The path is not in the supported subset; the message says where and why."""


class _NotFound:
    """Sentinel for a well-formed path that names nothing in the document."""

    _instance: _NotFound | None = None

    def __new__(cls) -> _NotFound:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_FOUND"

    def __bool__(self) -> bool:
        return False


NOT_FOUND: Any = _NotFound()


def _skip_spaces(path: str, i: int) -> int:
    while i < len(path) and path[i] in " \t":
        i += 1
    return i


def _parse_quoted(path: str, i: int) -> tuple[str, int]:
    """Parse a quoted member name starting at the quote ``path[i]``; return it and the index after it."""
    quote, start = path[i], i
    i += 1
    out: list[str] = []
    while i < len(path):
        c = path[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\":
            if i + 1 >= len(path):
                break
            e = path[i + 1]
            if e in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[e])
                i += 2
                continue
            if e == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", path[i + 2 : i + 6]):
                out.append(chr(int(path[i + 2 : i + 6], 16)))
                i += 6
                continue
            raise JsonPathError(f"invalid escape '\\{e}' at position {i}")
        out.append(c)
        i += 1
    raise JsonPathError(f"unterminated quoted name starting at position {start}")


def parse(path: str) -> tuple[Segment, ...]:
    """Parse ``path`` into member names (str) and list indexes (int); raise JsonPathError when malformed."""
    if not isinstance(path, str):
        raise JsonPathError(f"a path must be a string, got {type(path).__name__}")
    return _parse(path)


@lru_cache(maxsize=2048)
def _parse(path: str) -> tuple[Segment, ...]:
    path = path.strip()
    if len(path) > MAX_PATH_LENGTH:
        raise JsonPathError(f"path longer than {MAX_PATH_LENGTH} characters")
    if not path.startswith("$"):
        raise JsonPathError("a path must start with '$'")
    segments: list[Segment] = []
    i = 1
    while i < len(path):
        c = path[i]
        if c == ".":
            m = _DOT_NAME.match(path, i + 1)
            if m is None:
                raise JsonPathError(f"expected a member name after '.' at position {i} (use $[\"…\"] for other keys)")
            segments.append(m.group())
            i = m.end()
        elif c == "[":
            i = _skip_spaces(path, i + 1)
            if i < len(path) and path[i] in "\"'":
                name, i = _parse_quoted(path, i)
                segments.append(name)
            else:
                m = _INDEX.match(path, i)
                if m is None:
                    raise JsonPathError(f"expected an index or a quoted name after '[' at position {i}")
                segments.append(int(m.group()))
                i = m.end()
            i = _skip_spaces(path, i)
            if i >= len(path) or path[i] != "]":
                raise JsonPathError(f"expected ']' at position {i}")
            i += 1
        else:
            raise JsonPathError(f"unexpected {c!r} at position {i}")
        if len(segments) > MAX_SEGMENTS:
            raise JsonPathError(f"path deeper than {MAX_SEGMENTS} segments")
    return tuple(segments)


def resolve_segments(document: Any, segments: Sequence[Segment]) -> Any:
    """Follow parsed segments through ``document``; NOT_FOUND when a step does not exist.

    Names only index mappings and integers only index lists: ``$.a[0]`` on a dict or ``$.s[0]`` on a
    string is NOT_FOUND, never a coerced key or a character.
    """
    value = document
    for segment in segments:
        if isinstance(segment, str):
            if not isinstance(value, Mapping) or segment not in value:
                return NOT_FOUND
            value = value[segment]
        else:
            if not isinstance(value, (list, tuple)):
                return NOT_FOUND
            if not -len(value) <= segment < len(value):
                return NOT_FOUND
            value = value[segment]
    return value


def resolve(document: Any, path: str, default: Any = NOT_FOUND) -> Any:
    """The value ``path`` names in ``document``, or ``default`` (NOT_FOUND) when there is none.

    Raises JsonPathError when the path itself is malformed.
    """
    value = resolve_segments(document, parse(path))
    return default if value is NOT_FOUND else value
