"""Server-Sent Events: the wire format, the two streams of a run's progress and what a stream holds.

Served by an ASGI server, a stream is asynchronous: it holds no thread (nor database connection) while a
run executes, and progress is pushed to it (see diagnosis/services/live_progress.py). Under WSGI (the
development server, the test client) it falls back to a bounded database poll. The request views that
open a stream (diagnosis/api/chat.py, diagnosis/api/aiops.py) authorise first and then hand over here.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import aclosing

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections, connections
from django.http import StreamingHttpResponse
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from diagnosis.api.errors import ApiError
from diagnosis.models import DiagnosisRun
from diagnosis.observability import metrics
from diagnosis.selectors import run_events_after, run_status
from diagnosis.services.live_progress import live_events, off_loop, stream_slots

# Far beyond any event id (a larger id just resumes after everything); the bound keeps int() away from
# megabyte-long digit strings (Python refuses over 4,300 digits: it would be a 500).
LAST_EVENT_ID_MAX_DIGITS = 32


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode()  # only used for error bodies on this endpoint


def sse_message(event_id: int | None, kind: str, data: dict) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


def _final_status_off_loop(run: DiagnosisRun) -> str:
    """_final_status on a pool thread, where no request ends: the read closes its connection (see live_progress)."""
    close_old_connections()
    try:
        return _final_status(run)
    finally:
        close_old_connections()


def _final_status(run: DiagnosisRun) -> str:
    """The terminal status of a run that ended without a terminal event after the client's position."""
    run.refresh_from_db()
    return sse_message(None, "status", {"status": run.status, "runId": run.run_id, "degraded": run.degraded,
                                 "verdict": run.effective_verdict or None, "errorCode": run.error_code or None})


class StreamAccount:
    """The open-streams gauge and the user's stream slot of one response, given back exactly once.

    Django closes only its own wrapper generators when a client disconnects during a write; the stream
    generator under them would be finalised whenever the garbage collector reaches it. Django always calls
    the response's closers, so this is registered as one (`sse_response`), and the generator's own exit
    gives it back too: whichever comes first counts, the other is a no-op."""

    def __init__(self, slot: tuple[int, str] | None):
        self._slot = slot
        self._lock = threading.Lock()
        self._open = True
        metrics.stream_opened()

    def release(self) -> None:
        with self._lock:
            if not self._open:
                return
            self._open = False
        metrics.stream_closed()
        if self._slot:
            stream_slots.release(*self._slot)

    def renew(self) -> None:
        if self._slot:
            stream_slots.renew(*self._slot)


class LiveStream:
    """ASGI: an async stream whose `close()` (called by Django once the response is done, after a disconnect
    too) gives its slot back at once and closes the generator, with its Redis subscription, on its loop."""

    def __init__(self, events, account: StreamAccount):
        self._events = events
        self._account = account
        self._loop: asyncio.AbstractEventLoop | None = None

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return await self._events.__anext__()

    def close(self) -> None:
        self._account.release()
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(self._aclose())
        else:
            asyncio.run_coroutine_threadsafe(self._aclose(), loop)

    async def _aclose(self) -> None:
        try:
            await self._events.aclose()
        except RuntimeError:  # still running: it is ending by itself
            pass


def live_stream(run: DiagnosisRun, after: int, *, slot: tuple[int, str] | None = None,
                prefix: tuple[str, ...] = ()) -> LiveStream:
    """ASGI: events after `after`, pushed as they are written; closes after the terminal status.
    A client that disconnects cancels it; its slot and the Redis subscription are released."""
    account = StreamAccount(slot)
    return LiveStream(_live_events_sse(run, after, account, prefix), account)


async def _live_events_sse(run: DiagnosisRun, after: int, account: StreamAccount, prefix: tuple[str, ...]):
    try:
        for chunk in prefix:
            yield chunk
        yield "retry: 2000\n\n"
        async with aclosing(live_events(run.pk, after)) as events:
            async for event in events:
                if event.kind == "heartbeat":
                    await off_loop(account.renew)
                    yield ": keep-alive\n\n"
                elif event.kind == "finished":
                    yield await off_loop(_final_status_off_loop, run)
                    return
                else:
                    yield sse_message(event.id, event.kind, {**event.data, "runId": run.run_id})
    finally:
        await off_loop(account.release)


def event_stream(run: DiagnosisRun, after: int, *, slot: tuple[int, str] | None = None):
    """WSGI (a thread per stream): events after `after` from a bounded database poll."""
    metrics.stream_opened()
    try:
        yield "retry: 2000\n\n"
        started = idle_since = time.monotonic()
        while time.monotonic() - started < settings.SSE_MAX_SECONDS:
            events = run_events_after(run_pk=run.pk, after=after)
            for event in events:
                after = event.id
                yield sse_message(event.id, event.kind, {**event.data, "runId": run.run_id})
                if event.kind == "status" and event.data.get("status") in DiagnosisRun.TERMINAL:
                    return
            if events:
                idle_since = time.monotonic()
                continue
            if run_status(run_pk=run.pk) in DiagnosisRun.TERMINAL and not run_events_after(run_pk=run.pk, after=after):
                yield _final_status(run)
                return
            if time.monotonic() - idle_since > settings.SSE_HEARTBEAT_SECONDS:
                idle_since = time.monotonic()
                if slot:
                    stream_slots.renew(*slot)
                yield ": keep-alive\n\n"
            time.sleep(settings.SSE_POLL_SECONDS)
    finally:
        metrics.stream_closed()
        if slot:
            stream_slots.release(*slot)


def is_asgi(request) -> bool:
    return isinstance(getattr(request, "_request", request), ASGIRequest)


def release_request_connections(request) -> None:
    """Under ASGI, before a long wait or stream: close this request thread's database connections, so
    an open stream holds none (its reads use a shared pool; see live_progress)."""
    if is_asgi(request):
        connections.close_all()


def stream_slot_or_429(request) -> tuple[int, str]:
    """A slot among the user's SSE_MAX_STREAMS_PER_USER open streams, or an ApiError 429."""
    token = stream_slots.acquire(request.user.pk)
    if token is None:
        metrics.stream_refused()
        raise ApiError(code="too_many_streams", status_code=429,
                       message=f"At most {settings.SSE_MAX_STREAMS_PER_USER} event streams may be open at once; "
                               "close one and retry.")
    return request.user.pk, token


def sse_response(content) -> StreamingHttpResponse:
    response = StreamingHttpResponse(content, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


class JsonErrorsMixin:
    """Errors of a streaming endpoint are JSON whatever the Accept header asked for."""

    def finalize_response(self, request, response, *args, **kwargs):
        if isinstance(response, Response):
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


def last_event_id(request) -> int:
    last = request.headers.get("Last-Event-ID") or request.query_params.get("lastEventId") or "0"
    # str.isdigit() also accepts "²", which int() refuses; the length bound comes before int().
    if len(last) > LAST_EVENT_ID_MAX_DIGITS or not (last.isascii() and last.isdigit()):
        raise ApiError(code="invalid_input", field="Last-Event-ID",
                       message=f"Last-Event-ID must be a non-negative integer of at most {LAST_EVENT_ID_MAX_DIGITS} digits")
    return int(last)
