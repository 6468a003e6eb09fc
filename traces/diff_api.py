"""GET /api/runs/{a}/diff/{b}: two runs claim by claim (a run and its replay, or any two runs)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.api.errors import ApiError
from diagnosis.contracts import RUN_ID_PATTERN
from diagnosis.ids import is_valid_run_id
from diagnosis.selectors import visible_runs
from traces.replay_compare import compare_runs


class RunDiffApi(APIView):
    @extend_schema(
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description=(
            "left/right (run id, status, verdict, root cause, claims verified and rejected, unsupported claims, "
            "tools, tokens, cost, latency), verdict {changed, dropped}, rootCause {agree}, claims {verified, "
            "rejected, kept, added, lost, newlyRejected}, tools {added, removed}, tokens, latencyMs, answer "
            "(changed lines), changed (labels)")), 404: OpenApiResponse(description="a run is missing or not yours")},
        description="Compare run `a` (the reference) with run `b` claim by claim. Both must be visible to the "
                    "caller (their owner, or support staff); otherwise 404.",
    )
    def get(self, request, run_a: str, run_b: str):
        runs = []
        for field, run_id in (("a", run_a), ("b", run_b)):
            if not is_valid_run_id(run_id):
                raise ApiError(code="invalid_input", message=f"runId must match {RUN_ID_PATTERN}", field=field)
            run = visible_runs(request.user).select_related("replay_of").filter(run_id=run_id).first()
            if run is None:
                raise ApiError(code="not_found", message="run not found", status_code=404, field=field)
            runs.append(run)
        return Response(compare_runs(*runs))  # cost needs a price table: manage.py regress --prices
