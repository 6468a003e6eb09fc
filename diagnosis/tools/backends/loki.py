"""Grafana Loki HTTP API backend (``GET /loki/api/v1/query_range``).

Implements ``LogsBackend.query_logs`` from ``base.py``. The LogQL is built from the
service (stream selector ``{service="x"}``) and the query words (one ``|= "word"`` line
filter per word or per double-quoted phrase). Results follow the logs shape in
docs/ARCHITECTURE.md, records oldest-first. Failures raise ``BackendError``.

Imports only stdlib + httpx.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx

from diagnosis.tools.backends.base import BackendError, detect_level, go_string_literal, resolve_window
from diagnosis.tools.backends.http_json import JsonHttpClient

__all__ = ["LokiBackend", "build_logql", "logql_string", "to_unix_ns", "ns_to_iso"]

BACKEND_NAME = "loki"
MAX_LIMIT = 1000
_BODY_SNIPPET = 500
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

_QUERY_TOKEN_RE = re.compile(r'"([^"]*)"|(\S+)')


# --------------------------------------------------------------------------- helpers


def _error(message: str, *, argument: str | None = None) -> BackendError:
    return BackendError(message, argument=argument, backend=BACKEND_NAME)


def logql_string(value: str) -> str:
    """Quote ``value`` as a LogQL double-quoted string literal."""
    return go_string_literal(value)


def query_terms(query: str | None) -> list[str]:
    """Words of ``query``; a double-quoted phrase stays one term. Empty terms dropped."""
    terms: list[str] = []
    for phrase, word in _QUERY_TOKEN_RE.findall(query or ""):
        term = phrase if phrase else word
        if term.strip() and term not in terms:
            terms.append(term)
    return terms


def build_logql(service: str | None, query: str | None, service_label: str = "service") -> str:
    """``{service="x"} |= "w1" |= "w2"``; without a service ``{service=~".+"}``."""
    if not re.match(r"^[a-zA-Z_][a-zA-Z0-9_]*$", service_label or ""):
        raise _error(f"not a valid Loki label name: {service_label!r}")
    if service not in (None, ""):
        selector = "{" + f"{service_label}={logql_string(service)}" + "}"
    else:
        selector = "{" + f'{service_label}=~".+"' + "}"
    return " ".join([selector] + [f"|= {logql_string(t)}" for t in query_terms(query)])


def to_unix_ns(value: datetime) -> int:
    """Aware (or naive = UTC) datetime -> integer Unix nanoseconds, exact."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return ((value - _EPOCH) // timedelta(microseconds=1)) * 1000


def ns_to_iso(ns: int) -> str:
    """Unix nanoseconds -> ISO UTC ``YYYY-MM-DDTHH:MM:SS[.ffffff[fff]]Z`` (shortest of 0/3/6/9 digits)."""
    seconds, frac = divmod(int(ns), 1_000_000_000)
    text = (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        digits = f"{frac:09d}"
        for width in (3, 6, 9):
            if digits[width:].strip("0") == "":
                text += "." + digits[:width]
                break
    return text + "Z"


# --------------------------------------------------------------------------- backend


def _checked_limit(limit: Any) -> int:
    """The `limit` argument as an int in 1..MAX_LIMIT (None means the default 50)."""
    if limit is None:
        limit = 50
    if isinstance(limit, bool) or not isinstance(limit, (int, str)) or not str(limit).strip().isdigit():
        raise _error(f"must be an integer between 1 and {MAX_LIMIT}, got {limit!r}", argument="limit")
    limit = int(limit)
    if not 1 <= limit <= MAX_LIMIT:
        raise _error(f"must be between 1 and {MAX_LIMIT}, got {limit}", argument="limit")
    return limit


def _stream_entries(data: dict[str, Any]) -> list[tuple[int, int, dict[str, str], str]]:
    """(timestamp ns, arrival order, stream labels, line) of every entry of a `streams` query result."""
    result_type = data.get("resultType")
    if result_type != "streams":
        raise _error(
            f"loki returned resultType {result_type!r} for a log query (expected 'streams')"
        )
    entries: list[tuple[int, int, dict[str, str], str]] = []
    seq = 0
    for stream in data.get("result") or []:
        if not isinstance(stream, dict):
            raise _error("loki returned a malformed stream")
        labels = {str(k): str(v) for k, v in (stream.get("stream") or {}).items()}
        for value in stream.get("values") or []:
            if not isinstance(value, (list, tuple)) or len(value) < 2:
                raise _error("loki returned a malformed log entry")
            try:
                ts = int(value[0])
            except (TypeError, ValueError):
                raise _error(f"loki returned an invalid timestamp {value[0]!r}") from None
            entries.append((ts, seq, labels, str(value[1])))
            seq += 1
    return entries


class LokiBackend:
    """Logs from a Grafana Loki server's HTTP API."""

    name = BACKEND_NAME

    def __init__(
        self,
        base_url: str,
        timeout_seconds: float = 5,
        tenant: str | None = None,
        service_label: str = "service",
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.tenant = tenant or None
        self.service_label = service_label or "service"
        self.http = JsonHttpClient(base_url, backend=BACKEND_NAME, timeout_seconds=timeout_seconds,
                                   headers={"X-Scope-OrgID": self.tenant} if self.tenant else None, transport=transport)

    def __repr__(self) -> str:
        return f"LokiBackend({self.http.display!r})"

    def build_query(self, *, service: str | None = None, query: str | None = None) -> str:
        return build_logql(service, query, self.service_label)

    def query_logs(self, *, service: str | None = None, query: str | None = None, start: datetime | None = None,
                   end: datetime | None = None, limit: int = 50) -> dict[str, Any]:
        """Log lines via ``/loki/api/v1/query_range`` (direction=backward), returned oldest-first."""
        logql = self.build_query(service=service, query=query)
        start_dt, end_dt = resolve_window(start, end, now=datetime.now(timezone.utc))
        limit = _checked_limit(limit)
        start_ns, end_ns = to_unix_ns(start_dt), to_unix_ns(end_dt)

        params = {
            "query": logql,
            "start": str(start_ns),
            "end": str(end_ns),
            "limit": str(limit),
            "direction": "backward",
        }
        entries = _stream_entries(self._get("/loki/api/v1/query_range", params))
        # backward = newest first; keep the newest `limit`, then present oldest-first
        entries.sort(key=lambda e: (-e[0], e[1]))
        entries = entries[:limit]
        entries.reverse()
        records = [
            {
                "timestamp": ns_to_iso(ts),
                "service": labels.get(self.service_label) or labels.get("service") or service or "unknown",
                "level": detect_level(labels, line),
                "message": line.rstrip("\n"),
            }
            for ts, _, labels, line in entries
        ]
        return {
            "backend": BACKEND_NAME,
            "service": service,
            "query": logql,
            "start": ns_to_iso(start_ns),
            "end": ns_to_iso(end_ns),
            "total": len(records),
            "records": records,
        }

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        reply = self.http.get(path, params)
        status = reply.status
        if not 200 <= status < 300:
            body = reply.text.strip()
            if len(body) > _BODY_SNIPPET:
                body = body[:_BODY_SNIPPET] + "…"
            suffix = " (redirects are not followed)" if 300 <= status < 400 else ""
            raise _error(f"loki query failed (HTTP {status}){suffix}: {body or 'empty body'}")
        if not reply.is_json:
            snippet = reply.text[:_BODY_SNIPPET].strip()
            raise _error(f"loki at {self.http.display} returned a non-JSON response: {snippet}")
        payload = reply.body
        if not isinstance(payload, dict):
            raise _error(f"loki at {self.http.display} returned unexpected JSON")
        if payload.get("status") != "success":
            detail = payload.get("error") or payload.get("message") or payload.get("status")
            raise _error(f"loki query failed: {detail}")
        data = payload.get("data")
        if not isinstance(data, dict):
            raise _error("loki response has no data object")
        return data
