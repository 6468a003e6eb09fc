"""Soak: the Procfile stack under sustained load and faults, on its own MariaDB and Redis.

Starts a MariaDB (its own data directory and port) and a Redis (append-only file, so a restart keeps the
queue) of its own, the web process (gunicorn + uvicorn workers, config/gunicorn.py), WORKERS Celery workers
and beat, and an OpenAI-compatible fake model answering every call after 0.2-1 s. Then C clients submit N
chat runs (`wait=false`) while S clients keep event streams open on them. A third of the way in one worker
is SIGKILLed (process group) and started again; at 60% Redis is restarted. At the end it reports:

- runs lost (accepted, never ended), duplicated (executed more than once), stuck (not terminal at the end),
  wrongly FAILED (any FAILED run except `worker_lost` on a run RUNNING when the worker was killed);
- the peak of database connections (the server's `Max_used_connections`) against the bound of
  docs/DEPLOY.md, "Database connections";
- RSS of every process after warm-up and at the end, and its growth;
- end-to-end latency (created -> finished, database timestamps), p50 and p95.

Exit status 1 when a run is lost, stuck or wrongly FAILED, or the peak passes the bound.

    .venv/bin/python bench/soak.py --runs 1000 --clients 30 --streams 100      # the long soak
    .venv/bin/python bench/soak.py --runs 60 --clients 8 --streams 10          # CI (tests/reliability/test_soak.py)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import MySQLdb
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._support import BASE_ENV, percentile  # noqa: E402
from tests.reliability.scripted import HAPPY, ROLES  # noqa: E402  (the fake model's scripts: bench and test code only)
from tests.support.fake_openai import FakeOpenAI, Reply  # noqa: E402
from tests.support.fixtures import FAKE_API_KEY  # noqa: E402

PY = sys.executable
QUESTION = "Why is payment-service failing? (soak {i})"
MARGIN = 10  # docs/DEPLOY.md: release step, manage.py commands, an admin shell, monitoring
ASYNCIO_POOL = min(32, (os.cpu_count() or 1) + 4)


def wait_until(predicate, seconds: float, what: str, interval: float = 0.3):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(interval)
    raise RuntimeError(f"timed out after {seconds}s waiting for {what}")


# --------------------------------------------------------------------------------- own services
class OwnMariaDB:
    def __init__(self, workdir: Path, port: int):
        self.dir, self.port, self.proc = workdir / "mariadb", port, None

    def start(self) -> None:
        if not (self.dir / "data").exists():
            self.dir.mkdir(parents=True)
            subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.dir / 'data'}", "--user=root",
                            "--auth-root-authentication-method=normal", "--skip-test-db"],
                           check=True, capture_output=True, timeout=180)
        log = open(self.dir / "server.log", "a")
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={self.dir / 'data'}", f"--port={self.port}", "--bind-address=127.0.0.1",
             f"--socket={self.dir / 'sock'}", f"--pid-file={self.dir / 'pid'}", "--user=root", "--skip-log-bin",
             "--innodb-buffer-pool-size=64M", "--max-connections=151"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: self.connect().close() is None, 60, "mariadbd")

    def connect(self, db: str | None = None):
        return MySQLdb.connect(host="127.0.0.1", port=self.port, user="root", **({"database": db} if db else {}))

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)


class OwnRedis:
    def __init__(self, workdir: Path, port: int):
        self.dir, self.port, self.proc = workdir / "redis", port, None
        self.dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        log = open(self.dir / "server.log", "a")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--save", "",
             "--appendonly", "yes", "--appendfsync", "everysec"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True,
                                          text=True).stdout.strip() == "PONG", 30, "redis-server")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: Redis flushes its append-only file and exits
            self.proc.wait(timeout=30)


# --------------------------------------------------------------------------------- the model
def slow(reply, rng: random.Random, lock: threading.Lock):
    """The happy script, each answer after 0.2-1 s."""
    def respond(request):
        answer = reply(request) if callable(reply) else reply
        with lock:
            delay = rng.uniform(0.2, 1.0)
        return replace(answer, stall_seconds=delay)
    return respond


def start_model() -> FakeOpenAI:
    fake = FakeOpenAI().start()
    rng, lock = random.Random(28), threading.Lock()
    for role in ROLES:
        fake.always(slow(HAPPY[role], rng, lock), role=role)
    return fake


# --------------------------------------------------------------------------------- the stack
class Stack:
    def __init__(self, args, workdir: Path, env: dict):
        self.args, self.workdir, self.env = args, workdir, env
        self.web = None
        self.workers: list[subprocess.Popen] = []
        self.beat = None
        self.logs: list = []

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "a")
        self.logs.append(log)
        return subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def start_worker(self, index: int) -> subprocess.Popen:
        proc = self._spawn(f"worker{index}", [PY, "-m", "celery", "-A", "config", "worker", "-l", "INFO",
                                              "-Q", "diagnosis,maintenance", "-c", str(self.args.worker_concurrency),
                                              "-n", f"soak{index}-{time.time_ns()}@%h", "--without-gossip",
                                              "--without-mingle"])
        wait_until(lambda: " ready." in (self.workdir / f"worker{index}.log").read_text(), 90, f"worker {index}")
        return proc

    def start(self) -> None:
        self.web = self._spawn("web", [PY, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.asgi:application"])
        wait_until(lambda: httpx.get(f"{self.args.base_url}/api/health", timeout=5).status_code == 200, 90, "gunicorn")
        self.workers = [self.start_worker(i) for i in range(self.args.workers)]
        self.beat = self._spawn("beat", [PY, "-m", "celery", "-A", "config", "beat", "-l", "INFO",
                                         "-s", str(self.workdir / "beat-schedule"), "--pidfile="])

    def processes(self) -> dict[str, list[int]]:
        """name -> pids (a process and its children)."""
        out = {}
        for name, proc in [("web", self.web), *((f"worker{i}", w) for i, w in enumerate(self.workers)), ("beat", self.beat)]:
            if proc is None or proc.poll() is not None:
                continue
            try:
                parent = psutil.Process(proc.pid)
                out[name] = [parent.pid, *(c.pid for c in parent.children(recursive=True))]
            except psutil.NoSuchProcess:
                pass
        return out

    def kill_worker(self, index: int) -> None:
        os.killpg(self.workers[index].pid, signal.SIGKILL)
        self.workers[index].wait(timeout=30)

    def stop(self) -> None:
        running = [proc for proc in [self.web, *self.workers, self.beat] if proc is not None and proc.poll() is None]
        for proc in running:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for log in self.logs:
            log.close()


# --------------------------------------------------------------------------------- the load
class Load:
    def __init__(self, args, tokens: list[str]):
        self.args, self.tokens = args, tokens
        self.lock = threading.Lock()
        self.next = 0
        self.accepted: dict[str, float] = {}  # run id -> submitted at
        self.refused: list[str] = []
        self.for_streams: list[str] = []
        self.stream_errors: dict[str, int] = {}
        self.stop = threading.Event()

    def take(self) -> int | None:
        with self.lock:
            if self.next >= self.args.runs:
                return None
            self.next += 1
            return self.next - 1

    def client(self, k: int) -> None:
        token = self.tokens[k % len(self.tokens)]
        with httpx.Client(base_url=self.args.base_url, headers={"Authorization": f"Token {token}"}, timeout=60) as http:
            while (i := self.take()) is not None:
                body = {"question": QUESTION.format(i=i), "wait": False, "sessionId": f"soak-session-{i}",
                        "requestId": f"soak-{i}"}  # a retried submission is the same run
                for attempt in range(30):  # a refusal during a fault (503) is retried with the same requestId
                    try:
                        response = http.post("/api/chat", json=body)
                    except httpx.HTTPError as exc:
                        response, error = None, str(exc)
                    if response is not None and response.status_code in (200, 202):
                        run_id = response.json()["runId"]
                        with self.lock:
                            self.accepted.setdefault(run_id, time.time())
                            self.for_streams.append((run_id, token))  # a stream reads its own user's run
                        break
                    with self.lock:
                        self.refused.append(f"{response.status_code if response is not None else error}")
                    if response is not None and response.status_code not in (429, 502, 503, 504):
                        break  # refused for good: counted, not retried
                    time.sleep(min(5.0, 0.5 * (attempt + 1)))
                time.sleep(self.args.think)

    def streamer(self, k: int) -> None:
        with httpx.Client(base_url=self.args.base_url, timeout=httpx.Timeout(30, read=60)) as http:
            while not self.stop.is_set():
                with self.lock:
                    run_id, token = self.for_streams.pop(0) if self.for_streams else (None, None)
                if run_id is None:
                    time.sleep(0.2)
                    continue
                http.headers["Authorization"] = f"Token {token}"
                last = None
                for _ in range(10):  # resume with Last-Event-ID after a dropped stream
                    try:
                        headers = {"Last-Event-ID": last} if last else {}
                        with http.stream("GET", f"/api/runs/{run_id}/events", headers=headers) as response:
                            if response.status_code != 200:
                                raise httpx.HTTPError(f"status {response.status_code}")
                            ended = False
                            for line in response.iter_lines():
                                if line.startswith("id: "):
                                    last = line[4:]
                                if line.startswith("data: ") and any(s in line for s in ('"SUCCESS"', '"FAILED"')) \
                                        and '"status"' in line:
                                    ended = True
                                    break
                            if ended:
                                break
                    except httpx.HTTPError as exc:
                        kind = str(exc)[:60] if "status" in str(exc) else type(exc).__name__
                        with self.lock:
                            self.stream_errors[kind] = self.stream_errors.get(kind, 0) + 1
                        time.sleep(1)


class Sampler:
    """Every second: the server's connection count and every process's RSS."""

    def __init__(self, db: OwnMariaDB, stack: Stack):
        self.db, self.stack = db, stack
        self.peak_threads = 0
        self.rss: dict[str, list[tuple[float, int]]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        conn = None
        while not self.stop.is_set():
            try:
                conn = conn or self.db.connect()
                cur = conn.cursor()
                cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
                self.peak_threads = max(self.peak_threads, int(cur.fetchone()[1]) - 1)  # not this sampler's own
            except MySQLdb.Error:
                conn = None
            now = time.time()
            for name, pids in self.stack.processes().items():
                for pid in pids:
                    try:
                        self.rss.setdefault(f"{name}:{pid}", []).append((now, psutil.Process(pid).memory_info().rss))
                    except psutil.NoSuchProcess:
                        pass
            self.stop.wait(1.0)


# --------------------------------------------------------------------------------- the report
def report(args, db: OwnMariaDB, load: Load, sampler: Sampler, killed_runs: set[str], warm_at: float, elapsed: float) -> dict:
    conn = db.connect("aiops_soak")
    cur = conn.cursor()
    cur.execute("SELECT run_id, status, error_code, TIMESTAMPDIFF(MICROSECOND, created_at, finished_at) FROM diagnosis_run "
                "WHERE question LIKE 'Why is payment-service failing? (soak %%'")
    rows = {r[0]: r[1:] for r in cur.fetchall()}
    cur.execute("SELECT r.run_id, COUNT(*) FROM run_event e JOIN diagnosis_run r ON e.run_id = r.id "
                "WHERE e.kind = 'status' AND e.data LIKE '%%RUNNING%%' GROUP BY r.run_id HAVING COUNT(*) > 1")
    duplicated = sorted(r[0] for r in cur.fetchall())
    cur.execute("SHOW GLOBAL STATUS LIKE 'Max_used_connections'")
    max_used = int(cur.fetchone()[1])
    conn.close()
    accepted = set(load.accepted)
    lost = sorted(accepted - set(rows))
    stuck = sorted(r for r, (status, _, _) in rows.items() if status not in ("SUCCESS", "FAILED"))
    failed = {r: code for r, (status, code, _) in rows.items() if status == "FAILED"}
    expected = {r: c for r, c in failed.items() if c == "worker_lost" and r in killed_runs}
    wrongly = {r: c for r, c in failed.items() if r not in expected}
    e2e = [us / 1e6 for (_, _, us) in rows.values() if us is not None]
    bound = connection_bound(args)
    rss = {}
    for key, samples in sampler.rss.items():
        warm = [v for t, v in samples if t >= warm_at]
        if samples[0][0] > warm_at + 2:  # started after warm-up (the restarted worker): no baseline
            continue
        if len(warm) >= 2:
            rss[key] = {"afterWarmupMB": round(warm[0] / 2**20, 1), "endMB": round(warm[-1] / 2**20, 1),
                        "growthPct": round(100 * (warm[-1] - warm[0]) / warm[0], 1)}
    figures = {
        "runs": args.runs, "clients": args.clients, "streams": args.streams, "elapsedSeconds": round(elapsed),
        "accepted": len(accepted), "refusedAttempts": len(load.refused), "refusedStatuses": sorted(set(load.refused)),
        "success": sum(1 for s, _, _ in rows.values() if s == "SUCCESS"), "failed": len(failed),
        "lost": lost, "duplicated": duplicated, "stuck": stuck,
        "expectedFailed": expected, "wronglyFailed": wrongly, "streamErrors": load.stream_errors,
        "peakConnections": max(sampler.peak_threads, max_used - 1), "maxUsedConnections": max_used,
        "connectionBound": bound, "rss": rss,
        "rssMaxGrowthPct": max((v["growthPct"] for v in rss.values()), default=None),
        "e2eSeconds": {"p50": round(percentile(e2e, 50), 2), "p95": round(percentile(e2e, 95), 2)} if e2e else None,
    }
    figures["ok"] = not (lost or stuck or wrongly or duplicated) and figures["peakConnections"] <= bound
    return figures


def connection_bound(args) -> int:
    """docs/DEPLOY.md: requests in flight (C clients + S streams opening) + W x P + workers x (2c + 1) + beat + M."""
    web = args.clients + args.streams + args.web_workers * ASYNCIO_POOL
    return web + args.workers * (2 * args.worker_concurrency + 1) + 1 + MARGIN


def running_now(db: OwnMariaDB) -> set[str]:
    """Runs RUNNING at this moment: the killed worker's are among them (runs record no worker name)."""
    conn = db.connect("aiops_soak")
    cur = conn.cursor()
    cur.execute("SELECT run_id FROM diagnosis_run WHERE status = 'RUNNING'")
    found = {r[0] for r in cur.fetchall()}
    conn.close()
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--clients", type=int, default=30)
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--web-workers", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker-concurrency", type=int, default=2)
    p.add_argument("--think", type=float, default=0.5, help="seconds a client waits between two submissions")
    p.add_argument("--mariadb-port", type=int, default=3421)
    p.add_argument("--redis-port", type=int, default=6421)
    p.add_argument("--web-port", type=int, default=8121)
    p.add_argument("--stuck-after", type=float, default=180,
                   help="the runs left are stuck once none has ended for this many seconds")
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = p.parse_args()
    args.base_url = f"http://127.0.0.1:{args.web_port}"

    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    db, redis_server, model = OwnMariaDB(workdir, args.mariadb_port), OwnRedis(workdir, args.redis_port), None
    stack = None
    try:
        db.start()
        conn = db.connect()
        conn.cursor().execute("CREATE DATABASE aiops_soak CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        conn.close()
        redis_server.start()
        model = start_model()
        env = {**{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}, **BASE_ENV,
               "DATABASE_URL": f"mysql://root@127.0.0.1:{args.mariadb_port}/aiops_soak",
               "REDIS_URL": f"redis://127.0.0.1:{args.redis_port}/0", "PYTHONUNBUFFERED": "1",
               "PORT": str(args.web_port), "HOST": "127.0.0.1", "WEB_CONCURRENCY": str(args.web_workers),
               "STATIC_ROOT": str(workdir / "static"), "LOG_LEVEL": "INFO",
               "LLM_PROVIDER": "openai", "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": FAKE_API_KEY,
               "OPENAI_MODEL": "fake-model", "LLM_CONNECT_TIMEOUT": "2", "LLM_READ_TIMEOUT": "10", "LLM_MAX_RETRIES": "1",
               "RUN_LEASE_SECONDS": "30", "RUN_REAPER_INTERVAL_SECONDS": "5",
               "CHAT_MAX_ACTIVE_RUNS": "1000", "CHAT_THROTTLE_RATE": "100000/min",
               "SSE_MAX_STREAMS_PER_USER": str(max(10, args.streams)), "SSE_HEARTBEAT_SECONDS": "5"}
        subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
        users = max(1, args.clients // 3)
        out = subprocess.run([PY, "manage.py", "shell", "-c", (
            "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token\n"
            f"for i in range({users}):\n"
            "    u = User.objects.create_user(f'soak{i}', password='x-soak-pass-1'); print('TOKEN', Token.objects.create(user=u).key)")],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=300)
        tokens = [line.split()[1] for line in out.stdout.splitlines() if line.startswith("TOKEN ")]
        stack = Stack(args, workdir, env)
        stack.start()
        sampler = Sampler(db, stack)
        sampler.thread.start()
        load = Load(args, tokens)
        started = time.time()
        clients = [threading.Thread(target=load.client, args=(k,), daemon=True) for k in range(args.clients)]
        streams = [threading.Thread(target=load.streamer, args=(k,), daemon=True) for k in range(args.streams)]
        for thread in clients + streams:
            thread.start()
        warm_at, killed_runs, faults = None, set(), []
        give_up, last_ended = None, -1
        while True:  # faults keyed to the share of runs ended, so they land while runs are in flight
            ended = ended_runs(db)
            done = ended / args.runs
            if warm_at is None and done >= 0.2:
                warm_at = time.time()
            clients_done = not any(t.is_alive() for t in clients)
            if ended != last_ended:  # stuck: no run has ended for --stuck-after seconds
                last_ended, give_up = ended, time.monotonic() + args.stuck_after
            if ended >= len(load.accepted) and clients_done and len(faults) == 2:
                break
            if time.monotonic() > give_up:
                break
            if not faults and done >= 1 / 3:
                held = running_now(db)
                stack.kill_worker(0)
                killed_runs |= held
                faults.append(f"worker 0 SIGKILLed at {time.time() - started:.0f}s ({len(held)} run(s) RUNNING on both workers)")
                time.sleep(2)
                stack.workers[0] = stack.start_worker(0)
            if len(faults) == 1 and done >= 0.6:
                redis_server.stop()
                time.sleep(2)
                redis_server.start()
                faults.append(f"Redis restarted at {time.time() - started:.0f}s")
            if clients_done and len(faults) < 2 and done >= 0.95:
                faults.append("a fault was not injected: the runs ended before it")
            time.sleep(0.5)
        submitted_at = time.time()
        load.stop.set()
        elapsed = time.time() - started
        sampler.stop.set()
        sampler.thread.join(timeout=10)
        figures = report(args, db, load, sampler, killed_runs, warm_at or submitted_at, elapsed)
        figures["faults"] = faults
        figures["command"] = " ".join(sys.argv)
        print(json.dumps(figures, indent=2))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return 0 if figures["ok"] else 1
    finally:
        if stack:
            stack.stop()
        if model:
            model.close()
        redis_server.stop()
        db.stop()
        if args.keep:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def ended_runs(db: OwnMariaDB) -> int:
    conn = db.connect("aiops_soak")
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM diagnosis_run WHERE status IN ('SUCCESS', 'FAILED')")
    count = cur.fetchone()[0]
    conn.close()
    return count


if __name__ == "__main__":
    sys.exit(main())
