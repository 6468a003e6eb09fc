"""The demo backend's query arguments: the log filter, a metric selector, a log limit, and the selector a
metrics answer reports.

``query`` of ``query_logs`` is a small line filter, case-insensitive, matched as substrings against
``"<service> <level> <rendered line>"``: whitespace-separated words must all match (AND),
``"quoted phrases"`` match as one term, ``OR`` (or ``|``) separates alternatives, and
``level:ERROR`` / ``level:WARN,ERROR`` filter by the served level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import promql_parser

from diagnosis.demo.timestamps import render_timestamps
from diagnosis.tools.backends.base import BackendError, detect_level, normalise_level
from diagnosis.tools.backends.promql import label_matchers, parse_expression

__all__ = ["LogQuery", "parse_log_query", "parse_selector", "parse_limit", "served_level", "canonical_query",
           "MAX_LOG_LIMIT"]

MAX_LOG_LIMIT = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_QUERY_TOKEN_RE = re.compile(r'"([^"]*)"|(\S+)')


# --- log query ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogQuery:
    """A parsed log filter: allowed levels (None = any) and OR-groups of AND-terms."""

    levels: frozenset[str] | None
    groups: tuple[tuple[str, ...], ...]

    def matches(self, service: str, level: str, message: str) -> bool:
        if self.levels is not None and level not in self.levels:
            return False
        if not self.groups:
            return True
        haystack = f"{service} {level} {message}".lower()
        return any(all(term in haystack for term in group) for group in self.groups)


def _normalise_level(value: str) -> str:
    return normalise_level(value) or value.strip().upper()


def served_level(record: dict[str, Any]) -> str:
    """The level a record is served with: its own, normalised as the Loki backend normalises a level
    label (WARNING -> WARN, NOTICE -> INFO), or without one what the Loki backend reads from the line."""
    if record.get("level"):
        return normalise_level(record["level"]) or record["level"]
    sample = render_timestamps(record["message"], _EPOCH)  # layouts are fixed-width: any time reads the same
    return detect_level({}, sample)


def parse_log_query(query: str | None) -> LogQuery:
    """``'level:ERROR "timed out" pool OR refused'`` -> LogQuery (see the module docstring)."""
    if query is None:
        return LogQuery(None, ())
    if not isinstance(query, str):
        raise BackendError(f"expected text, got {type(query).__name__}", argument="query")
    levels: set[str] = set()
    groups: list[tuple[str, ...]] = []
    current: list[str] = []
    for match in _QUERY_TOKEN_RE.finditer(query):
        phrase, word = match.group(1), match.group(2)
        if word is not None and word in ("OR", "|"):
            if current:
                groups.append(tuple(current))
            current = []
            continue
        if word is not None and word.lower().startswith("level:"):
            wanted = [_normalise_level(v) for v in word[6:].split(",") if v.strip()]
            if not wanted:
                raise BackendError("level: needs a value such as level:ERROR", argument="query")
            levels.update(wanted)
            continue
        term = (phrase if phrase is not None else word).strip().lower()
        if term:
            current.append(term)
    if current:
        groups.append(tuple(current))
    return LogQuery(frozenset(levels) if levels else None, tuple(groups))


# --- metric selector ----------------------------------------------------------------------------


def parse_selector(query: str) -> list[tuple[str, str, str]]:
    """``name{a="1", b!~"x.*"}`` -> ``[("__name__", "=", "name"), ("a", "=", "1"), ("b", "!~", "x.*")]``."""
    expr = parse_expression(query)
    if not isinstance(expr, promql_parser.VectorSelector):
        raise BackendError(f"expected a metric selector such as http_requests_total{{service=\"x\"}}, got {query!r}",
                           argument="query")
    return label_matchers(expr)


def parse_limit(limit: Any) -> int:
    problem = f"must be an integer between 1 and {MAX_LOG_LIMIT}, got {limit!r}"
    if limit is None:
        return 50
    if isinstance(limit, bool):
        raise BackendError(problem, argument="limit")
    if isinstance(limit, int):
        n = limit
    elif isinstance(limit, float) and limit.is_integer():
        n = int(limit)
    elif isinstance(limit, str) and limit.strip().isdigit():
        n = int(limit.strip())
    else:
        raise BackendError(problem, argument="limit")
    if not 1 <= n <= MAX_LOG_LIMIT:
        raise BackendError(problem, argument="limit")
    return n


def canonical_query(matchers: list[tuple[str, str, str]]) -> str:
    """The effective selector, e.g. ``db_pool_active_connections{service="payment-service"}``."""
    name = next((v for label, op, v in matchers if label == "__name__" and op == "="), "")
    rest = list(matchers)
    if name:
        rest.remove(("__name__", "=", name))
    inner = ",".join(
        f'{label}{op}"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for label, op, v in rest
    )
    return f"{name}{{{inner}}}" if inner or not name else name
