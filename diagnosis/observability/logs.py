"""Structured logs: LOG_FORMAT=json writes one JSON object per line; while a run executes every
record carries its run_id and session_id (a context variable set around the run, so it follows the
code into helpers, libraries and threads started with the context)."""

from __future__ import annotations

import contextvars
import json
import logging
from contextlib import contextmanager
from datetime import datetime, timezone

_run_context: contextvars.ContextVar[dict | None] = contextvars.ContextVar("aiops_run_context", default=None)

# Attributes every LogRecord has; anything else was passed with `extra=` and is kept.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


@contextmanager
def run_context(*, run_id: str, session_id: str):
    token = _run_context.set({"run_id": run_id, "session_id": session_id})
    try:
        yield
    finally:
        _run_context.reset(token)


def current_run_context() -> dict | None:
    return _run_context.get()


class RunContextFilter(logging.Filter):
    """Adds run_id and session_id (or None) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _run_context.get() or {}
        if not hasattr(record, "run_id"):
            record.run_id = context.get("run_id")
        if not hasattr(record, "session_id"):
            record.session_id = context.get("session_id")
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "run_id": getattr(record, "run_id", None),
            "session_id": getattr(record, "session_id", None),
            "process": record.process,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)
