"""Tool results built by hand, in the wire shapes the recorded tools return (test code only)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone


NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
START = NOW - timedelta(hours=1)


def iso(offset_s: float) -> str:
    return (NOW + timedelta(seconds=offset_s)).isoformat().replace("+00:00", "Z")


class Results:
    """A run's invocations, added one tool call at a time."""

    def __init__(self):
        self.items: list[dict] = []

    def _add(self, tool: str, arguments: dict, result: dict) -> "Results":
        self.items.append({"invocation_id": f"inv-{len(self.items) + 1:08x}", "tool_name": tool,
                           "arguments": arguments, "result": result})
        return self

    def logs(self, service: str, lines: list[tuple[float, str, str]]) -> "Results":
        """``lines``: (offset seconds before now, level or "", message)."""
        records = [{"timestamp": iso(t), "service": service, "level": level or None, "message": m}
                   for t, level, m in sorted(lines)]
        return self._add("query_logs", {"service": service, "limit": 200},
                         {"start": iso(-3600), "end": iso(0), "truncated": False, "records": records})

    def metric(self, labels: dict, values: list[float], step: int = 60) -> "Results":
        n = len(values)
        points = [[(NOW - timedelta(seconds=step * (n - 1 - i))).timestamp(), str(v)] for i, v in enumerate(values)]
        return self._add("query_metrics", {"service": labels.get("service")},
                         {"start": iso(-3600), "end": iso(0), "step": step,
                          "series": [{"labels": labels, "values": points, "description": json.dumps(labels)}]})

    def alerts(self, alerts: list[dict]) -> "Results":
        return self._add("query_alerts", {}, {"alerts": alerts})

    def changes(self, changes: list[tuple[float, str, str, str]]) -> "Results":
        """``changes``: (offset seconds before now, service, kind, what)."""
        return self._add("query_changes", {}, {"changes": [
            {"at": iso(t), "service": service, "kind": kind, "what": what, "description": f"{kind} {what}"}
            for t, service, kind, what in changes]})

    def kubernetes(self, result: dict, name: str = "") -> "Results":
        return self._add("query_kubernetes", {"kind": "deployment", "name": name}, result)


def flat(level: float, n: int = 60, wiggle: float = 0.02) -> list[float]:
    return [level * (1 + wiggle * ((i * 7) % 5 - 2) / 2) for i in range(n)]


def stepped(level: float, to: float, at: int, n: int = 60, wiggle: float = 0.02) -> list[float]:
    """Flat at ``level`` with noise, then at index ``at`` onwards at ``to``."""
    return [v if i < at else to * (1 + wiggle * ((i * 3) % 5 - 2) / 2) for i, v in enumerate(flat(level, n, wiggle))]


def caller_and_database() -> Results:
    """fobrel-api saturates at minute 44 after its database quastor-db, which its errors name, at 42."""
    results = Results()
    results.metric({"__name__": "http_server_request_duration_seconds", "service": "fobrel-api"}, stepped(0.08, 2.5, 44))
    results.metric({"__name__": "db_client_connections_pending", "service": "fobrel-api"}, stepped(1, 40, 44))
    results.metric({"__name__": "pg_stat_activity_max_tx_duration", "service": "quastor-db"}, stepped(0.5, 30, 42))
    results.logs("fobrel-api", [(-3000 + i * 120, "", f"GET /v1/items 200 in {40 + i} ms") for i in range(20)]
                 + [(-(60 - 44) * 60 + 30 + i * 50, "ERROR",
                     f"query failed: timeout acquiring connection to postgres://quastor-db:5432/items after {i + 30}s")
                    for i in range(8)])
    return results
