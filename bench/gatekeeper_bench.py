"""Benchmark of the evidence Gatekeeper and of secret redaction on large tool results.

Times ``verify_bindings`` for 50 bindings against a ``query_logs`` result of ~1 MB and ~10 MB, and
``redact_text`` / ``redact_value`` on ~1 MB, printing median and p95 in milliseconds.

    .venv/bin/python bench/gatekeeper_bench.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diagnosis.gatekeeper import InvocationRecord, Verdict, verify_bindings  # noqa: E402
from diagnosis.redaction import redact_text_counted, redact_value_counted  # noqa: E402

RUN_ID = "run-" + "0" * 32
MESSAGES = (
    "HikariPool-1 - Connection is not available, request timed out after {ms}ms.",
    "GET /api/v1/payments/{n} 500 in {ms}ms trace_id={hex}",
    "Processed batch of {n} events in {ms} ms (max_tokens=512, key=order:{n})",
    'upstream said "503 Service Unavailable"\n\tretrying http://inventory:8080/reserve attempt={n}',
    "GC pause {ms}ms, heap 93% of 2048MB; kubelet reports OOMKilled risk for pod payment-7d9f8c6b5-{hex}",
)


def logs_result(target_bytes: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    records, size = [], 0
    while size < target_bytes:
        i = len(records)
        message = rng.choice(MESSAGES).format(ms=rng.randint(1, 60000), n=rng.randint(1, 10**6), hex=f"{rng.getrandbits(64):016x}")
        record = {"timestamp": f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z", "service": "payment-service",
                  "level": rng.choice(("ERROR", "WARN", "INFO")), "message": message}
        records.append(record)
        size += len(json.dumps(record)) + 2
    return {"backend": "demo", "service": "payment-service", "query": "", "start": "2024-05-01T10:00:00Z",
            "end": "2024-05-01T11:00:00Z", "total": len(records), "records": records}


class Lookup:
    def __init__(self, records: list[InvocationRecord]) -> None:
        self.records = {r.invocation_id: r for r in records}

    def lookup(self, invocation_ids: Collection[str]) -> Iterable[InvocationRecord]:
        return [self.records[i] for i in invocation_ids if i in self.records]


def fifty_bindings(result: dict, *, whole_document: bool) -> dict:
    """45 citations of messages, 3 of whole records (quoted message), 2 fabricated; optionally 2 of `$`."""
    records = result["records"]
    n = len(records)
    evidence = []
    for k in range(50):
        i = (k * 7919) % n
        message = records[i]["message"]
        if k < 45:
            evidence.append((f"$.records[{i}].message", message[:60]))
        elif k < 48:
            evidence.append((f"$.records[{i}]", " ".join(message.split())[:70]))
        else:
            evidence.append((f"$.records[{i}].message", "Deadlock detected on table payments"))
    if whole_document:
        evidence[0] = ("$", " ".join(records[-1]["message"].split())[:70])
        evidence[1] = ("$.records", "Deadlock detected on table payments")
    claims = [
        {"claim_id": f"c{c}", "statement": f"claim {c}",
         "evidence": [{"source_invocation_id": "inv-00000001", "tool_name": "query_logs", "raw_path": path,
                       "evidence_excerpt": excerpt} for path, excerpt in evidence[c * 5:(c + 1) * 5]]}
        for c in range(10)
    ]
    return {"version": "executor_evidence_v2", "summary": "", "claims": claims, "open_questions": []}


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    fn()  # warm-up (regex and path caches)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    p95 = statistics.quantiles(samples, n=20, method="inclusive")[18] if len(samples) > 1 else samples[0]
    return statistics.median(samples), p95


def report(label: str, fn: Callable[[], object], repeats: int) -> None:
    median, p95 = timed(fn, repeats)
    print(f"{label:<62} median {median:8.2f} ms   p95 {p95:8.2f} ms   (n={repeats})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    print(f"python {sys.version.split()[0]}")
    for target in (1_000_000, 10_000_000):
        result = logs_result(target)
        size = len(json.dumps(result))
        lookup = Lookup([InvocationRecord("inv-00000001", RUN_ID, "query_logs", "SUCCESS", result)])
        repeats = args.repeats if target <= 1_000_000 else max(5, args.repeats // 3)
        for whole in (False, True):
            output = fifty_bindings(result, whole_document=whole)
            check = verify_bindings(executor_output=output, run_id=RUN_ID, lookup=lookup)
            assert check.verdict == Verdict.PASS, check.reason_code
            assert check.verified_binding_count == (47 if whole else 48), check.verified_binding_count
            label = f"verify_bindings 50 bindings, {size / 1e6:5.1f} MB result" + (", 2 cite $ / $.records" if whole else "")
            report(label, lambda o=output: verify_bindings(executor_output=o, run_id=RUN_ID, lookup=lookup), repeats)

    result = logs_result(1_000_000, seed=11)
    lines = [f"{r['timestamp']} {r['service']} {r['level']} {r['message']}" for r in logs_result(1_500_000, seed=13)["records"]]
    text = "\n".join(lines)[:1_000_000]
    report(f"redact_text {len(text) / 1e6:4.1f} MB of log lines, no secrets", lambda: redact_text_counted(text), args.repeats)
    lines = text.split("\n")
    for i in range(0, len(lines), 100):
        lines[i] += f" password=hunter{i} Authorization: Bearer tok{i}.abc sk-canary{i:020d}"
    seeded = "\n".join(lines)
    _, count = redact_text_counted(seeded)
    report(f"redact_text {len(seeded) / 1e6:4.1f} MB of log lines, {count} secrets", lambda: redact_text_counted(seeded),
           args.repeats)
    report(f"redact_value {len(json.dumps(result)) / 1e6:4.1f} MB query_logs result ({len(result['records'])} records)",
           lambda: redact_value_counted(result), args.repeats)


if __name__ == "__main__":
    main()
