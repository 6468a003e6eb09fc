"""The severity of a log record: its level field, else what the line's own format says.

Levels are folded to five: FATAL, ERROR, WARN, INFO, DEBUG. A line without a level field is read by
the conventions of real formats: a JSON ``"level"``/``"severity"`` key, logfmt ``level=``, a bracketed
or bare level word after the timestamp (Logback, Log4j, Python logging, zap), glog/klog letter
prefixes (``E1129 …``), PostgreSQL ``ERROR:``/``FATAL:``, MySQL ``[ERROR]``, Redis ``#``/``*`` marks and
the status code of an nginx or Apache access line.
"""

from __future__ import annotations

import re
from typing import Any

_FOLD = {
    "TRACE": "DEBUG", "DEBUG": "DEBUG", "DBG": "DEBUG", "D": "DEBUG",
    "INFO": "INFO", "INFORMATION": "INFO", "NOTICE": "INFO", "LOG": "INFO", "I": "INFO", "NOTE": "INFO",
    "WARN": "WARN", "WARNING": "WARN", "W": "WARN",
    "ERROR": "ERROR", "ERR": "ERROR", "E": "ERROR", "SEVERE": "ERROR", "CRITICAL": "FATAL", "CRIT": "FATAL",
    "ALERT": "FATAL", "EMERGENCY": "FATAL", "EMERG": "FATAL", "FATAL": "FATAL", "PANIC": "FATAL", "F": "FATAL",
    "C": "FATAL", "DPANIC": "FATAL",
}
RANK = {"DEBUG": 0, "INFO": 1, "WARN": 2, "ERROR": 3, "FATAL": 4}

_KEYED = re.compile(r"""["']?(?:level|severity|lvl|levelname|log\.level)["']?\s*[:=]\s*["']?([A-Za-z]+)""", re.I)
_GLOG = re.compile(r"^([IWEF])\d{4} \d{2}:\d{2}:\d{2}")
_WORD = re.compile(r"(?:^|[\s\[|<(])(TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|SEVERE|CRITICAL|CRIT|ALERT|"
                   r"EMERG|EMERGENCY|FATAL|PANIC|DPANIC)(?=[\]\s:|>)-]|$)")
_ACCESS = re.compile(r'"\s*(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) [^"]*"\s+(\d{3})\s')
_REDIS = re.compile(r"^\d+:[A-Z] .*? ([#*.-]) ")
_TRACEBACK = re.compile(r"^(?:Traceback \(most recent call last\)|Exception in thread|\S+(?:Exception|Error)(?::|$))", re.M)


def fold(level: Any) -> str | None:
    if not isinstance(level, str) or not level.strip():
        return None
    return _FOLD.get(level.strip().upper())


def level_of(field: Any, message: str) -> str:
    """The record's level: its own field when it is a known level, else read from the line."""
    folded = _FOLD.get(field) if type(field) is str else None  # the common case, a level already folded
    if folded is not None:
        return folded
    folded = fold(field)
    if folded is not None:
        return folded
    head = message[:240]
    keyed = _KEYED.search(head)
    if keyed and fold(keyed.group(1)):
        return fold(keyed.group(1)) or "INFO"
    glog = _GLOG.match(head)
    if glog:
        return fold(glog.group(1)) or "INFO"
    redis = _REDIS.match(head)
    if redis:
        return {"#": "WARN", "*": "INFO", ".": "DEBUG", "-": "INFO"}[redis.group(1)]
    access = _ACCESS.search(head)
    if access:
        code = int(access.group(1))
        return "ERROR" if code >= 500 else "WARN" if code == 429 else "INFO"
    word = _WORD.search(head.upper() if head.isupper() else head)
    if word:
        return fold(word.group(1)) or "INFO"
    if _TRACEBACK.search(message):
        return "ERROR"
    return "INFO"


def at_least(level: str, floor: str) -> bool:
    return RANK.get(level, 1) >= RANK[floor]


# ``at_least(level, "WARN")`` as a set, for a test of every line: a level outside RANK counts as INFO, below it.
WARN_OR_WORSE = frozenset(level for level, rank in RANK.items() if rank >= RANK["WARN"])
