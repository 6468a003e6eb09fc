"""Request bodies guarded before they are read: an ASGI middleware in front of Django (config/asgi.py).

Django's ASGI handler reads the whole body before any view or middleware runs, into a temporary file that
rolls over to disk past FILE_UPLOAD_MAX_MEMORY_SIZE, and DRF reads a body without a Content-Length as
empty. So the guard sits in front of Django, on the ASGI messages:

1. A declared Content-Length over REQUEST_BODY_MAX_BYTES is refused 413 before one byte is read.
2. A request with a body to the API (`/api/`) must carry valid credentials (an API token as `Token` or
   `Bearer`, or a logged-in session): otherwise 401 before its body is read.
3. The body is read as it streams in, in memory, up to the limit: one byte more and the answer is 413, the
   rest is never read. A body within the limit (chunked ones included) is handed to Django whole, with its
   Content-Length set, so it is parsed like any other, and it never reaches a file.
"""

from __future__ import annotations

import json
import logging

from asgiref.sync import sync_to_async
from django.conf import settings

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"
TOKEN_SCHEMES = (b"token", b"bearer")


def _json_response(status: int, code: str, message: str, extra_headers: list[tuple[bytes, bytes]] = ()):
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close"), *extra_headers]
    return status, headers, body


def _header(scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


def _cookie(scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    from http.cookies import CookieError, SimpleCookie

    try:
        jar = SimpleCookie(raw.decode("latin-1"))
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel else None


def credentials_valid(authorization: bytes | None, session_key: str | None) -> bool:
    """An active user's API token (`Token <key>` / `Bearer <key>`) or a session with a logged-in user.
    Runs on a pool thread and closes its database connection: no request ends on that thread."""
    from django.db import close_old_connections

    try:
        if authorization:
            scheme, _, key = authorization.partition(b" ")
            if scheme.lower() in TOKEN_SCHEMES and key.strip():
                from rest_framework.authtoken.models import Token

                token = Token.objects.select_related("user").filter(key=key.strip().decode("latin-1")).first()
                return bool(token and token.user.is_active)
            return False
        if session_key:
            from importlib import import_module

            store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
            return bool(store.get("_auth_user_id"))
        return False
    finally:
        close_old_connections()


class BodyLimitMiddleware:
    """ASGI middleware: bodies over REQUEST_BODY_MAX_BYTES answer 413 as they stream in, API bodies without
    valid credentials 401 before they are read; the rest reach Django whole and in memory."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = settings.REQUEST_BODY_MAX_BYTES
        declared = _header(scope, b"content-length")
        chunked = b"chunked" in (_header(scope, b"transfer-encoding") or b"").lower()
        try:
            length = int(declared) if declared is not None else None
        except ValueError:
            return await self._refuse(send, *_json_response(400, "invalid_input", "Content-Length is not a number"))
        if length is None and not chunked:
            return await self.app(scope, receive, send)  # no body
        if length is not None and length > limit:
            return await self._refuse(send, *self._too_large(limit))
        if length == 0:
            return await self.app(scope, receive, send)
        if scope["path"].startswith(API_PREFIX):
            session_key = _cookie(scope, settings.SESSION_COOKIE_NAME)
            authorization = _header(scope, b"authorization")
            if not await sync_to_async(credentials_valid, thread_sensitive=False)(authorization, session_key):
                return await self._refuse(send, *_json_response(
                    401, "not_authenticated", "Authentication credentials were not provided or are not valid.",
                    [(b"www-authenticate", b"Token")]))
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > limit:
                logger.warning("request body over %s bytes refused while streaming in (%s %s)", limit,
                               scope.get("method"), scope.get("path"))
                return await self._refuse(send, *self._too_large(limit))
            if not message.get("more_body", False):
                break
        headers = [(k, v) for k, v in scope.get("headers", ()) if k.lower() not in (b"content-length", b"transfer-encoding")]
        headers.append((b"content-length", str(len(body)).encode()))
        delivered = False

        async def replay():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # after the body: the disconnect Django listens for

        return await self.app({**scope, "headers": headers}, replay, send)

    @staticmethod
    def _too_large(limit: int):
        return _json_response(413, "payload_too_large", f"The request body is larger than {limit} bytes.")

    @staticmethod
    async def _refuse(send, status: int, headers, body: bytes) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
