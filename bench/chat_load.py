"""POST /api/chat with wait=false under concurrent clients: p50/p95 latency and requests/s.

Starts a WSGI server on a free 127.0.0.1 port against a fresh database, creates one API user and
token per client, and has N client threads (http.client, one connection per request) post
questions until a request count or a time cap is reached. Servers:
  pool (default)     bench/_pooled_wsgi.py: Django's WSGI app behind a fixed pool of threads
                     (--threads, default 8), like `gunicorn --threads 8`;
  runserver          `manage.py runserver --noreload` (SQLite only: it starts a thread, hence a new
                     database connection kept for CONN_MAX_AGE=60 s, per request, which exhausts
                     MySQL's max_connections under this load).

Modes:
  enqueue (default)  REDIS_URL=redis://127.0.0.1:6379/14 and no worker: the request validates,
                     creates the session and the PENDING run, and enqueues the task. Redis db 14 is
                     emptied before and after.
  eager              no Redis: the embedded default, where the task runs in the request, so
                     wait=false still returns only after the whole offline diagnosis (the full path).

The per-user throttle and active-run cap are raised for the bench (CHAT_THROTTLE_RATE,
CHAT_MAX_ACTIVE_RUNS), since without a worker every run stays PENDING.

    .venv/bin/python bench/chat_load.py [--mysql | --sqlite-tuned] [--mode enqueue|eager] [--server pool|runserver]
                                        [--threads 8] [--clients 20] [--requests 400]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter

from _support import ROOT, BenchDatabase, machine_line, percentile, redis_flush_bench_db, summary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, proc: subprocess.Popen, log_path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}):\n{open(log_path).read()[-3000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/api/health")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the server did not answer within {timeout:.0f}s:\n{open(log_path).read()[-3000:]}")


def post_chat(port: int, token: str, body: dict) -> tuple[int, float, dict | None]:
    payload = json.dumps(body).encode()
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/api/chat", body=payload, headers={
            "Authorization": f"Token {token}", "Content-Type": "application/json", "Connection": "close"})
        response = conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - start
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = None
        return response.status, elapsed, parsed
    except OSError as exc:
        return 0, time.perf_counter() - start, {"error": str(exc)}
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mysql", action="store_true", help="use a fresh MySQL database bench_chat_load")
    parser.add_argument("--mode", choices=("enqueue", "eager"), default="enqueue")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=None, help="total requests (default 400 enqueue, 100 eager)")
    parser.add_argument("--seconds", type=float, default=90, help="time cap of the load phase")
    parser.add_argument("--server", choices=("pool", "runserver"), default="pool")
    parser.add_argument("--threads", type=int, default=8, help="server threads of --server pool")
    parser.add_argument("--sequential", type=int, default=None,
                        help="requests of one client alone before the load (default 40 enqueue, 5 eager)")
    parser.add_argument("--sqlite-tuned", action="store_true",
                        help="what-if: SQLite with WAL and IMMEDIATE transactions (bench/whatif_settings.py)")
    args = parser.parse_args()
    if args.sqlite_tuned and args.mysql:
        parser.error("--sqlite-tuned applies to SQLite only")
    if args.server == "runserver" and args.mysql:
        parser.error("runserver opens one MySQL connection per request thread (CONN_MAX_AGE=60): use --server pool")
    total = args.requests or (400 if args.mode == "enqueue" else 100)
    enqueue = args.mode == "enqueue"
    if args.sequential is None:
        args.sequential = 40 if enqueue else 5

    db = BenchDatabase(mysql=args.mysql, name="bench_chat_load", redis=enqueue,
                       extra_env={"CHAT_MAX_ACTIVE_RUNS": "1000", "CHAT_THROTTLE_RATE": "1000000/min"},
                       sqlite_tuned=args.sqlite_tuned)
    proc = None
    try:
        db.setup_django()
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.db import connections
        from rest_framework.authtoken.models import Token

        from diagnosis.models import DiagnosisRun

        if enqueue:
            redis_flush_bench_db()
        else:
            from pathlib import Path

            from diagnosis.services.knowledge import knowledge_load_folder

            root = Path(settings.DEMO_SCENARIOS_DIR)
            for folder in sorted(d / "runbooks" for d in root.iterdir() if (d / "runbooks").is_dir()):
                knowledge_load_folder(folder=folder, prefix="runbooks/")
        tokens = []
        for i in range(args.clients):
            user = get_user_model().objects.create_user(username=f"load{i}")
            tokens.append(Token.objects.create(user=user).key)
        connections.close_all()

        port = free_port()
        log_path = db.tmpdir / "server.log"
        log = open(log_path, "w")
        if args.server == "runserver":
            command = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
            server = "runserver (a thread per request)"
        else:
            command = [sys.executable, str(ROOT / "bench" / "_pooled_wsgi.py"), "--port", str(port), "--threads", str(args.threads)]
            server = f"pooled WSGI server ({args.threads} threads)"
        proc = subprocess.Popen(command, cwd=ROOT, env=db.subprocess_env(), stdout=log, stderr=subprocess.STDOUT)
        wait_ready(port, proc, log_path)

        print(machine_line())
        print(f"mode {args.mode}: database {db.engine}{' (what-if: WAL + IMMEDIATE)' if args.sqlite_tuned else ''}, "
              f"{'Redis db 14 broker, no worker (runs stay PENDING)' if enqueue else 'eager tasks (the run executes in the request)'}; "
              f"{server} on 127.0.0.1:{port}; {args.clients} clients, up to {total} requests or {args.seconds:.0f} s")
        questions = ["Why is payment-service failing?", "order-service pods keep restarting, why?",
                     "Why is user-service slow?", "inventory-service 为什么写入失败？"]
        for i, token in enumerate(tokens):  # warm-up: one request per client (creates its session), not counted
            status, _, body = post_chat(port, token, {"question": questions[0], "sessionId": f"load-{i}", "wait": False})
            if status not in (200, 202):
                raise SystemExit(f"warm-up request failed: {status} {body}")

        single = []
        for n in range(args.sequential):  # one client alone: the unloaded latency
            status, elapsed, body = post_chat(port, tokens[0], {"question": questions[n % len(questions)],
                                                                 "sessionId": "load-0", "wait": False})
            if status in (200, 202):
                single.append(elapsed * 1000)
        if single:
            p50, p95 = summary(single)
            print(f"1 client, {len(single)} sequential requests: p50 {p50:8.2f} ms   p95 {p95:8.2f} ms "
                  f"({1000 / statistics.mean(single):.1f} requests/s)")

        lock = threading.Lock()
        issued = [0]
        results: list[tuple[int, float]] = []
        errors: Counter = Counter()
        deadline = time.monotonic() + args.seconds

        def client(i: int) -> None:
            while True:
                with lock:
                    if issued[0] >= total or time.monotonic() > deadline:
                        return
                    n = issued[0]
                    issued[0] += 1
                status, elapsed, body = post_chat(port, tokens[i], {
                    "question": questions[n % len(questions)], "sessionId": f"load-{i}", "wait": False})
                with lock:
                    results.append((status, elapsed))
                    if status not in (200, 202):
                        errors[f"{status} {(body or {}).get('error', body)}"[:160]] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started

        ok = [e * 1000 for s, e in results if s in (200, 202)]
        statuses = Counter(s for s, _ in results)
        print(f"{args.clients} concurrent clients: requests {len(results)} in {wall:.2f} s: statuses {dict(sorted(statuses.items()))}")
        if ok:
            p50, p95 = summary(ok)
            print(f"latency (2xx)  p50 {p50:8.2f} ms   p95 {p95:8.2f} ms   p99 {percentile(ok, 99):8.2f} ms   max {max(ok):8.2f} ms")
        print(f"throughput     {len(ok) / wall:8.1f} successful requests/s ({len(results) / wall:.1f} requests/s in all)")
        for message, count in errors.most_common(5):
            print(f"  {count} x {message}")
        if errors:
            log.flush()
            text = open(log_path).read()
            where = Counter(ln.strip() for ln in text.splitlines() if ln.strip().startswith('File "' + str(ROOT) + "/diagnosis"))
            kinds = Counter(ln.strip() for ln in text.splitlines() if ln.startswith("django.db.utils."))
            print("server log: " + "; ".join(f"{n} x {k}" for k, n in kinds.most_common(3)))
            for frame, n in where.most_common(4):
                print(f"  {n} x {frame[:200]}")
        runs = Counter(DiagnosisRun.objects.values_list("status", flat=True))
        print(f"runs in the database: {dict(runs)}")
        if enqueue:
            import redis

            from _support import BENCH_REDIS_URL

            r = redis.Redis.from_url(BENCH_REDIS_URL)
            print(f"messages waiting in Redis db 14 queue 'diagnosis': {r.llen('diagnosis')}")
            r.close()
        connections.close_all()
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if enqueue:
            redis_flush_bench_db()
        db.cleanup()


if __name__ == "__main__":
    main()
