"""Celery throughput: diagnosis runs per second through real worker processes, and the queue wait.

MySQL (a fresh database bench_celery) and Redis db 14 (emptied before and after); the offline
analyser and the demo telemetry, with the demo runbooks loaded. Starts worker processes
(`celery -A config worker`, prefork; by default two workers of concurrency 1), warms each up, then
enqueues N runs through `run_submit` (the same service POST /api/chat calls) and waits until every
run is terminal. With --rate the runs are enqueued at a steady pace instead of all at once, so the queue wait shows
the dispatch latency below saturation. Reports runs/s from the first run's created_at to the last
run's finished_at,
the queue wait (created_at -> started_at, i.e. until a worker claimed the run) and the run time
(started_at -> finished_at). The workers are stopped at the end (SIGTERM, warm shutdown).

    .venv/bin/python bench/celery_throughput.py [--runs 60] [--workers 2] [--concurrency 1] [--rate R]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _support import ROOT, BenchDatabase, machine_line, percentile, redis_flush_bench_db, summary


def start_worker(db: BenchDatabase, index: int, concurrency: int) -> tuple[subprocess.Popen, Path]:
    log_path = db.tmpdir / f"worker{index}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "INFO", "-Q", "diagnosis", "-P", "prefork",
         "-c", str(concurrency), "-n", f"bench{index}-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
         "--without-heartbeat"],
        cwd=ROOT, env=db.subprocess_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    return proc, log_path


def wait_ready(workers, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    pending = list(workers)
    while pending:
        for proc, log_path in list(pending):
            text = log_path.read_text()
            if " ready." in text:
                pending.remove((proc, log_path))
            elif proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"a celery worker did not start (exit {proc.returncode}):\n{text[-3000:]}")
        time.sleep(0.2)


def stop_workers(workers) -> None:
    for proc, _ in workers:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc, _ in workers:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker's own process group (start_new_session)
            proc.wait()


def submit(user, questions, count: int, rate: float | None = None) -> tuple[list[str], list[float]]:
    """Enqueue `count` runs at once, or paced at `rate` runs per second."""
    from diagnosis.services.submission import run_submit

    run_ids, latencies = [], []
    begin = time.perf_counter()
    for i in range(count):
        if rate:
            time.sleep(max(0.0, begin + i / rate - time.perf_counter()))
        start = time.perf_counter()
        submission = run_submit(user=user, question=questions[i % len(questions)], mode="diagnosis")
        latencies.append((time.perf_counter() - start) * 1000)
        run_ids.append(submission.run.run_id)
    return run_ids, latencies


def wait_terminal(run_ids: list[str], deadline: float) -> bool:
    from diagnosis.models import DiagnosisRun

    while time.monotonic() < deadline:
        done = DiagnosisRun.objects.filter(run_id__in=run_ids, status__in=DiagnosisRun.TERMINAL).count()
        if done == len(run_ids):
            return True
        time.sleep(0.1)
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=1, help="prefork children per worker")
    parser.add_argument("--seconds", type=float, default=150, help="time cap for the measured runs")
    parser.add_argument("--rate", type=float, default=None,
                        help="enqueue at this many runs/s instead of all at once (queue wait below saturation)")
    args = parser.parse_args()

    db = BenchDatabase(mysql=True, name="bench_celery", redis=True, extra_env={"CHAT_MAX_ACTIVE_RUNS": "1000"})
    workers = []
    try:
        db.setup_django()
        redis_flush_bench_db()
        from django.conf import settings
        from django.db import connections

        from diagnosis.demo.loader import load_scenario_meta
        from diagnosis.models import DiagnosisRun
        from diagnosis.services.knowledge import knowledge_load_folder

        from _support import bench_user

        root = Path(settings.DEMO_SCENARIOS_DIR)
        scenarios = sorted(d for d in root.iterdir() if (d / "scenario.json").exists())
        for folder in scenarios:
            if (folder / "runbooks").is_dir():
                knowledge_load_folder(folder=folder / "runbooks", prefix="runbooks/")
        questions = [load_scenario_meta(folder)["default_question"]["en"] for folder in scenarios]
        user = bench_user()

        print(machine_line())
        print(f"MySQL database {db.name}, Redis db 14; {args.workers} worker process(es) x prefork concurrency "
              f"{args.concurrency}; offline analyser, demo telemetry, {len(questions)} scenario questions in turn")
        workers = [start_worker(db, i, args.concurrency) for i in range(args.workers)]
        wait_ready(workers)

        # Warm-up: every worker child loads the demo world and builds the knowledge index once.
        warm_ids, _ = submit(user, questions, 2 * args.workers * args.concurrency)
        if not wait_terminal(warm_ids, time.monotonic() + 90):
            raise SystemExit("the warm-up runs did not finish within 90 s; see the worker logs in " + str(db.tmpdir))

        run_ids, enqueue_ms = submit(user, questions, args.runs, args.rate)
        print(f"enqueued {args.runs} runs " + (f"paced at {args.rate:g} runs/s" if args.rate else "at once (a burst)"))
        finished = wait_terminal(run_ids, time.monotonic() + args.seconds)
        connections.close_all()
        rows = list(DiagnosisRun.objects.filter(run_id__in=run_ids).order_by("created_at", "id").values_list(
            "status", "created_at", "started_at", "finished_at", "effective_verdict", "degraded"))
        statuses = Counter(r[0] for r in rows)
        done = [r for r in rows if r[0] in DiagnosisRun.TERMINAL and r[2] and r[3]]
        e50, e95 = summary(enqueue_ms)
        print(f"enqueue (run_submit: validate, session, run row, task to Redis) p50 {e50:.2f} ms  p95 {e95:.2f} ms")
        print(f"runs: {len(rows)} measured, statuses {dict(statuses)}, verdicts "
              f"{dict(Counter(r[4] or '-' for r in done))}, degraded {sum(1 for r in done if r[5])}"
              + ("" if finished else f"  (TIME CAP of {args.seconds:.0f} s reached)"))
        if done:
            first = min(r[1] for r in rows)
            last = max(r[3] for r in done)
            span = (last - first).total_seconds()
            waits = [(r[2] - r[1]).total_seconds() * 1000 for r in done]
            durations = [(r[3] - r[2]).total_seconds() * 1000 for r in done]
            w50, w95 = summary(waits)
            d50, d95 = summary(durations)
            slots = args.workers * args.concurrency
            print(f"throughput: {len(done)} runs in {span:.2f} s (first created_at -> last finished_at) = "
                  f"{len(done) / span:.2f} runs/s ({len(done) / span / slots:.2f} per worker slot)"
                  + (" -- paced: bounded by the arrival rate, not capacity" if args.rate else ""))
            print(f"queue wait (created_at -> started_at)  p50 {w50:9.1f} ms  p95 {w95:9.1f} ms  max {max(waits):9.1f} ms")
            print(f"run time   (started_at -> finished_at) p50 {d50:9.1f} ms  p95 {d95:9.1f} ms  max {max(durations):9.1f} ms")
            if not args.rate:
                print("all runs were enqueued at once, so the queue wait is the backlog: the last run waits ~ N / throughput")
            first_wait = waits[: max(1, slots)]
            print(f"queue wait of the first {len(first_wait)} run(s), with idle workers: "
                  f"{', '.join(f'{w:.1f}' for w in first_wait)} ms (p99 of all {percentile(waits, 99):.1f} ms)")
    finally:
        stop_workers(workers)
        try:
            redis_flush_bench_db()
        finally:
            db.cleanup()


if __name__ == "__main__":
    main()
