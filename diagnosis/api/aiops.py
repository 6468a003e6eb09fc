"""POST /api/ai_ops: alert analysis streamed as Server-Sent Events (F-60).

The first message (`event: metadata`, no id) carries sessionId and runId; then the run's progress
events exactly as `GET /api/runs/{runId}/events` serves them (resumable there with Last-Event-ID);
then `event: report` with the checked Markdown report, then the terminal `event: status`.
"""

from __future__ import annotations

from typing import Any, Mapping

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.api.errors import SUBMISSION_ERRORS, ApiError, submission_error_response
from diagnosis.api.run_output import RunOutput, run_links, run_output
from diagnosis.api.sse import (
    EventStreamRenderer, event_stream, is_asgi, live_stream, release_request_connections, sse_message, sse_response,
    stream_slot_or_429,
)
from diagnosis.api.throttling import ChatThrottle
from diagnosis.models import DiagnosisRun
from diagnosis.services.aiops import AlertInputError, aiops_input, aiops_submit
from diagnosis.services.live_progress import stream_slots

FALSE_WORDS = ("false", "0", "no")


def _option(request, name: str) -> tuple[Any, bool]:
    """A control field from the JSON body (null = absent), else from the query string (an Alertmanager
    receiver cannot add body fields). Returns (value, from_query)."""
    body = request.data if isinstance(request.data, Mapping) else {}
    if body.get(name) is not None:
        return body[name], False
    return request.query_params.get(name), True


def _id_option(request, name: str) -> str | None:
    value, _ = _option(request, name)
    if value is not None and not isinstance(value, str):
        raise ApiError(code="invalid_input", message=f"{name} must be a string", field=name)
    return value or None


def _stream_wanted(request) -> bool:
    value, from_query = _option(request, "stream")
    if value is None:
        return True
    if isinstance(value, bool) and not from_query:
        return value
    if from_query and value.lower() in (*FALSE_WORDS, "true", "1", "yes"):
        return value.lower() not in FALSE_WORDS
    raise ApiError(code="invalid_input", message="stream must be a boolean", field="stream")


def metadata(request, run: DiagnosisRun) -> dict[str, Any]:
    """The first message: the ids, and what the run analyses (as stored with it, also for a repeated requestId)."""
    submitted = aiops_input(run)
    return {
        "sessionId": run.session.session_id, "runId": run.run_id, "status": run.status, "agentFlow": run.agent_flow,
        "alertsTotal": submitted.get("alertsTotal", 0), "alertsIgnored": submitted.get("alertsIgnored", 0),
        "alertsSource": submitted.get("source", "request") if submitted.get("alertsTotal") else "query_alerts",
        "links": run_links(request, run),
    }


def aiops_stream(run: DiagnosisRun, meta: dict[str, Any], *, slot=None):
    yield sse_message(None, "metadata", meta)
    yield from event_stream(run, 0, slot=slot)


@extend_schema_serializer(component_name="AiOpsAlert")
class AlertIn(serializers.Serializer):
    labels = serializers.DictField(child=serializers.CharField(), help_text="Must include alertname; values are strings.")
    annotations = serializers.DictField(child=serializers.CharField(), required=False, allow_null=True)
    state = serializers.ChoiceField(["firing", "pending", "resolved", "inactive"], required=False, allow_null=True)
    status = serializers.CharField(required=False, allow_null=True, help_text="firing | resolved: Alertmanager's name for state.")
    activeAt = serializers.DateTimeField(required=False, allow_null=True)
    startsAt = serializers.DateTimeField(required=False, allow_null=True)
    endsAt = serializers.DateTimeField(required=False, allow_null=True)
    fingerprint = serializers.CharField(required=False, allow_null=True, max_length=64)
    generatorURL = serializers.CharField(required=False, allow_null=True, max_length=2048)


class AiOpsView(APIView):
    throttle_classes = [ChatThrottle]
    renderer_classes = [*APIView.renderer_classes, EventStreamRenderer]

    @extend_schema_serializer(component_name="AiOpsInput")
    class InputSerializer(serializers.Serializer):
        """Documentation only: the body is validated by `alerts_parse`, which names the exact field."""

        sessionId = serializers.CharField(required=False, allow_null=True, max_length=64,
                                          help_text="Also accepted as a query parameter.")
        requestId = serializers.CharField(required=False, allow_null=True, max_length=64,
                                          help_text="Idempotency key within the session.")
        stream = serializers.BooleanField(required=False, allow_null=True, default=True,
                                          help_text="false: answer 202 with the links instead of streaming.")
        language = serializers.ChoiceField(["en", "zh"], required=False, allow_null=True,
                                           help_text="Report language; default: the alerts' language.")
        alerts = AlertIn(many=True, required=False, allow_null=True,
                         help_text="At most 50; resolved alerts are ignored; none firing: query_alerts is used.")
        version = serializers.ChoiceField(["4"], required=False, help_text="Set: an Alertmanager webhook payload.")
        status = serializers.CharField(required=False, allow_null=True, help_text="firing | resolved")
        receiver = serializers.CharField(required=False, allow_null=True, max_length=2048)
        groupKey = serializers.CharField(required=False, allow_null=True, max_length=2048)
        groupLabels = serializers.DictField(child=serializers.CharField(), required=False, allow_null=True)
        commonLabels = serializers.DictField(child=serializers.CharField(), required=False, allow_null=True)
        commonAnnotations = serializers.DictField(child=serializers.CharField(), required=False, allow_null=True)
        externalURL = serializers.CharField(required=False, allow_null=True, max_length=2048)
        truncatedAlerts = serializers.IntegerField(required=False, allow_null=True, min_value=0)

    @extend_schema(
        request=InputSerializer,
        responses={(200, "text/event-stream"): OpenApiTypes.STR, (202, "application/json"): RunOutput},
        parameters=[OpenApiParameter("sessionId", OpenApiTypes.STR, OpenApiParameter.QUERY, required=False),
                    OpenApiParameter("requestId", OpenApiTypes.STR, OpenApiParameter.QUERY, required=False),
                    OpenApiParameter("stream", OpenApiTypes.BOOL, OpenApiParameter.QUERY, required=False)],
        description="Alert analysis (agent_flow AI_OPS). Body: {sessionId?, alerts?} or an Alertmanager webhook "
                    "payload (version 4). Streams SSE: metadata (sessionId, runId), progress, report, status.",
    )
    def post(self, request):
        session_id, request_id = _id_option(request, "sessionId"), _id_option(request, "requestId")
        stream = _stream_wanted(request)
        slot = stream_slot_or_429(request) if stream else None
        try:
            submission = aiops_submit(user=request.user, payload=request.data, session_id=session_id, request_id=request_id)
        except Exception as exc:
            if slot:
                stream_slots.release(*slot)
            if isinstance(exc, AlertInputError):
                raise ApiError(code="invalid_input", message=exc.message, field=exc.field) from None
            if isinstance(exc, SUBMISSION_ERRORS):
                return submission_error_response(exc)
            raise
        run = DiagnosisRun.objects.select_related("session").get(pk=submission.run.pk)
        if not stream:
            # JSON whatever the Accept header asked for: the event-stream renderer is for the stream only.
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"
            return Response(run_output(request, run), status=202)
        meta = metadata(request, run)
        if is_asgi(request):  # the stream holds no thread (nor database connection) while the run executes
            release_request_connections(request)
            return sse_response(live_stream(run, 0, slot=slot, prefix=(sse_message(None, "metadata", meta),)))
        return sse_response(aiops_stream(run, meta, slot=slot))
