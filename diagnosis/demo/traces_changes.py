"""The optional ``traces.json`` and ``changes.json`` of a demo scenario: their format, checked at load.

``traces.json`` holds trace templates, each a tree of spans repeated over an offset range (so a
scenario writes one healthy and one broken shape instead of hundreds of traces); ``changes.json``
holds change records with ``offset_seconds``. Both are described in diagnosis/demo/README.md and
served by ``diagnosis/tools/backends/demo_traces.py`` and ``demo_changes.py``. Stdlib only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

SPAN_KINDS = ("server", "client", "producer", "consumer", "internal")
SPAN_STATUSES = ("ok", "error", "unset")
CHANGE_KINDS = ("rollout", "config", "secret", "helm", "argocd")
MAX_SPAN_DEPTH = 8


class EvidenceFileError(ValueError):
    """A traces.json or changes.json of the wrong shape (the loader turns it into a ScenarioError)."""


def _read(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvidenceFileError(f"{file}: invalid JSON ({exc})") from None


def _require(cond: bool, where: str, problem: str) -> None:
    if not cond:
        raise EvidenceFileError(f"{where}: {problem}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value <= 0


def _check_span(span: Any, where: str, depth: int) -> None:
    _require(isinstance(span, dict), where, "a span must be a JSON object")
    _require(depth <= MAX_SPAN_DEPTH, where, f"spans nest at most {MAX_SPAN_DEPTH} deep")
    for key in ("service", "operation"):
        _require(isinstance(span.get(key), str) and span[key].strip() != "", where, f"'{key}' must be a non-empty string")
    _require(span.get("kind", "internal") in SPAN_KINDS, where, f"'kind' must be one of {', '.join(SPAN_KINDS)}")
    _require(span.get("status", "unset") in SPAN_STATUSES, where, f"'status' must be one of {', '.join(SPAN_STATUSES)}")
    _require(isinstance(span.get("status_message", ""), str), where, "'status_message' must be a string")
    duration = span.get("duration_ms")
    durations = duration if isinstance(duration, list) else [duration]
    _require(bool(durations) and all(_number(d) and d >= 0 for d in durations), where,
             "'duration_ms' must be a number >= 0 or a non-empty list of them (cycled per occurrence)")
    _require(_number(span.get("start_ms", 0)) and span.get("start_ms", 0) >= 0, where,
             "'start_ms' (after the parent's start) must be a number >= 0")
    attributes = span.get("attributes", {})
    _require(isinstance(attributes, dict) and all(
        isinstance(k, str) and (isinstance(v, (str, bool)) or _number(v)) for k, v in attributes.items()),
        where, "'attributes' must map names to strings, numbers or booleans")
    children = span.get("children", [])
    _require(isinstance(children, list), where, "'children' must be a list of spans")
    for i, child in enumerate(children):
        _check_span(child, f"{where}.children[{i}]", depth + 1)


def _entries(file: Path, key: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The objects of ``{key: [...]}`` in ``file``, each with where it stands; none when there is no file."""
    if not file.is_file():
        return
    data = _read(file)
    _require(isinstance(data, dict) and isinstance(data.get(key), list), str(file), f"expected {{\"{key}\": [...]}}")
    for i, entry in enumerate(data[key]):
        where = f"{file}: {key}[{i}]"
        _require(isinstance(entry, dict), where, "expected a JSON object")
        yield where, entry


def load_traces(file: Path) -> tuple[dict[str, Any], ...]:
    """``{"traces": [template, ...]}``; a template has ``root`` (a span tree) and either ``offset_seconds``
    (one trace) or ``from_offset_seconds``, ``to_offset_seconds`` and ``every_seconds`` (repeated)."""
    templates = []
    for where, template in _entries(file, "traces"):
        templates.append(template)
        if "offset_seconds" in template:
            _require(_offset(template["offset_seconds"]), where, "'offset_seconds' must be an integer <= 0")
        else:
            low, high, every = (template.get(k) for k in ("from_offset_seconds", "to_offset_seconds", "every_seconds"))
            _require(_offset(low) and _offset(high) and low <= high, where,
                     "give 'offset_seconds', or integer 'from_offset_seconds' <= 'to_offset_seconds' <= 0")
            _require(isinstance(every, int) and not isinstance(every, bool) and every > 0, where,
                     "'every_seconds' must be a positive integer")
        _check_span(template.get("root"), f"{where}.root", 1)
    return tuple(templates)


def load_changes(file: Path) -> tuple[dict[str, Any], ...]:
    """``{"changes": [{"kind", "service", "offset_seconds", "what", "object", "namespace"?, "revision"?,
    "status"?, "by"?}]}``."""
    changes = []
    for where, change in _entries(file, "changes"):
        changes.append(change)
        _require(change.get("kind") in CHANGE_KINDS, where, f"'kind' must be one of {', '.join(CHANGE_KINDS)}")
        for key in ("service", "what", "object"):
            _require(isinstance(change.get(key), str) and change[key].strip() != "", where,
                     f"'{key}' must be a non-empty string")
        _require(_offset(change.get("offset_seconds")), where, "'offset_seconds' must be an integer <= 0")
        for key in ("namespace", "revision", "status", "by"):
            _require(change.get(key) is None or isinstance(change[key], str), where, f"'{key}' must be a string")
        unknown = set(change) - {"kind", "service", "offset_seconds", "what", "object", "namespace", "revision",
                                 "status", "by"}
        _require(not unknown, where, f"unknown key(s) {', '.join(sorted(unknown))}")
    return tuple(changes)
