"""Live progress at scale: 200 concurrent SSE clients on ONE web process, three designs side by side
in the same run, on MySQL:

- `polling-wsgi`: the previous design — a WSGI thread per stream (gunicorn gthread, 220 threads)
  polling the database every 0.2 s;
- `polling-asgi`: the embedded default's fallback — gunicorn + one uvicorn worker, no Redis, an
  asynchronous database poll (SSE_POLL_SECONDS, 0.25 s);
- `pushed-asgi`: production — gunicorn + one uvicorn worker, Redis pub/sub (db 14).

For each: SQL statements per idle stream per minute (counted inside the web process), `/api/health`
p50/p95 while the 200 streams are open, and event delivery latency from the write (a
`run_event_append` in this process) to the client, p50/p95.

    .venv/bin/python bench/sse_streams.py [--clients 200] [--idle-seconds 15] [--events 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _support import ROOT, bench_database, bench_user, machine_line, percentile

import httpx

DESIGNS = {
    "polling-wsgi": {"app": "config.wsgi:application", "redis": False,
                     "args": ["--worker-class", "gthread", "--threads", "220"], "env": {"SSE_POLL_SECONDS": "0.2"}},
    "polling-asgi": {"app": "config.asgi:application", "redis": False, "args": [], "env": {}},
    "pushed-asgi": {"app": "config.asgi:application", "redis": True, "args": [], "env": {}},
}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(db, design: dict, port: int, log: Path) -> subprocess.Popen:
    env = db.subprocess_env(DJANGO_SETTINGS_MODULE="sse_query_counter", PORT=str(port), HOST="127.0.0.1",
                            WEB_CONCURRENCY="1", WEB_ACCESS_LOG="/dev/null", SSE_MAX_STREAMS_PER_USER="10000",
                            SSE_HEARTBEAT_SECONDS="15", PYTHONPATH=str(ROOT / "bench"), **design["env"])
    if not design["redis"]:
        env.pop("REDIS_URL", None)
    args = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", *design["args"], design["app"]]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code in (200, 503):
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"the server did not start:\n{log.read_text()[-2000:]}")


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


class Streams:
    """N SSE clients in one event loop; every received event's latency is computed from its `t`."""

    def __init__(self, base: str, token: str, run_ids: list[str], clients: int):
        self.base, self.token, self.run_ids, self.clients = base, token, run_ids, clients
        self.connected = 0
        self.refused: list[int] = []
        self.latencies: list[float] = []
        self.tasks: list[asyncio.Task] = []

    async def _one(self, http: httpx.AsyncClient, run_id: str):
        async with http.stream("GET", f"/api/runs/{run_id}/events", headers={"Accept": "text/event-stream"}) as response:
            if response.status_code != 200:
                self.refused.append(response.status_code)
                return
            async for line in response.aiter_lines():
                if line.startswith("retry:"):
                    self.connected += 1
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if "t" in data:
                        self.latencies.append(time.time() - data["t"])

    async def open(self):
        limits = httpx.Limits(max_connections=self.clients + 50, max_keepalive_connections=self.clients + 50)
        self.http = httpx.AsyncClient(base_url=self.base, headers={"Authorization": f"Token {self.token}"},
                                      timeout=httpx.Timeout(600, connect=30), limits=limits)
        self.tasks = [asyncio.create_task(self._one(self.http, self.run_ids[i % len(self.run_ids)]))
                      for i in range(self.clients)]
        deadline = time.monotonic() + 120
        while self.connected < self.clients:
            if self.connected + len(self.refused) >= self.clients:
                raise RuntimeError(f"{len(self.refused)} of {self.clients} streams refused (HTTP {sorted(set(self.refused))}), "
                                   f"{self.connected} open")
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.connected}/{self.clients} streams connected")
            await asyncio.sleep(0.1)

    async def close(self):
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.http.aclose()


async def measure(base: str, token: str, run_pks: list[int], run_ids: list[str], args) -> dict:
    from asgiref.sync import sync_to_async

    from diagnosis.services.observer import run_event_append

    async def queries() -> int:
        async with httpx.AsyncClient() as http:
            return (await http.get(base + "/bench/queries")).json()["queries"]

    streams = Streams(base, token, run_ids, args.clients)
    try:
        await streams.open()
    except RuntimeError:
        await streams.close()
        raise
    await asyncio.sleep(1)
    before = await queries()
    await asyncio.sleep(args.idle_seconds)
    idle_queries = await queries() - before  # /bench/queries itself makes none
    per_stream_minute = idle_queries / args.clients / (args.idle_seconds / 60)

    health = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for _ in range(args.health_requests):
            started = time.perf_counter()
            response = await http.get("/api/health")
            health.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.text

    write = sync_to_async(lambda pk, i: run_event_append(run_pk=pk, kind="node",
                                                         data={"node": "bench", "i": i, "t": time.time()}),
                          thread_sensitive=False)
    for i in range(args.events):
        await write(run_pks[i % len(run_pks)], i)
        await asyncio.sleep(args.event_interval)
    expected = args.events * (args.clients // len(run_pks))
    deadline = time.monotonic() + 10
    while len(streams.latencies) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    received = len(streams.latencies)
    await streams.close()
    lat = [x * 1000 for x in streams.latencies]
    return {"idle_queries_per_stream_minute": per_stream_minute, "health_p50_ms": percentile(health, 50),
            "health_p95_ms": percentile(health, 95), "delivery_p50_ms": percentile(lat, 50),
            "delivery_p95_ms": percentile(lat, 95), "delivered": received, "expected": expected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--runs", type=int, default=10, help="streams are spread over this many RUNNING runs")
    parser.add_argument("--idle-seconds", type=float, default=15)
    parser.add_argument("--health-requests", type=int, default=100)
    parser.add_argument("--events", type=int, default=60)
    parser.add_argument("--event-interval", type=float, default=0.05)
    parser.add_argument("--designs", default=",".join(DESIGNS))
    args = parser.parse_args()

    # Redis db 14 is not flushed: keys and channels here are namespaced by the bench database's name.
    with bench_database(mysql=True, name="bench_sse", redis=True) as db:
        from rest_framework.authtoken.models import Token

        from diagnosis.models import ChatSession, DiagnosisRun
        user = bench_user("sse-bench")
        token = Token.objects.get_or_create(user=user)[0].key
        session = ChatSession.objects.create(owner=user, session_id="sse-bench")
        print(machine_line())
        print(f"{args.clients} SSE clients over {args.runs} RUNNING runs, one web process, MySQL; idle {args.idle_seconds:g} s; "
              f"{args.health_requests} sequential /api/health; {args.events} events written {args.event_interval * 1000:g} ms apart")
        print(f"{'design':14} {'idle SQL/stream/min':>20} {'health p50':>11} {'health p95':>11} "
              f"{'delivery p50':>13} {'delivery p95':>13} {'delivered':>11}")
        for name in args.designs.split(","):
            # Fresh runs per design: a stream replays its run's history, which must not count as delivery.
            runs = [DiagnosisRun.objects.create(session=session, question=f"{name} {i}", status=DiagnosisRun.Status.RUNNING)
                    for i in range(args.runs)]
            port = free_port()
            log = db.tmpdir / f"{name}.log"
            proc = start_server(db, DESIGNS[name], port, log)
            try:
                result = asyncio.run(measure(f"http://127.0.0.1:{port}", token, [r.pk for r in runs],
                                             [r.run_id for r in runs], args))
            except RuntimeError as exc:
                errors = sorted({line for line in log.read_text().splitlines() if "Error" in line})[-3:]
                print(f"{name:14} FAILED: {exc}; server errors: {errors}", flush=True)
                continue
            finally:
                stop_server(proc)
            print(f"{name:14} {result['idle_queries_per_stream_minute']:>20.1f} {result['health_p50_ms']:>9.1f}ms "
                  f"{result['health_p95_ms']:>9.1f}ms {result['delivery_p50_ms']:>11.1f}ms {result['delivery_p95_ms']:>11.1f}ms "
                  f"{result['delivered']:>5}/{result['expected']}", flush=True)


if __name__ == "__main__":
    main()
