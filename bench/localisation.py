"""What localisation costs as the evidence grows: services × series per service × log lines.

Builds a run's tool results in the recorded wire shapes (one ``query_logs`` and one ``query_metrics``
result per service, an hour at 60 s steps, one fault propagated to the callers), then times
``localise`` over them. Prints median and p95 per size, wall clock and this process's CPU time (on a
shared machine the CPU time is the steadier of the two: other processes' load stretches the wall clock).

    .venv/bin/python bench/localisation.py                      # 30 × 50 × 10,000 and 300 × 50 × 100,000 (~1 min)
    .venv/bin/python bench/localisation.py --sizes 30:50:10000 --repeat 9
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from diagnosis.localisation.outcome import localise  # noqa: E402

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
TEMPLATES = ("GET /v1/items/{n} 200 in {ms} ms", "cache refresh finished in {ms} ms", "user {n} signed in",
             "scheduled job {n} done", "WARN slow response from {peer} ({ms} ms)")


def _iso(seconds_before: float) -> str:
    return (NOW - timedelta(seconds=seconds_before)).isoformat().replace("+00:00", "Z")


def build(services: int, series: int, lines: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    names = [f"svc{i:03d}" for i in range(services)]
    root = names[-1]
    results: list[dict] = []
    start = NOW.timestamp() - 3600
    per_service = max(1, lines // services)
    for index, name in enumerate(names):
        peer = names[min(index + 1, services - 1)]
        faulty = name == root or index >= services - 3
        all_series = []
        for j in range(series):
            onset = 45 if faulty and j == 0 else 99
            values = [[start + 60 * k, str(round((1 + rng.random() * 0.05) * (20 if k >= onset else 1), 4))]
                      for k in range(60)]
            all_series.append({"labels": {"__name__": f"metric_{j}_seconds", "service": name}, "values": values,
                               "description": f"metric_{j}_seconds of {name}"})
        results.append({"invocation_id": f"inv-m{index:07x}", "tool_name": "query_metrics",
                        "arguments": {"service": name},
                        "result": {"start": _iso(3600), "end": _iso(0), "series": all_series}})
        records = []
        for k in range(per_service):
            at = 3600 - k * 3600 / per_service
            text = rng.choice(TEMPLATES).format(n=rng.randint(1, 99999), ms=rng.randint(1, 900), peer=peer)
            records.append({"timestamp": _iso(at), "service": name, "level": "INFO", "message": text})
        if faulty:
            records += [{"timestamp": _iso(800 - 20 * k), "service": name, "level": "ERROR",
                         "message": f"call to http://{peer}:8080/v1 failed: connection refused (attempt {k})"}
                        for k in range(30)]
        results.append({"invocation_id": f"inv-l{index:07x}", "tool_name": "query_logs",
                        "arguments": {"service": name, "limit": 500},
                        "result": {"start": _iso(3600), "end": _iso(0), "truncated": False, "records": records}})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="*", default=["30:50:10000", "300:50:100000"],
                        help="services:series:lines, one or more")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print("| services | series each | log lines | median ms | p95 ms | CPU median ms | CPU p95 ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        services, series, lines = (int(x) for x in size.split(":"))
        results = build(services, series, lines)
        wall, cpu = [], []
        for _ in range(args.repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            localise(results, ["svc000"])
            wall.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
        print(f"| {services} | {series} | {lines:,} | {statistics.median(wall):.0f} | {_p95(wall):.0f} "
              f"| {statistics.median(cpu):.0f} | {_p95(cpu):.0f} |")


def _p95(timings: list[float]) -> float:
    ordered = sorted(timings)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


if __name__ == "__main__":
    main()
