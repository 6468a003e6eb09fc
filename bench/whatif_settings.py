"""Bench-only what-if settings: the service's own settings with SQLite tuned for concurrent writers.

Used by `run_overhead.py --sqlite-tuned` and `chat_load.py --sqlite-tuned` to show what the
embedded default would gain; the service itself does not use this module. Django >= 5.1 options:
- `transaction_mode: IMMEDIATE`: an `atomic()` block takes the write lock when it starts, so a
  transaction that reads and then writes waits (busy timeout) instead of failing at once with
  "database is locked" when another connection is writing;
- WAL journal with `synchronous=NORMAL`: a commit appends to the WAL without an fsync.
"""

from config.settings import *  # noqa: F401,F403
from config.settings import DATABASES

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    }
