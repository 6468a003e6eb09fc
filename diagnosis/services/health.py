"""Dependency checks for /api/health: database, broker and cache, each named when it fails; and when the
reaper last ran (every worker runs it on a timer: a stale time means no worker is alive)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.cache import cache
from django.db import connection

from config.celery import app

from diagnosis.services.reaper import reaper_last_run


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _check_cache() -> None:
    key = f"health:{uuid.uuid4().hex}"
    cache.set(key, "ok", 10)
    if cache.get(key) != "ok":
        raise RuntimeError("cache did not return the value just written")
    cache.delete(key)


def _check_broker() -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return  # the embedded default runs tasks in-process: there is no broker to reach

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


CHECKS = ("database", "broker", "cache")


def health_check() -> dict:
    """Run every check; return {"status": "ok"|"unavailable", "checks": {name: {"ok", "error"?}}}."""
    checks = {}
    for name in CHECKS:
        try:
            globals()[f"_check_{name}"]()
            checks[name] = {"ok": True}
        except Exception as exc:  # each dependency failure is reported, not raised
            checks[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    healthy = all(item["ok"] for item in checks.values())
    return {"status": "ok" if healthy else "unavailable", "checks": checks, "lastReapAt": _last_reap(checks)}


def _last_reap(checks: dict) -> str | None:
    """When a reaper pass last finished, from any worker or beat (ISO 8601); None if never or unknown."""
    if not checks.get("database", {}).get("ok"):
        return None
    try:
        last = reaper_last_run()
    except Exception:
        return None
    return last.isoformat() if last else None
