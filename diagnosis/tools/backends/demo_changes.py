"""``query_changes`` for the demo world: the scenarios' ``changes.json`` records, time-shifted to "now".

Records come out in the shape every changes backend returns (``changes.change_record``). Stdlib only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Iterable

from diagnosis.demo.loader import Scenario
from diagnosis.tools.backends.changes import change_record, changes_result, check_change_query

__all__ = ["DemoChanges"]

BACKEND_NAME = "demo"


class DemoChanges:
    """Every change of the given scenarios, with offsets relative to "now"."""

    def __init__(self, scenarios: Iterable[Scenario]) -> None:
        self._changes = [(dict(c), s.kubernetes.get("namespace")) for s in scenarios for c in s.changes]

    def query_changes(self, *, now: datetime, service: str | None = None, namespace: str | None = None,
                      kind: str | None = None, start: Any = None, end: Any = None) -> dict[str, Any]:
        # The demo world spans several namespaces: without one asked, every namespace answers.
        query = check_change_query(service=service, namespace=namespace, kind=kind, start=start, end=end, now=now,
                                   default_namespace="")
        records = [
            change_record(kind=c["kind"], service=c["service"], at=now + timedelta(seconds=c["offset_seconds"]),
                          what=c["what"], object=c["object"], namespace=c.get("namespace") or world_namespace,
                          revision=c.get("revision"), status=c.get("status"), by=c.get("by"))
            for c, world_namespace in self._changes
            if not namespace or (c.get("namespace") or world_namespace) == query.namespace
        ]
        return changes_result(records, query, backend=BACKEND_NAME)
