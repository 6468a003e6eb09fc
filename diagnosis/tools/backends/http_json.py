"""One GET-and-parse-JSON path for the HTTP backends (Prometheus, Loki, Tempo, Jaeger, Argo CD).

Every failure is a ``BackendError`` naming the backend and a display URL without credentials;
a body is quoted only as a short snippet. Imports only stdlib + httpx.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from diagnosis.tools.backends.base import BackendError

BODY_SNIPPET = 300


def display_url(url: str) -> str:
    """``scheme://host:port/path`` without user info, query or fragment."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, host + (f":{port}" if port else ""), parts.path, "", ""))


def path_segment(value: str) -> str:
    """``value`` quoted as one URL path segment (a ``/`` cannot reach another endpoint)."""
    return quote(str(value), safe="")


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # parsed JSON, or the text when the body is not JSON
    is_json: bool
    response: httpx.Response | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The body as sent (decoded only when asked: a large JSON reply is parsed from its bytes)."""
        if self.response is not None:
            return self.response.text
        return self.body if isinstance(self.body, str) else json.dumps(self.body, ensure_ascii=False)


class JsonHttpClient:
    """GET requests against one base URL with fixed headers and a timeout; redirects are not followed."""

    def __init__(self, base_url: str, *, backend: str, timeout_seconds: float = 5.0,
                 headers: Mapping[str, str] | None = None, transport: httpx.BaseTransport | None = None) -> None:
        if not base_url or not str(base_url).strip():
            raise BackendError(f"{backend} base URL is not configured", backend=backend)
        self.base_url = str(base_url).strip().rstrip("/")
        self.backend = backend
        self.timeout_seconds = float(timeout_seconds)
        self.headers = {"Accept": "application/json", **dict(headers or {})}
        self.display = display_url(self.base_url)
        self._transport = transport

    def error(self, message: str, *, argument: str | None = None) -> BackendError:
        return BackendError(message, argument=argument, backend=self.backend)

    def get(self, path: str, params: Mapping[str, Any] | list[tuple[str, Any]] | None = None) -> Reply:
        """The reply of any status; only a transport failure raises."""
        try:
            with httpx.Client(timeout=self.timeout_seconds, follow_redirects=False, transport=self._transport,
                              headers=self.headers) as client:
                response = client.get(self.base_url + path, params=params)
        except httpx.TimeoutException:
            raise self.error(f"{self.backend} unreachable at {self.display}: timed out after "
                             f"{self.timeout_seconds:g}s") from None
        except httpx.HTTPError as exc:
            detail = str(exc).replace(self.base_url, self.display) or type(exc).__name__
            raise self.error(f"{self.backend} unreachable at {self.display}: {detail}") from None
        try:
            return Reply(response.status_code, response.json(), True, response)
        except ValueError:
            return Reply(response.status_code, response.text, False, response)

    def get_json(self, path: str, params=None, *, what: str) -> Any:
        """The parsed JSON of a 2xx reply; anything else raises with the status and a body snippet."""
        reply = self.get(path, params)
        if not 200 <= reply.status < 300:
            raise self.error(f"{what} failed (HTTP {reply.status}){self._redirect(reply.status)}: {self.snippet(reply)}")
        if not reply.is_json:
            raise self.error(f"{self.backend} at {self.display} returned a non-JSON response: {self.snippet(reply)}")
        return reply.body

    @staticmethod
    def _redirect(status: int) -> str:
        return " (redirects are not followed)" if 300 <= status < 400 else ""

    @staticmethod
    def snippet(reply: Reply) -> str:
        text = reply.body if isinstance(reply.body, str) else json.dumps(reply.body, ensure_ascii=False)
        text = text.strip()
        if len(text) > BODY_SNIPPET:
            text = text[:BODY_SNIPPET] + "…"
        return text or "empty body"
