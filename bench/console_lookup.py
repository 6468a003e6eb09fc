"""The console's run list at scale: first page, id lookup (whole and prefix), text search (English and
Chinese) and each filter, timed through the real admin views on a warm database.

The database is filled with bulk INSERTs (one session per four runs, one tool invocation per run),
with the full-text index suspended during the load and rebuilt after it, as a bulk import would do.
Each request goes through the Django test client as a superuser (URL routing, middleware, the admin
changelist, the template) with DEBUG off; every case runs once to warm up, then `--repeat` times.

    .venv/bin/python bench/console_lookup.py                       # SQLite, 1,000,000 runs
    .venv/bin/python bench/console_lookup.py --mysql               # MySQL/MariaDB database bench_console
    .venv/bin/python bench/console_lookup.py --mysql --database bench_console_2   # another database name
    .venv/bin/python bench/console_lookup.py --runs 200000 --repeat 9
    .venv/bin/python bench/console_lookup.py --keep               # leave the filled database in place …
    .venv/bin/python bench/console_lookup.py --reuse sqlite:////tmp/…/bench_console.sqlite3   # … and time it again
"""

from __future__ import annotations

import argparse
import json
import random
import time
import uuid
from datetime import datetime, timedelta, timezone

from _support import bench_database, machine_line, percentile

SERVICES = ["payment-service", "checkout-service", "order-service", "inventory-service", "auth-service",
            "search-service", "ledger-service", "notification-service", "shipping-service", "catalog-service"]
EN = ["Why is {s} failing?", "Why is {s} slow since {h}:00?", "{s} returns 500 errors on checkout",
      "Is {s} down because of the database connection pool?", "What changed in {s} before the latency spike?",
      "Why are {s} pods restarting (OOMKilled)?", "{s} error rate above {p}% for 10 minutes"]
ZH = ["为什么{s}在{h}点后变慢了？", "{s}的数据库连接池耗尽了吗？", "{s}返回大量500错误，原因是什么？",
      "{s}的内存持续上涨，是否存在内存泄漏？"]
RARE = "kafka consumer lag on {s} partition {p}"  # one question in 1,000: a selective English search
TOOLS = ["query_logs"] * 6 + ["query_metrics"] * 3 + ["lookup_knowledge"] * 9 + ["query_alerts"]
MODELS = ["gpt-4o-mini"] * 8 + ["qwen-plus"] + ["offline-analyser"]
ERRORS = ["model_connection_error", "budget_exceeded", "missing_answer", "broker_unavailable", "worker_lost"]
BATCH = 5_000


def _question(rng: random.Random, i: int) -> tuple[str, str]:
    service = SERVICES[rng.randrange(len(SERVICES))]
    if i % 1000 == 7:
        return RARE.format(s=service, p=rng.randrange(64)), service
    if rng.random() < 0.12:
        return rng.choice(ZH).format(s=service, h=rng.randrange(24)), service
    return rng.choice(EN).format(s=service, h=rng.randrange(24), p=rng.randrange(5, 60)), service


def _diagnosis(rng: random.Random, service: str, verdict: str) -> str | None:
    """The structured diagnosis: a root cause naming the question's service on most verified answers."""
    if verdict != "PASS" or rng.random() < 0.2:
        return None
    return json.dumps({"rootCause": {"service": service, "cause": "connection pool exhausted",
                                     "summary": "The pool is exhausted.", "claimIds": ["c1"]},
                       "nothingWrong": False, "undetermined": False, "symptoms": []})


def fill(total: int, seed: int = 16) -> dict:
    """Insert `total` runs with their sessions and one tool invocation each; returns ids to look up."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from diagnosis.models import DiagnosisRun
    from diagnosis.search_text import root_summary_of
    from traces.fulltext import cjk_terms, fulltext_create, fulltext_drop

    rng = random.Random(seed)
    owner = get_user_model().objects.create_superuser("bench-staff", "b@example.org", "bench-password-16")
    fulltext_drop(connection)
    now = datetime(2026, 11, 30, tzinfo=timezone.utc)
    start = now - timedelta(days=180)
    step = (now - start) / max(total, 1)
    q = connection.ops.quote_name
    run_cols = ["run_id", "session_id", "agent_flow", "strategy", "status", "question", "answer", "degraded",
                "effective_verdict", "feedback_comment", "error_code", "error_message", "duration_ms", "step_count",
                "tool_count", "prompt_tokens", "completion_tokens", "model_name", "prompt_version", "celery_task_id",
                "created_at", "started_at", "finished_at", "feedback", "claim_token", "diagnosis",
                "root_service", "question_terms", "root_summary", "answer_terms"]
    run_sql = (f"INSERT INTO diagnosis_run ({', '.join(q(c) for c in run_cols)}) VALUES "
               f"({', '.join(['%s'] * len(run_cols))})")
    session_sql = ("INSERT INTO chat_session (session_id, owner_id, title, summary, created_at, metadata) "
                   "VALUES (%s, %s, %s, %s, %s, %s)")
    inv_cols = ["run_id", "session_id", "invocation_id", "tool_name", "arguments", "status", "truncated",
                "error_message", "replay_mode", "created_at"]
    inv_sql = f"INSERT INTO tool_invocation ({', '.join(q(c) for c in inv_cols)}) VALUES ({', '.join(['%s'] * len(inv_cols))})"
    picked = {}
    started = time.perf_counter()
    session_pk = run_pk = 0
    with connection.cursor() as cursor:
        for base in range(0, total, BATCH):
            count = min(BATCH, total - base)
            sessions, runs, invocations = [], [], []
            for k in range(count):
                i = base + k
                if i % 4 == 0:
                    session_pk += 1
                    session_id = f"s-{uuid.UUID(int=rng.getrandbits(128)).hex}"
                    sessions.append((session_id, owner.pk, "", "", start + step * i, "{}"))
                run_pk += 1
                created = start + step * i
                failed = rng.random() < 0.02
                degraded = not failed and rng.random() < 0.05
                verdict = "" if failed or degraded else rng.choice(["PASS"] * 8 + ["LOW_CONFID", "REJECT"])
                duration = int(rng.lognormvariate(8.3, 0.6))
                prompt, completion = rng.randrange(800, 9000), rng.randrange(100, 1500)
                run_id = f"run-{uuid.UUID(int=rng.getrandbits(128)).hex}"
                question, service = _question(rng, i)
                diagnosis = _diagnosis(rng, service, verdict)
                runs.append((
                    run_id, session_pk, "CHAT" if rng.random() < 0.9 else "AI_OPS",
                    "DIAGNOSIS" if rng.random() < 0.85 else "SIMPLE", "FAILED" if failed else "SUCCESS",
                    question, "Root cause: the connection pool is exhausted. [inv-0000abcd]", degraded,
                    verdict, "", rng.choice(ERRORS) if failed or (degraded and rng.random() < 0.5) else "", "",
                    duration, 6, 1, prompt, completion, rng.choice(MODELS), "catalog-79a2614cc9", "",
                    created, created, created + timedelta(milliseconds=duration),
                    "not_useful" if rng.random() < 0.01 else None, "", diagnosis,
                    DiagnosisRun.root_service_of(json.loads(diagnosis)) if diagnosis else None, cjk_terms(question),
                    root_summary_of(json.loads(diagnosis)) if diagnosis else None, None,
                ))
                invocation_id = f"inv-{rng.getrandbits(32):08x}"
                invocations.append((run_pk, session_id, invocation_id, rng.choice(TOOLS), "{}", "SUCCESS", False, "",
                                    "", created))
                if i == total // 2:
                    picked = {"run_id": run_id, "session_id": session_id, "invocation_id": invocation_id}
            with transaction.atomic():
                if sessions:
                    cursor.executemany(session_sql, sessions)
                cursor.executemany(run_sql, runs)
                cursor.executemany(inv_sql, invocations)
            if (base // BATCH) % 20 == 0:
                print(f"  {base + count:>9,} runs  {time.perf_counter() - started:6.0f} s", flush=True)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    fulltext_create(connection)
    indexed = time.perf_counter() - started
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    else:
        with connection.cursor() as cursor:
            for table in ("diagnosis_run", "chat_session", "tool_invocation"):
                cursor.execute(f"ANALYZE TABLE {table}")
                cursor.fetchall()
    print(f"filled {total:,} runs in {loaded:.0f} s, full-text index built in {indexed:.0f} s", flush=True)
    return {**picked, "owner": owner}


def picked_ids(total: int) -> dict:
    """The ids `fill` picked, read back from an already filled database."""
    from django.contrib.auth import get_user_model

    from diagnosis.models import DiagnosisRun, ToolInvocation

    run = DiagnosisRun.objects.select_related("session").get(pk=total // 2 + 1)
    return {"run_id": run.run_id, "session_id": run.session.session_id,
            "invocation_id": ToolInvocation.objects.filter(run=run).values_list("invocation_id", flat=True)[0],
            "owner": get_user_model().objects.get(username="bench-staff")}


def time_get(client, url: str, repeat: int) -> tuple[float, float, int]:
    response = client.get(url)  # warm-up
    status = response.status_code
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == status
    samples.sort()
    return samples[len(samples) // 2], percentile(samples, 95), status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mysql", action="store_true")
    parser.add_argument("--database", default="bench_console", metavar="NAME",
                        help="the MySQL database to create and fill (named bench_*; default bench_console)")
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="do not drop the filled database at the end")
    parser.add_argument("--reuse", metavar="DATABASE_URL", help="time an already filled database (no fill)")
    args = parser.parse_args()
    if args.reuse:
        import contextlib
        import os

        from _support import BASE_ENV, ROOT

        os.environ.update({**BASE_ENV, "DATABASE_URL": args.reuse})
        os.chdir(ROOT)
        import django

        django.setup()
        context = contextlib.nullcontext()
    else:
        context = bench_database(mysql=args.mysql, name=args.database)
    with context as db:
        from django.db import connection
        from django.test import Client

        if args.reuse:
            from diagnosis.models import DiagnosisRun

            args.runs = DiagnosisRun.objects.order_by("-id").values_list("id", flat=True).first()
            ids = picked_ids(args.runs)
        else:
            ids = fill(args.runs)
            if args.keep:
                db.cleanup = lambda: print(f"kept: {db.url}")
        from django.core.management import call_command

        # DEBUG off: pages need the manifest, with the console's own static files in it
        call_command("collectstatic", interactive=False, verbosity=0)
        client = Client()
        client.force_login(ids["owner"])
        base = "/admin/diagnosis/diagnosisrun/"
        cases = [
            ("run list, first page", base),
            ("id lookup: whole run id", f"{base}?q={ids['run_id']}"),
            ("id lookup: run id prefix (12 chars)", f"{base}?q={ids['run_id'][:12]}"),
            ("id lookup: run id prefix (8 chars)", f"{base}?q={ids['run_id'][:8]}"),
            ("id lookup: whole session id", f"{base}?q={ids['session_id']}"),
            ("id lookup: session id prefix (14 chars)", f"{base}?q={ids['session_id'][:14]}"),
            ("id lookup: invocation id", f"{base}?q={ids['invocation_id']}"),
            ("text: English, common words", f"{base}?q=connection+pool"),
            ("text: English, rare phrase (0.1%)", f"{base}?q=kafka+consumer+lag"),
            ("text: Chinese 数据库连接池", f"{base}?q=数据库连接池"),
            ("text: Chinese 内存泄漏", f"{base}?q=内存泄漏"),
            ("filter: tool = query_alerts", f"{base}?tool=query_alerts"),
            ("filter: error code = worker_lost", f"{base}?error_code=worker_lost"),
            ("filter: model = qwen-plus", f"{base}?model=qwen-plus"),
            ("filter: latency 20000- ms", f"{base}?latency=20000-"),
            ("filter: tokens 10000-10400", f"{base}?tokens=10000-10400"),
            ("filter: service = ledger-service", f"{base}?service=ledger-service"),
            ("filter: status FAILED", f"{base}?status__exact=FAILED"),
            ("filter: degraded", f"{base}?degraded__exact=1"),
            ("filter: verdict LOW_CONFID", f"{base}?verdict=LOW_CONFID"),
            ("filter: feedback not useful", f"{base}?feedback=not_useful"),
            ("review queue, first page", f"{base}review-queue/"),
            ("text + filter: connection pool, degraded", f"{base}?q=connection+pool&degraded__exact=1"),
            ("text: answer/root cause 'exhausted'", f"{base}?q=exhausted"),
            ("sorted: duration, slowest first", f"{base}?o=-8"),
            ("tool invocations: search by run id", f"/admin/diagnosis/toolinvocation/?q={ids['run_id']}"),
            ("tool invocations: search by session id", f"/admin/diagnosis/toolinvocation/?q={ids['session_id']}"),
            ("agent steps: search by run id", f"/admin/diagnosis/agentstep/?q={ids['run_id']}"),
            ("sessions list, first page", "/admin/diagnosis/chatsession/"),
        ]
        vendor = connection.vendor
        if vendor == "mysql":
            vendor = "MariaDB" if connection.mysql_is_mariadb else "MySQL"
        print(f"\n{vendor} {connection.Database.sqlite_version if vendor == 'sqlite' else ''}, {args.runs:,} runs, "
              f"{args.repeat} timed requests per case after one warm-up; {machine_line()}")
        print(f"{'case':<44} {'median ms':>10} {'p95 ms':>8}  status")
        for label, url in cases:
            median, p95, status = time_get(client, url, args.repeat)
            print(f"{label:<44} {median:>10.1f} {p95:>8.1f}  {status}", flush=True)
        # The text search without the page around it: the lookup, the first page's ids, the capped count.
        from diagnosis.models import DiagnosisRun
        from traces.search import TEXT_COUNT_CAP, runs_lookup

        def search_alone(term: str) -> str:
            lookup = runs_lookup(DiagnosisRun.objects.all(), term)
            rows = lookup.queryset.order_by("-created_at", "-id")
            list(rows.values_list("id", flat=True)[:50])
            counted = rows.order_by().values("pk")[:TEXT_COUNT_CAP + 1].count()
            return f"{lookup.path}, {'more than ' if counted > TEXT_COUNT_CAP else ''}{min(counted, TEXT_COUNT_CAP)} matches"

        print(f"{'search alone (lookup, first page, count)':<44} {'median ms':>10} {'p95 ms':>8}  path")
        for term in ("connection pool", "kafka consumer lag", "数据库连接池", "内存泄漏", "ledger"):
            outcome = search_alone(term)
            samples = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                search_alone(term)
                samples.append((time.perf_counter() - t0) * 1000)
            samples.sort()
            print(f"{'  ' + term:<44} {samples[len(samples) // 2]:>10.1f} {percentile(samples, 95):>8.1f}  {outcome}",
                  flush=True)


if __name__ == "__main__":
    main()
