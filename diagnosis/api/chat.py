"""POST /api/chat, GET /api/runs/{runId} and its Server-Sent Events stream.

Served by an ASGI server, the events stream and the chat call's wait are asynchronous: they hold no
thread while a run executes, and progress is pushed to them (see diagnosis/services/live_progress.py).
Under WSGI (the development server, the test client) they fall back to a bounded database poll.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from contextlib import aclosing

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections, connections
from django.http import StreamingHttpResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.throttling import UserRateThrottle
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.api.errors import SUBMISSION_ERRORS, ApiError, submission_error_response
from diagnosis.api.run_output import RunOutput
from diagnosis.contracts import RUN_ID_PATTERN
from diagnosis.ids import is_valid_run_id
from diagnosis.models import DiagnosisRun
from diagnosis.observability import metrics
from diagnosis.selectors import (
    run_advice, run_events_after, run_evidence_checked, run_get_for_user, run_status, run_suggestions,
)
from diagnosis.services.live_progress import live_events, off_loop, run_wait_terminal, stream_slots
from diagnosis.services.strategy import MODES
from diagnosis.services.submission import run_submit

logger = logging.getLogger(__name__)

# Far beyond any event id (a larger id just resumes after everything); the bound keeps int() away from
# megabyte-long digit strings (Python refuses over 4,300 digits: it would be a 500).
LAST_EVENT_ID_MAX_DIGITS = 32


def run_links(request, run: DiagnosisRun) -> dict:
    return {
        "run": request.build_absolute_uri(reverse("run-detail", args=[run.run_id])),
        "events": request.build_absolute_uri(reverse("run-events", args=[run.run_id])),
        "trace": request.build_absolute_uri(reverse("diagnosis-trace", args=[run.session.session_id])) + f"?runId={run.run_id}",
    }


def run_summary(request, run: DiagnosisRun) -> dict:
    return {
        "sessionId": run.session.session_id, "runId": run.run_id, "status": run.status, "agentFlow": run.agent_flow,
        "strategy": run.strategy, "question": run.question, "answer": run.answer or None, "degraded": run.degraded,
        "verdict": run.effective_verdict or None, "evidenceChecked": run_evidence_checked(run=run),
        "suggestions": run_suggestions(run=run), "advice": run_advice(run=run), "diagnosis": run.diagnosis if isinstance(run.diagnosis, dict) else None,
        "errorCode": run.error_code or None,
        "errorMessage": run.error_message or None, "durationMs": run.duration_ms, "createdAt": run.created_at,
        "startedAt": run.started_at, "finishedAt": run.finished_at, "links": run_links(request, run),
    }


class ChatThrottle(UserRateThrottle):
    """CHAT_THROTTLE_RATE per user, counted atomically: a fixed-window counter incremented in the cache
    (Redis INCR on a key that expires with its window; the local-memory cache increments under its lock),
    so simultaneous requests can never read the same count and all pass. At most N per window."""

    scope = "chat"

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        ident = request.user.pk if request.user and request.user.is_authenticated else self.get_ident(request)
        now = self.timer()
        window = int(now // self.duration)
        key = f"throttle:{self.scope}:{ident}:{window}"
        # The counters live in the Redis cache; when Redis is down the request is refused before anything
        # is created, with a 503 naming it, instead of escaping as a 500.
        try:
            self.cache.add(key, 0, timeout=self.duration + 1)  # SET NX: the window's counter starts at 0
            try:
                count = self.cache.incr(key)
            except ValueError:  # the key expired between the two calls: this request opens a new count
                self.cache.add(key, 0, timeout=self.duration + 1)
                count = self.cache.incr(key)
        except Exception as exc:
            logger.error("chat throttle: the cache is unavailable: %s", exc)
            raise ApiError(code="cache_unavailable", status_code=503,
                           message="The cache (Redis) is unavailable, so the request was not accepted and no run was "
                                   "created. Retry shortly.") from None
        self._wait = (window + 1) * self.duration - now
        return count <= self.num_requests

    def wait(self):
        return max(1.0, getattr(self, "_wait", self.duration))


class ChatView(APIView):
    throttle_classes = [ChatThrottle]

    class InputSerializer(serializers.Serializer):
        sessionId = serializers.CharField(required=False, max_length=64)
        Id = serializers.CharField(required=False, max_length=64, help_text="Legacy name of sessionId.")
        question = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
        Question = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, help_text="Legacy name of question.")
        mode = serializers.ChoiceField(MODES, required=False, default="auto")
        wait = serializers.BooleanField(required=False, default=True)
        requestId = serializers.CharField(required=False, max_length=64)

    @extend_schema(request=InputSerializer, responses={200: RunOutput, 202: RunOutput})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        question = values.get("question", values.get("Question"))
        if question is None:
            raise ApiError(code="invalid_input", message="question is required", field="question")
        try:
            submission = run_submit(
                user=request.user, question=question, session_id=values.get("sessionId") or values.get("Id"),
                mode=values["mode"], request_id=values.get("requestId"),
            )
        except SUBMISSION_ERRORS as exc:
            return submission_error_response(exc)
        run = DiagnosisRun.objects.select_related("session").get(pk=submission.run.pk)
        response = Response(run_summary(request, run), status=200 if run.is_terminal else 202)
        if values["wait"] and not run.is_terminal:
            response.wait_for_run_pk = run.pk  # chat_view waits, without holding a thread, then answers
            release_request_connections(request)
        return response


_chat_submit = ChatView.as_view()


def _answer_after_wait(response: Response, run_pk: int) -> Response:
    run = DiagnosisRun.objects.select_related("session").get(pk=run_pk)
    response.data = run_summary(response.renderer_context["request"], run)
    response.status_code = 200 if run.is_terminal else 202
    return response


@csrf_exempt  # as every DRF view: SessionAuthentication enforces CSRF itself
async def chat_view(request):
    """POST /api/chat: ChatView validates and submits; the wait for the run happens here, asynchronously."""
    response = await sync_to_async(_chat_submit)(request)
    run_pk = getattr(response, "wait_for_run_pk", None)
    if run_pk is not None:
        await run_wait_terminal(run_pk, settings.CHAT_WAIT_SECONDS)
        response = await sync_to_async(_answer_after_wait)(response, run_pk)
    return response


chat_view.cls, chat_view.initkwargs = ChatView, {}  # the OpenAPI schema describes ChatView


def _run_or_404(request, run_id: str) -> DiagnosisRun:
    if not is_valid_run_id(run_id):
        raise ApiError(code="invalid_input", message=f"runId must match {RUN_ID_PATTERN}", field="runId")
    run = run_get_for_user(user=request.user, run_id=run_id)
    if run is None:
        raise ApiError(code="not_found", message="run not found", status_code=404, field="runId")
    return run


class RunView(APIView):
    @extend_schema(responses=RunOutput)
    def get(self, request, run_id: str):
        return Response(run_summary(request, _run_or_404(request, run_id)))


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode()  # only used for error bodies on this endpoint


def _sse(event_id: int | None, kind: str, data: dict) -> str:
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
    return _sse(None, "status", {"status": run.status, "runId": run.run_id, "degraded": run.degraded,
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
                    yield _sse(event.id, event.kind, {**event.data, "runId": run.run_id})
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
                yield _sse(event.id, event.kind, {**event.data, "runId": run.run_id})
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


class RunEventsView(JsonErrorsMixin, APIView):
    renderer_classes = [EventStreamRenderer, *APIView.renderer_classes]

    @extend_schema(
        responses={(200, "text/event-stream"): OpenApiTypes.STR},
        parameters=[OpenApiParameter("Last-Event-ID", OpenApiTypes.INT, OpenApiParameter.HEADER, required=False)],
        description="Server-Sent Events: the run's progress, then its terminal status. Resumable with Last-Event-ID. "
                    "429 when the user already has SSE_MAX_STREAMS_PER_USER streams open.",
    )
    def get(self, request, run_id: str):
        run = _run_or_404(request, run_id)
        after = last_event_id(request)
        slot = stream_slot_or_429(request)
        if is_asgi(request):
            release_request_connections(request)
            return sse_response(live_stream(run, after, slot=slot))
        return sse_response(event_stream(run, after, slot=slot))


_run_events = RunEventsView.as_view()


async def run_events_view(request, run_id: str):
    """GET /api/runs/{runId}/events: RunEventsView authorises and opens the stream; under ASGI the
    stream itself is asynchronous."""
    return await sync_to_async(_run_events)(request, run_id=run_id)


run_events_view.cls, run_events_view.initkwargs = RunEventsView, {}
