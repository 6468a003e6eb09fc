"""POST /api/chat, GET /api/runs/{runId} and its Server-Sent Events stream."""

from __future__ import annotations

import json
import logging
import time

from django.conf import settings
from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer
from rest_framework.throttling import UserRateThrottle
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.api.errors import ApiError, error_response
from diagnosis.ids import is_valid_run_id
from diagnosis.models import DiagnosisRun
from diagnosis.selectors import run_events_after, run_evidence_checked, run_get_for_user, run_status, run_suggestions
from diagnosis.services.chat import BrokerUnavailable, ChatInputError, SessionNotFound, chat_submit
from diagnosis.services.strategy import MODES

logger = logging.getLogger(__name__)

SSE_MAX_SECONDS = 600
SSE_POLL_SECONDS = 0.2
SSE_KEEPALIVE_SECONDS = 15


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
        "suggestions": run_suggestions(run=run), "diagnosis": run.diagnosis if isinstance(run.diagnosis, dict) else None,
        "errorCode": run.error_code or None,
        "errorMessage": run.error_message or None, "durationMs": run.duration_ms, "createdAt": run.created_at,
        "startedAt": run.started_at, "finishedAt": run.finished_at, "links": run_links(request, run),
    }


class RootCauseOutput(serializers.Serializer):
    service = serializers.CharField(allow_null=True, help_text="the service the root-cause claim names")
    cause = serializers.CharField(allow_null=True, help_text="the cause category, e.g. oom_killed, dns_failure")
    summary = serializers.CharField(help_text="the verified root-cause statement (quoted evidence not included)")
    startedAt = serializers.CharField(allow_null=True, help_text="ISO 8601 onset of the cause, when known")
    claimIds = serializers.ListField(child=serializers.CharField(), help_text="the verified claims it rests on")


class SymptomOutput(serializers.Serializer):
    service = serializers.CharField()
    summary = serializers.CharField()
    claimIds = serializers.ListField(child=serializers.CharField())


class StructuredDiagnosisOutput(serializers.Serializer):
    rootCause = RootCauseOutput(allow_null=True)
    nothingWrong = serializers.BooleanField(help_text="the evidence shows no problem")
    undetermined = serializers.BooleanField(
        help_text="a problem whose cause this run could not establish; never healthy and never PASS")
    symptoms = SymptomOutput(many=True)


class RunOutput(serializers.Serializer):
    sessionId = serializers.CharField()
    runId = serializers.CharField()
    status = serializers.ChoiceField(DiagnosisRun.Status.choices)
    agentFlow = serializers.ChoiceField(DiagnosisRun.Flow.choices)
    strategy = serializers.ChoiceField(DiagnosisRun.Strategy.choices)
    question = serializers.CharField()
    answer = serializers.CharField(allow_null=True)
    degraded = serializers.BooleanField()
    verdict = serializers.ChoiceField(DiagnosisRun.Verdict.choices, allow_null=True)
    evidenceChecked = serializers.BooleanField(help_text="false for SIMPLE answers, which no Gatekeeper checked")
    suggestions = serializers.ListField(child=serializers.CharField(),
                                        help_text="advice in the answer that was not checked against evidence")
    diagnosis = StructuredDiagnosisOutput(allow_null=True, help_text="null until a diagnosis run succeeds")
    errorCode = serializers.CharField(allow_null=True)
    errorMessage = serializers.CharField(allow_null=True)
    durationMs = serializers.IntegerField(allow_null=True)
    createdAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)
    links = serializers.DictField(child=serializers.URLField())


SUBMISSION_ERRORS = (ChatInputError, BrokerUnavailable, SessionNotFound)


def submission_error_response(exc: Exception) -> Response:
    """The answer to a refused submission (chat and alert analysis alike)."""
    if isinstance(exc, BrokerUnavailable):
        return error_response(code="broker_unavailable", status_code=503, headers={"Retry-After": "10"},
                              message="The task queue (Redis) is unavailable; the run was recorded FAILED. Retry shortly.")
    if isinstance(exc, SessionNotFound):
        return error_response(code="not_found", message="session not found", status_code=404, field="sessionId")
    headers = {"Retry-After": "5"} if exc.status == 429 else None
    return error_response(code=exc.code, message=exc.message, status_code=exc.status, field=exc.field, headers=headers)


def wait_for_terminal(run: DiagnosisRun, seconds: float) -> DiagnosisRun:
    deadline = time.monotonic() + seconds
    while not run.is_terminal and time.monotonic() < deadline:
        time.sleep(0.1)
        run.refresh_from_db()
    return run


class ChatThrottle(UserRateThrottle):
    scope = "chat"

    def allow_request(self, request, view):
        # The counters live in the Redis cache; when Redis is down the request is refused before anything
        # is created, with a 503 naming it, instead of escaping as a 500.
        try:
            return super().allow_request(request, view)
        except Exception as exc:
            logger.error("chat throttle: the cache is unavailable: %s", exc)
            raise ApiError(code="cache_unavailable", status_code=503,
                           message="The cache (Redis) is unavailable, so the request was not accepted and no run was "
                                   "created. Retry shortly.") from None


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
            submission = chat_submit(
                user=request.user, question=question, session_id=values.get("sessionId") or values.get("Id"),
                mode=values["mode"], request_id=values.get("requestId"),
            )
        except SUBMISSION_ERRORS as exc:
            return submission_error_response(exc)
        run = DiagnosisRun.objects.select_related("session").get(pk=submission.run.pk)
        if values["wait"]:
            run = wait_for_terminal(run, settings.CHAT_WAIT_SECONDS)
        return Response(run_summary(request, run), status=200 if run.is_terminal else 202)


def _run_or_404(request, run_id: str) -> DiagnosisRun:
    if not is_valid_run_id(run_id):
        raise ApiError(code="invalid_input", message="runId must match ^run-[0-9a-f]{32}$", field="runId")
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


def event_stream(run: DiagnosisRun, after: int):
    """Events after `after`, as they happen; closes after the terminal status event."""
    yield "retry: 2000\n\n"
    started = idle_since = time.monotonic()
    while time.monotonic() - started < SSE_MAX_SECONDS:
        events = run_events_after(run=run, after=after)
        for event in events:
            after = event.seq
            yield _sse(event.seq, event.kind, {**event.data, "runId": run.run_id})
            if event.kind == "status" and event.data.get("status") in DiagnosisRun.TERMINAL:
                return
        if events:
            idle_since = time.monotonic()
            continue
        if run_status(run_pk=run.pk) in DiagnosisRun.TERMINAL and not run_events_after(run=run, after=after):
            run.refresh_from_db()
            yield _sse(None, "status", {"status": run.status, "runId": run.run_id, "degraded": run.degraded,
                                        "verdict": run.effective_verdict or None, "errorCode": run.error_code or None})
            return
        if time.monotonic() - idle_since > SSE_KEEPALIVE_SECONDS:
            idle_since = time.monotonic()
            yield ": keep-alive\n\n"
        time.sleep(SSE_POLL_SECONDS)


class RunEventsView(APIView):
    renderer_classes = [EventStreamRenderer, *APIView.renderer_classes]

    @extend_schema(
        responses={(200, "text/event-stream"): OpenApiTypes.STR},
        parameters=[OpenApiParameter("Last-Event-ID", OpenApiTypes.INT, OpenApiParameter.HEADER, required=False)],
    )
    def get(self, request, run_id: str):
        run = _run_or_404(request, run_id)
        last = request.headers.get("Last-Event-ID") or request.query_params.get("lastEventId") or "0"
        if not (last.isascii() and last.isdigit()):  # str.isdigit() also accepts "²", which int() refuses
            raise ApiError(code="invalid_input", message="Last-Event-ID must be a non-negative integer", field="Last-Event-ID")
        response = StreamingHttpResponse(event_stream(run, int(last)), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
