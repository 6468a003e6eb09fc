"""What changed: one record shape for rollouts, config and secret updates, Helm releases and Argo CD syncs.

A change record (docs/TOOLS.md) is ``{"kind", "service", "at", "what", "object", "namespace",
"revision", "status", "by", "description"}``: ``kind`` is one of ``CHANGE_KINDS``, ``at`` an ISO 8601
UTC time, ``what`` one short line. ``ChangesBackend`` asks each configured source (Kubernetes,
Helm, Argo CD) and reports per source whether it answered, so one source that is down does not hide
what the others saw. Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Protocol

from diagnosis.tools.backends.base import BackendError, format_timestamp, parse_time

__all__ = ["CHANGE_KINDS", "ChangeQuery", "ChangeSource", "ChangesBackend", "change_record", "check_change_query",
           "changes_result", "DEFAULT_CHANGE_WINDOW", "MAX_CHANGES"]

CHANGE_KINDS = ("rollout", "config", "secret", "helm", "argocd")
DEFAULT_CHANGE_WINDOW = timedelta(hours=24)  # changes matter over longer spans than log lines
MAX_CHANGES = 200  # the newest are kept


@dataclass(frozen=True)
class ChangeQuery:
    service: str | None
    namespace: str | None  # None: every namespace (the demo world)
    kind: str | None
    start: datetime
    end: datetime

    def wants(self, kind: str) -> bool:
        return self.kind is None or self.kind == kind


def check_change_query(*, service: str | None = None, namespace: str | None = None, kind: str | None = None,
                       start: Any = None, end: Any = None, now: datetime, default_namespace: str) -> ChangeQuery:
    service = (service or "").strip() or None
    if namespace is not None and not str(namespace).strip():
        raise BackendError("must not be blank", argument="namespace")
    kind = (kind or "").strip().lower() or None
    if kind is not None and kind not in CHANGE_KINDS:
        raise BackendError(f"must be one of {', '.join(CHANGE_KINDS)}, got {kind!r}", argument="kind")
    end_dt = parse_time(end, argument="end") or now
    start_dt = parse_time(start, argument="start") or end_dt - DEFAULT_CHANGE_WINDOW
    if end_dt < start_dt:
        raise BackendError(f"end {format_timestamp(end_dt)} is before start {format_timestamp(start_dt)}",
                           argument="end")
    return ChangeQuery(service, (namespace or default_namespace).strip() or None, kind, start_dt, end_dt)


def change_record(*, kind: str, service: str, at: datetime, what: str, object: str, namespace: str | None,
                  revision: Any = None, status: str | None = None, by: str | None = None) -> dict[str, Any]:
    """One change, with a one-line ``description`` a claim can quote: ``<at> <kind> <service>: <what>``."""
    if kind not in CHANGE_KINDS:
        raise ValueError(f"unknown change kind {kind!r}")
    when = format_timestamp(at)
    return {
        "kind": kind, "service": service, "at": when, "what": what, "object": object, "namespace": namespace,
        "revision": None if revision is None else str(revision), "status": status, "by": by,
        "description": f"{when} {kind} {service}: {what}",
    }


def changes_result(records: Iterable[dict[str, Any]], query: ChangeQuery, *, backend: str,
                   sources: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Records of the asked kind and service inside the window, oldest first (the newest ``MAX_CHANGES``)."""
    low, high = format_timestamp(query.start), format_timestamp(query.end)
    kept = [r for r in records
            if query.wants(r["kind"]) and (query.service is None or r["service"] == query.service)
            and _within(r["at"], query.start, query.end)]
    kept.sort(key=lambda r: (r["at"], r["kind"], r["service"], r["object"], r["revision"] or ""))
    result: dict[str, Any] = {
        "backend": backend, "service": query.service, "namespace": query.namespace, "kind": query.kind,
        "start": low, "end": high, "total": len(kept), "changes": kept[-MAX_CHANGES:],
    }
    if sources is not None:
        result["sources"] = sources
    return result


def _within(at: str, start: datetime, end: datetime) -> bool:
    moment = parse_time(at, argument="at")
    return start <= moment <= end


class ChangeSource(Protocol):
    """One origin of changes (Kubernetes workloads, ConfigMaps/Secrets, Helm, Argo CD)."""

    name: str
    kinds: tuple[str, ...]

    def changes(self, query: ChangeQuery) -> list[dict[str, Any]]:
        """Change records of this source's kinds (the window and service filters are applied afterwards)."""
        ...


class ChangesBackend:
    """``query_changes`` over several sources; a failed source is reported, the others still answer."""

    def __init__(self, sources: Iterable[ChangeSource], *, name: str = "kubernetes", default_namespace: str = "default",
                 clock=None) -> None:
        self.sources = list(sources)
        self.name = name
        self.default_namespace = default_namespace
        self._clock = clock

    def query_changes(self, *, service: str | None = None, namespace: str | None = None, kind: str | None = None,
                      start: Any = None, end: Any = None) -> dict[str, Any]:
        now = self._clock() if self._clock else datetime.now(timezone.utc)
        query = check_change_query(service=service, namespace=namespace, kind=kind, start=start, end=end, now=now,
                                   default_namespace=self.default_namespace)
        asked = [s for s in self.sources if any(query.wants(k) for k in s.kinds)]
        if not asked:
            configured = sorted({k for s in self.sources for k in s.kinds})
            raise BackendError(f"no source of {query.kind!r} changes is configured (configured: "
                               f"{', '.join(configured) or 'none'})", argument="kind", backend=self.name)
        records, report, failures = [], [], []
        for source in asked:
            try:
                found = source.changes(query)
            except BackendError as exc:
                failures.append(f"{source.name}: {exc}")
                report.append({"source": source.name, "status": "error", "message": str(exc)})
                continue
            records.extend(found)
            report.append({"source": source.name, "status": "ok"})
        if len(failures) == len(asked):
            raise BackendError("every change source failed: " + "; ".join(failures), backend=self.name)
        return changes_result(records, query, backend=self.name, sources=report)
