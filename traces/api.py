"""The read side's HTTP API: a run's exact trace, a session's run list, and feedback on a run.

Views validate input, call a selector or a service, and serialise; a run or session the caller
may not see answers 404 exactly like a missing one (SPEC §9).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.api.errors import ApiError
from diagnosis.services.access import can_give_feedback, can_publish_cases
from diagnosis.models import CaseLibraryEntry
from diagnosis.services.feedback import (
    CasePublishRefused,
    NotRateableUseful,
    RunNotFinished,
    case_publish,
    run_feedback_give,
)
from traces import selectors
from traces import serializers as s

_RUN_NOT_FOUND = "No run with this runId in this session."
_SESSION_NOT_FOUND = "No such session."


def _validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class TraceApi(APIView):
    """GET /api/diagnosis/{sessionId}/trace?runId=…: the exact, replayable record of one run."""

    @extend_schema(
        parameters=[OpenApiParameter("runId", str, required=True, description="run-<32 hex digits>")],
        responses=s.TraceOutputSerializer,
    )
    def get(self, request, session_id: str):
        data = _validated(s.TraceInputSerializer, {**request.query_params.dict(), "sessionId": session_id})
        trace = selectors.run_trace_get(user=request.user, session_id=data["sessionId"], run_id=data["runId"])
        if trace is None:
            raise ApiError(code="not_found", message=_RUN_NOT_FOUND, status_code=404)
        return Response(s.TraceOutputSerializer(trace).data)


class RunListPagination(CursorPagination):
    """Newest first by a cursor: stable while new runs arrive, and no COUNT(*) on big sessions."""

    ordering = ("-created_at", "-id")
    page_size = s.RUN_LIST_DEFAULT_PAGE_SIZE
    page_size_query_param = "pageSize"
    max_page_size = s.RUN_LIST_MAX_PAGE_SIZE

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except exceptions.NotFound:
            raise ApiError(code="invalid_input", message="cursor: not a valid cursor.", field="cursor") from None

    def paginate_queryset(self, queryset, request, view=None):
        # A well-encoded cursor can still carry a position that is no timestamp ("p=zzz").
        try:
            return super().paginate_queryset(queryset, request, view)
        except (DjangoValidationError, ValueError, OverflowError):
            raise ApiError(code="invalid_input", message="cursor: not a valid cursor.", field="cursor") from None


class RunListApi(APIView):
    """GET /api/diagnosis/{sessionId}/runs: the session's runs, newest first, `pageSize` ≤ 100."""

    @extend_schema(
        parameters=[
            OpenApiParameter("pageSize", int, description="1..100, default 20; larger values are rejected (400)"),
            OpenApiParameter("cursor", str, description="the opaque cursor of a `next`/`previous` link"),
        ],
        responses=s.RunListOutputSerializer,
    )
    def get(self, request, session_id: str):
        data = _validated(s.RunListInputSerializer, {**request.query_params.dict(), "sessionId": session_id})
        session = selectors.session_get(user=request.user, session_id=data["sessionId"])
        if session is None:
            raise ApiError(code="not_found", message=_SESSION_NOT_FOUND, status_code=404)
        paginator = RunListPagination()
        runs = paginator.paginate_queryset(selectors.run_list(session=session), request, view=self)
        page = {
            "sessionId": session.session_id, "pageSize": paginator.page_size,
            "next": paginator.get_next_link(), "previous": paginator.get_previous_link(), "results": runs,
        }
        return Response(s.RunListOutputSerializer(page, context={"session_id": session.session_id}).data)


class FeedbackApi(APIView):
    """POST /api/feedback: rate a finished run; `useful` puts it in the case library."""

    @extend_schema(request=s.FeedbackInputSerializer, responses=s.FeedbackOutputSerializer)
    def post(self, request):
        data = _validated(s.FeedbackInputSerializer, request.data)
        run = selectors.run_get(user=request.user, session_id=data["sessionId"], run_id=data["runId"])
        if run is None:
            raise ApiError(code="not_found", message=_RUN_NOT_FOUND, status_code=404)
        if not can_give_feedback(request.user, run):
            raise ApiError(code="permission_denied", message="You may read this run but not rate it.", status_code=403)
        try:
            given = run_feedback_give(user=request.user, run=run, feedback=data["feedback"], comment=data["comment"] or "")
        except RunNotFinished as exc:
            raise ApiError(code=exc.code, message=str(exc), status_code=409) from None
        except NotRateableUseful as exc:
            raise ApiError(code=exc.code, message=str(exc), status_code=400, field="feedback") from None
        return Response(s.FeedbackOutputSerializer(given).data)


class CasePublishApi(APIView):
    """POST /api/cases/{runId}/publish: support staff publish a candidate case (or withdraw it)."""

    @extend_schema(request=s.CasePublishInputSerializer, responses=s.CaseOutputSerializer)
    def post(self, request, run_id: str):
        # Refused before any lookup: a caller who may not publish learns nothing about which cases exist.
        if not can_publish_cases(request.user):
            raise ApiError(code="permission_denied", message="only support staff publish cases", status_code=403)
        data = _validated(s.CasePublishInputSerializer, request.data)
        case = CaseLibraryEntry.objects.filter(source_run_id=run_id).select_related("published_by").first()
        if case is None:
            raise ApiError(code="not_found", message="no case for this run", status_code=404)
        try:
            case = case_publish(user=request.user, case=case, publish=data["publish"])
        except CasePublishRefused as exc:
            raise ApiError(code=exc.code, message=str(exc), status_code=403) from None
        return Response(s.CaseOutputSerializer(case).data)
