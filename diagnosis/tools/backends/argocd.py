"""Argo CD application history: each successful sync (``status.history``) and a failed last operation.

``GET /api/v1/applications/<name>`` (``Authorization: Bearer <token>``, optionally
``appNamespace``), or ``GET /api/v1/applications`` for every application deploying into the asked
namespace. An application is matched to a service by its name. Argo CD answers 403 for an unknown
application (as for a forbidden one): that is no change, not an error. Imports only stdlib + httpx.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

from diagnosis.tools.backends.base import BackendError, parse_time
from diagnosis.tools.backends.changes import ChangeQuery, change_record
from diagnosis.tools.backends.http_json import JsonHttpClient, path_segment

__all__ = ["ArgoCDSource"]

BACKEND_NAME = "argocd"
MAX_APPLICATIONS = 200
FAILED_PHASES = ("Failed", "Error")


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value, argument="time") if value else None
    except BackendError:
        return None


def _source_text(entry: dict[str, Any]) -> str:
    sources = entry.get("sources") or ([entry["source"]] if entry.get("source") else [])
    texts = []
    for source in sources:
        where = source.get("chart") or source.get("path") or source.get("repoURL") or "?"
        texts.append(f"{where}@{source.get('targetRevision') or 'HEAD'}")
    return ", ".join(texts)


def _revision_text(entry: dict[str, Any]) -> str:
    revisions = entry.get("revisions") or ([entry["revision"]] if entry.get("revision") else [])
    return ", ".join(str(r)[:12] for r in revisions) or "?"


def _initiator(entry: dict[str, Any]) -> str | None:
    initiated = entry.get("initiatedBy") or ((entry.get("operation") or {}).get("initiatedBy")) or {}
    if initiated.get("automated"):
        return "automated"
    return initiated.get("username") or None


class ArgoCDSource:
    """Sync history of Argo CD applications (read-only API calls)."""

    name = BACKEND_NAME
    kinds = ("argocd",)

    def __init__(self, base_url: str, token: str, *, app_namespace: str | None = None, timeout_seconds: float = 5.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not token:
            raise BackendError("an Argo CD API token is required", backend=BACKEND_NAME)
        self.http = JsonHttpClient(base_url, backend=BACKEND_NAME, timeout_seconds=timeout_seconds,
                                   headers={"Authorization": f"Bearer {token}"}, transport=transport)
        self.app_namespace = app_namespace

    def __repr__(self) -> str:
        return f"ArgoCDSource({self.http.display!r})"

    def changes(self, query: ChangeQuery) -> list[dict[str, Any]]:
        params = {"appNamespace": self.app_namespace} if self.app_namespace else {}
        if query.service:
            reply = self.http.get(f"/api/v1/applications/{path_segment(query.service)}", params)
            if reply.status in (403, 404):
                return []  # no such application (Argo CD does not tell it apart from a forbidden one)
            if not 200 <= reply.status < 300 or not reply.is_json or not isinstance(reply.body, dict):
                raise self.http.error(f"argocd application read failed (HTTP {reply.status}): {self.http.snippet(reply)}")
            applications = [reply.body]
        else:
            body = self.http.get_json("/api/v1/applications", params, what="argocd application list")
            items = body.get("items") if isinstance(body, dict) else None
            applications = [a for a in (items or [])[:MAX_APPLICATIONS] if isinstance(a, dict)
                            and ((a.get("spec") or {}).get("destination") or {}).get("namespace") in (None, query.namespace)]
        records = []
        for application in applications:
            records += self._application_changes(application, query)
        return records

    @staticmethod
    def _application_changes(application: dict[str, Any], query: ChangeQuery) -> list[dict[str, Any]]:
        name = (application.get("metadata") or {}).get("name") or "?"
        status = application.get("status") or {}
        destination = ((application.get("spec") or {}).get("destination") or {}).get("namespace") or query.namespace
        records = []
        for entry in status.get("history") or []:
            at = _time(entry.get("deployedAt")) or _time(entry.get("deployStartedAt"))
            if at is None:
                continue
            by = _initiator(entry)
            what = f"application {name} synced revision {_revision_text(entry)} ({_source_text(entry)})"
            records.append(change_record(kind="argocd", service=name, at=at, what=what + (f" by {by}" if by else ""),
                                         object=f"application/{name}", namespace=destination, revision=entry.get("id"),
                                         status="deployed", by=by))
        operation = status.get("operationState") or {}
        if operation.get("phase") in FAILED_PHASES:
            at = _time(operation.get("finishedAt")) or _time(operation.get("startedAt"))
            revision = (operation.get("syncResult") or {}).get("revision") or \
                ((operation.get("operation") or {}).get("sync") or {}).get("revision") or "?"
            message = str(operation.get("message") or "").strip()
            if at is not None:
                by = _initiator(operation)
                records.append(change_record(
                    kind="argocd", service=name, at=at,
                    what=f"application {name} sync {operation['phase']} at revision {str(revision)[:12]}"
                         + (f": {message[:200]}" if message else ""),
                    object=f"application/{name}", namespace=destination, revision=None, status=operation["phase"],
                    by=by))
        return records
