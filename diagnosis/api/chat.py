"""The run request views: POST /api/chat, GET /api/runs/{runId} and GET /api/runs/{runId}/events.

Each view authorises, validates and hands over: to the submission service, to `RunOutput` for the
body, and to diagnosis/api/sse.py for the event stream. The chat call's wait is asynchronous under
ASGI: it holds no thread while a run executes (see diagnosis/services/live_progress.py).
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.conf import settings
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.api.errors import SUBMISSION_ERRORS, ApiError, submission_error_response
from diagnosis.api.run_output import RunOutput, run_output
from diagnosis.api.sse import (
    EventStreamRenderer, JsonErrorsMixin, event_stream, is_asgi, last_event_id, live_stream,
    release_request_connections, sse_response, stream_slot_or_429,
)
from diagnosis.api.throttling import ChatThrottle
from diagnosis.contracts import RUN_ID_PATTERN
from diagnosis.ids import is_valid_run_id
from diagnosis.models import DiagnosisRun
from diagnosis.selectors import run_get_for_user
from diagnosis.services.live_progress import run_wait_terminal
from diagnosis.services.strategy import MODES
from diagnosis.services.submission import run_submit


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
        response = Response(run_output(request, run), status=200 if run.is_terminal else 202)
        if values["wait"] and not run.is_terminal:
            response.wait_for_run_pk = run.pk  # chat_view waits, without holding a thread, then answers
            release_request_connections(request)
        return response


_chat_submit = ChatView.as_view()


def _answer_after_wait(response: Response, run_pk: int) -> Response:
    run = DiagnosisRun.objects.select_related("session").get(pk=run_pk)
    response.data = run_output(response.renderer_context["request"], run)
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
        return Response(run_output(request, _run_or_404(request, run_id)))


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
