"""Shared helpers of the Django-level benchmarks (bench code only, never imported by the service).

- `bench_database(...)`: points Django at a fresh SQLite file in a temp folder or a fresh MySQL
  database named `bench_*`, migrates it, and removes it afterwards.
- `ScriptedModel`: a zero-latency `ChatModel` that plans, calls tools, cites the real invocation
  ids and excerpts of the results it receives, verifies PASS and composes an answer.
- `InMemoryTelemetry` / `InMemoryKnowledge`: zero-latency tool backends.
- `LayerTimer`: exclusive wall time per layer (a nested timed call is charged to its own layer only).
- `summary`, `percentile`, `machine_line`: reporting.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def use_code(root: Path) -> None:
    """Run the service from another checkout of this repository (e.g. the main branch's, to measure a change
    side by side with the code before it, with the same bench): call before `bench_database`."""
    global ROOT
    ROOT = Path(root).resolve()
    if not (ROOT / "diagnosis" / "__init__.py").is_file():
        raise SystemExit(f"{ROOT} is not a checkout of this service")
    sys.path.insert(0, str(ROOT))

MYSQL_HOST, MYSQL_PORT, MYSQL_USER = "127.0.0.1", 3306, "root"
BENCH_REDIS_URL = "redis://127.0.0.1:6379/14"  # the benches' own Redis database; never another one

# Production-like settings: DEBUG off (no query log), quiet logging, plain HTTP on loopback.
BASE_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "bench-only-secret-key-not-for-production-0123456789abcdef",
    "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
    "SECURE_SSL_REDIRECT": "false",
    "LOG_LEVEL": "WARNING",
    "LLM_PROVIDER": "offline",
    "METRICS_BACKEND": "demo",
    "LOGS_BACKEND": "demo",
}


# --- statistics ------------------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    """Percentile (q in 0..100) by nearest rank, rounded up: rank round(q/100*n + 0.5). Conservative for
    small samples (the p95 of 20 samples is the largest one)."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def summary(samples: list[float]) -> tuple[float, float]:
    """(median, p95)."""
    return statistics.median(samples), percentile(samples, 95)


def machine_line() -> str:
    load = os.getloadavg()
    return (f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (shared machine: other processes add noise)")


# --- databases ---------------------------------------------------------------------------------------


def _mysql_admin():
    import MySQLdb

    return MySQLdb.connect(host=MYSQL_HOST, port=MYSQL_PORT, user=MYSQL_USER, charset="utf8mb4")


def mysql_create(name: str) -> str:
    if not name.startswith("bench_") or not name.replace("_", "").isalnum():
        raise ValueError(f"bench databases must be named bench_<word>, got {name!r}")
    conn = _mysql_admin()
    try:
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    finally:
        conn.close()
    return f"mysql://{MYSQL_USER}@{MYSQL_HOST}:{MYSQL_PORT}/{name}"


def mysql_drop(name: str) -> None:
    if not name.startswith("bench_"):
        raise ValueError(f"refusing to drop {name!r}: not a bench database")
    conn = _mysql_admin()
    try:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()


def redis_flush_bench_db() -> None:
    """Empty Redis db 14 (the benches' own database) and nothing else."""
    import redis

    client = redis.Redis.from_url(BENCH_REDIS_URL)
    assert client.connection_pool.connection_kwargs.get("db") == 14
    client.flushdb()
    client.close()


class BenchDatabase:
    """A fresh database for one bench: `url`, `engine` ('sqlite' | 'mysql'), `env` for subprocesses."""

    def __init__(self, *, mysql: bool, name: str, redis: bool = False, extra_env: dict | None = None,
                 sqlite_tuned: bool = False):
        self.engine = "mysql" if mysql else "sqlite"
        self.name = name if name.startswith("bench_") else f"bench_{name}"
        self.tmpdir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        if mysql:
            self.url = mysql_create(self.name)
        else:
            self.url = f"sqlite:///{self.tmpdir / (self.name + '.sqlite3')}"
        self.env = {**BASE_ENV, "DATABASE_URL": self.url, **(extra_env or {})}
        if redis:
            self.env["REDIS_URL"] = BENCH_REDIS_URL
        else:
            self.env.pop("REDIS_URL", None)
        if sqlite_tuned:  # bench/whatif_settings.py: the service's settings plus WAL and IMMEDIATE transactions
            if mysql:
                raise ValueError("the SQLite what-if does not apply to MySQL")
            self.env["DJANGO_SETTINGS_MODULE"] = "whatif_settings"

    def subprocess_env(self, **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(self.env, PYTHONUNBUFFERED="1", **extra)
        if env["DJANGO_SETTINGS_MODULE"] == "whatif_settings":
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parent), env.get("PYTHONPATH")) if p)
        return env

    def setup_django(self, *, migrate: bool = True) -> None:
        """Configure this process's Django on this database (call once, before importing models)."""
        os.environ.pop("REDIS_URL", None)
        os.environ.update(self.env)
        os.chdir(ROOT)
        bench_dir = str(Path(__file__).resolve().parent)
        if bench_dir not in sys.path:
            sys.path.insert(0, bench_dir)
        import django

        django.setup()
        if migrate:
            from django.core.management import call_command

            call_command("migrate", verbosity=0, interactive=False)

    def cleanup(self) -> None:
        try:
            from django.db import connections

            connections.close_all()
        except Exception:
            pass
        if self.engine == "mysql":
            mysql_drop(self.name)
        shutil.rmtree(self.tmpdir, ignore_errors=True)


@contextlib.contextmanager
def bench_database(*, mysql: bool, name: str, redis: bool = False, extra_env: dict | None = None,
                   setup: bool = True, sqlite_tuned: bool = False) -> Iterator[BenchDatabase]:
    db = BenchDatabase(mysql=mysql, name=name, redis=redis, extra_env=extra_env, sqlite_tuned=sqlite_tuned)
    try:
        if setup:
            db.setup_django()
        yield db
    finally:
        db.cleanup()


def bench_user(username: str = "bench"):
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username=username)
    return user


# --- zero-latency tools -----------------------------------------------------------------------------

_NOW = 1_767_225_600  # 2026-01-01T00:00:00Z: fixed, the results never depend on the clock


def _iso(t: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


_LOG_MESSAGES = [
    "HikariPool-1 - Connection is not available, request timed out after 30000ms.",
    "POST /api/v1/payments 500 in 30012ms: could not acquire a database connection",
    "HikariPool-1 - Pool stats (total=50, active=50, idle=0, waiting=183)",
    "refund-reconciliation batch holds 42 connections in open transactions",
    "POST /api/v1/payments 500 in 30007ms: could not acquire a database connection",
]
_POOL_VALUES = [[_NOW - 3600 + 60 * i, str(12 if i < 40 else 50)] for i in range(60)]


class InMemoryTelemetry:
    """Logs, metrics and alerts from constants: the tool layer without any backend latency."""

    def query_logs(self, *, service=None, query=None, start=None, end=None, limit=50) -> dict:
        records = [{"timestamp": _iso(_NOW - 300 + 60 * i), "service": service or "payment-service",
                    "level": "ERROR" if i % 2 == 0 else "WARN", "message": m} for i, m in enumerate(_LOG_MESSAGES)]
        return {"backend": "memory", "service": service, "query": query or "", "start": _iso(_NOW - 3600),
                "end": _iso(_NOW), "total": len(records), "records": records[-int(limit or 50):]}

    def query_metrics(self, *, query=None, metric=None, service=None, start=None, end=None, step=None) -> dict:
        name = metric or query or "hikaricp_connections_active"
        labels = {"__name__": name, "service": service or "payment-service", "pool": "HikariPool-1"}
        return {"backend": "memory", "query": query or name, "start": _iso(_NOW - 3600), "end": _iso(_NOW), "step": 60,
                "series": [{"labels": labels, "values": _POOL_VALUES,
                            "stats": {"min": 12, "max": 50, "mean": 21.33, "last": 50, "max_at": _iso(_NOW - 1200),
                                      "baseline": 12},
                            "description": f'{name}{{pool="HikariPool-1",service="{labels["service"]}"}} max 50 at '
                                           f'{_iso(_NOW - 1200)}, baseline 12, last 50'}]}

    def query_alerts(self) -> dict:
        return {"backend": "memory", "alerts": [{
            "labels": {"alertname": "PaymentHighErrorRate", "service": "payment-service", "severity": "critical"},
            "annotations": {"summary": "payment-service 5xx error rate above 20% for 10 minutes",
                            "description": "5xx ratio 0.43 on POST /api/v1/payments"},
            "state": "firing", "activeAt": _iso(_NOW - 900), "value": "0.43"}]}


class InMemoryKnowledge:
    """`lookup_knowledge` over two fixed runbook chunks (the real one ranks database rows with BM25)."""

    CHUNKS = [
        {"source_type": "runbook", "source_id": "runbooks/db-pool.md", "title": "Database connection pool exhausted",
         "path": "runbooks/db-pool.md", "chunk_id": "runbooks/db-pool.md#1", "score": 3.2,
         "content": "When HikariPool reports active == max and requests wait for a connection, find the client "
                    "that holds connections in long transactions (batch jobs) before raising the pool size."},
        {"source_type": "runbook", "source_id": "runbooks/5xx.md", "title": "High 5xx rate",
         "path": "runbooks/5xx.md", "chunk_id": "runbooks/5xx.md#1", "score": 1.1,
         "content": "Check the downstream dependencies of the failing endpoint and their saturation metrics."},
    ]

    def search(self, *, query: str, top_k: int, exclude_chunk_ids: set[str]) -> list[dict]:
        return [dict(c) for c in self.CHUNKS if c["chunk_id"] not in exclude_chunk_ids][:top_k]


# --- the zero-latency scripted model -------------------------------------------------------------------

# Executor rounds: which tools to call after how many results came back; then the evidence report.
EXECUTOR_ROUNDS = {
    0: [("query_alerts", {}), ("lookup_knowledge", {"query": "connection pool exhausted", "top_k": 2})],
    2: [("query_logs", {"service": "payment-service", "query": "level:ERROR", "limit": 50}),
        ("query_metrics", {"metric": "hikaricp_connections_active", "service": "payment-service"})],
}
SCRIPTED_MODEL_CALLS = 1 + (len(EXECUTOR_ROUNDS) + 1) + 1 + 1  # planner, executor rounds + report, verifier, composer

_CITE = {  # tool -> (path builder, value getter) for one citation of a result
    "query_alerts": lambda r: ("$.alerts[0].annotations.summary", r["alerts"][0]["annotations"]["summary"]),
    "lookup_knowledge": lambda r: ("$.results[0].content", r["results"][0]["content"]),
    "query_logs": lambda r: (f"$.records[{len(r['records']) - 1}].message", r["records"][-1]["message"]),
    "query_metrics": lambda r: ("$.series[0].description", r["series"][0]["description"]),
}


def _excerpt(value: str, limit: int = 70) -> str:
    """The value's first words, up to `limit` characters: an excerpt ends on a token boundary."""
    if len(value) <= limit:
        return value
    cut = re.sub(r"\w+$", "", value[:limit]) if value[limit].isalnum() else value[:limit]
    return re.sub(r"\W+$", "", cut)


class ScriptedModel:
    """A `ChatModel` that answers instantly and correctly: a fixed valid plan, two rounds of tool
    calls, evidence citing the real invocation ids and excerpts of the results it was given, a
    PASS verification and a composed answer citing only verified invocations."""

    model_name = "scripted-zero-latency"

    def complete(self, request):
        from diagnosis.llm.base import ChatReply, ToolCall, Usage

        si = request.structured_input or {}
        calls: list = []
        if request.role == "planner":
            content = json.dumps({
                "goal": "find why payment-service fails", "services": ["payment-service"], "language": "en",
                "steps": [{"tool": t, "arguments": a, "purpose": "evidence"} for r in EXECUTOR_ROUNDS.values() for t, a in r],
            })
        elif request.role == "executor":
            results = si.get("tool_results") or []
            round_ = EXECUTOR_ROUNDS.get(len(results)) if request.tools else None
            if round_:
                content = None
                calls = [ToolCall(id=f"call_{len(results) + i}", name=name, arguments=args, raw_arguments=json.dumps(args))
                         for i, (name, args) in enumerate(round_)]
            else:
                content = json.dumps(self._evidence(results))
        elif request.role == "verifier":
            claims = (si.get("verified_executor_output") or {}).get("claims") or []
            content = json.dumps({"verdict": "PASS", "score": 0.9, "critical_evidence_gaps": [], "fact_checks": [],
                                  "claim_checks": [{"claim_id": c.get("claim_id"), "supported": True} for c in claims],
                                  "rationale": "every claim is backed by a verified excerpt"})
        elif request.role == "composer":  # an answer_plan_v1: which verified claims go where
            claims = [c.get("claim_id") for c in (si.get("verified_executor_output") or {}).get("claims") or []]
            content = json.dumps({"version": "answer_plan_v1", "root_cause": claims[:1], "evidence": claims[1:2],
                                  "impact": [], "timeline": [], "next_steps": [{"claim_id": c} for c in claims[2:]]})
        else:
            content = "ok"
        return ChatReply(content=content, tool_calls=calls, usage=Usage(800, 120, 920), model=self.model_name,
                         finish_reason="tool_calls" if calls else "stop")

    @staticmethod
    def _evidence(results: list[dict]) -> dict:
        bindings = {}
        for r in results:
            if r.get("status") == "SUCCESS" and r.get("tool_name") in _CITE:
                path, value = _CITE[r["tool_name"]](r["result"])
                bindings[r["tool_name"]] = {"source_invocation_id": r["invocation_id"], "tool_name": r["tool_name"],
                                            "raw_path": path, "evidence_excerpt": _excerpt(value)}
        claims = [
            ("c1", "payment-service requests fail waiting for a database connection", ["query_logs", "query_alerts"]),
            ("c2", "the HikariPool-1 pool is saturated at 50 active connections", ["query_metrics"]),
            ("c3", "the runbook says to find the client holding connections", ["lookup_knowledge"]),
        ]
        return {"version": "executor_evidence_v2", "summary": "connection pool exhausted",
                "claims": [{"claim_id": cid, "statement": text, "evidence": [bindings[t] for t in tools if t in bindings]}
                           for cid, text, tools in claims],
                "open_questions": []}


# --- layer timing ---------------------------------------------------------------------------------------


class LayerTimer:
    """Exclusive wall time per layer: time spent in a nested timed call is charged to the inner layer."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list] = []  # [layer, start, child_time]
        self.clock = time.perf_counter

    def reset(self) -> None:
        self.totals.clear()
        self.calls.clear()
        self._stack.clear()

    def enter(self, layer: str) -> None:
        self._stack.append([layer, self.clock(), 0.0])

    def exit(self) -> None:
        layer, start, child = self._stack.pop()
        elapsed = self.clock() - start
        self.totals[layer] += elapsed - child
        self.calls[layer] += 1
        if self._stack:
            self._stack[-1][2] += elapsed

    def wrap(self, layer: str, fn: Callable) -> Callable:
        timer = self

        def timed(*args, **kwargs):
            timer.enter(layer)
            try:
                return fn(*args, **kwargs)
            finally:
                timer.exit()

        timed.__wrapped__ = fn
        return timed

    def wrap_iter(self, layer: str, iterator) -> Iterator:
        """Charge the time of every `next()` of an iterator (a generator's own work) to `layer`."""
        while True:
            self.enter(layer)
            try:
                item = next(iterator)
            except StopIteration:
                return
            finally:
                self.exit()
            yield item


class Patches:
    """Set attributes for a while and restore them (bench-only monkeypatching)."""

    _MISSING = object()

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, vars(owner).get(name, self._MISSING)))
        setattr(owner, name, value)

    def undo(self) -> None:
        while self._saved:
            owner, name, value = self._saved.pop()
            if value is self._MISSING:
                delattr(owner, name)  # it was inherited (a class attribute seen from an instance)
            else:
                setattr(owner, name, value)


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f}"

