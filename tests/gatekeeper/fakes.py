"""Test doubles for the Gatekeeper: an in-memory invocation store and executor-output builders."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from diagnosis.gatekeeper import InvocationRecord

RUN_ID = "run-" + "a" * 32
OTHER_RUN_ID = "run-" + "b" * 32


class InMemoryLookup:
    """Holds invocations of several runs; records every batch it is asked for."""

    def __init__(self, records: Iterable[InvocationRecord] = ()) -> None:
        self.records = list(records)
        self.calls: list[tuple[str, ...]] = []

    def add(self, record: InvocationRecord) -> InvocationRecord:
        self.records.append(record)
        return record

    def lookup(self, invocation_ids: Collection[str]) -> Iterable[InvocationRecord]:
        self.calls.append(tuple(invocation_ids))
        wanted = set(invocation_ids)
        return [r for r in self.records if r.invocation_id in wanted]


def logs_result(*messages: str, service: str = "payment-service") -> dict:
    return {
        "backend": "demo",
        "service": service,
        "query": "",
        "start": "2024-05-01T10:00:00Z",
        "end": "2024-05-01T10:15:00Z",
        "total": len(messages),
        "records": [
            {"timestamp": f"2024-05-01T10:02:{i:02d}Z", "service": service, "level": "ERROR", "message": m}
            for i, m in enumerate(messages)
        ],
    }


def metrics_result() -> dict:
    return {
        "backend": "demo",
        "query": "db_pool_active_connections",
        "start": 1714557600,
        "end": 1714558500,
        "step": 60,
        "series": [
            {
                "labels": {"__name__": "db_pool_active_connections", "service": "payment-service"},
                "values": [[1714557600, "12"], [1714557660, "50"]],
                "stats": {"min": 12.0, "max": 50.0, "mean": 31.0, "last": 50.0, "max_at": 1714557660, "baseline": 12.0},
                "description": "db_pool_active_connections{service=payment-service} max 50 at 10:01, baseline 12",
            }
        ],
    }


def record(invocation_id: str, result: object, *, run_id: str = RUN_ID, tool_name: str = "query_logs",
           status: str = "SUCCESS") -> InvocationRecord:
    return InvocationRecord(invocation_id=invocation_id, run_id=run_id, tool_name=tool_name, status=status, result=result)


def binding(excerpt: str, *, invocation_id: str = "inv-00000001", tool_name: str = "query_logs",
            raw_path: str = "$.records[0].message") -> dict:
    return {"source_invocation_id": invocation_id, "tool_name": tool_name, "raw_path": raw_path,
            "evidence_excerpt": excerpt}


def claim(claim_id: str, *bindings: dict, statement: str = "payment-service DB pool exhausted") -> dict:
    return {"claim_id": claim_id, "statement": statement, "evidence": list(bindings)}


def executor_output(*claims: dict, summary: str = "The DB pool is exhausted.",
                    open_questions: list | None = None) -> dict:
    return {"version": "executor_evidence_v2", "summary": summary, "claims": list(claims),
            "open_questions": open_questions if open_questions is not None else ["Was there a deploy?"]}
