"""Per-view input and output serializers of the traces API; camelCase on the wire.

Each group below belongs to one view in `traces.api`; the only one shared is the run's columns, which the
trace and the run list both show. The JSON columns (model input, tool
arguments, self evaluation …) are passed through as stored.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from diagnosis.api.run_output import StructuredDiagnosisOutput
from diagnosis.contracts import orchestration_trace_read
from diagnosis.ids import RUN_ID_RE, SESSION_ID_RE
from diagnosis.models import DiagnosisRun
from diagnosis.services.feedback import COMMENT_MAX_CHARS

@extend_schema_field(StructuredDiagnosisOutput(allow_null=True))
class StructuredDiagnosisField(serializers.JSONField):
    """The stored diagnosis as is; its documented shape is the run API's (one owner)."""


_session_id = RegexValidator(SESSION_ID_RE, "Not a valid session id.")
_run_id = RegexValidator(RUN_ID_RE, "Not a valid run id (run-<32 hex digits>).")


# --- GET /api/diagnosis/{sessionId}/trace?runId=… -------------------------------------------------


class TraceInputSerializer(serializers.Serializer):
    sessionId = serializers.CharField(validators=[_session_id], trim_whitespace=False)
    runId = serializers.CharField(validators=[_run_id], trim_whitespace=False)


# The run's columns that both run views show (its trace and the session's run list): one owner, so the two
# wire shapes cannot drift apart; each view's serializer adds its own fields.
class RunColumnsSerializer(serializers.Serializer):
    runId = serializers.CharField(source="run_id")
    agentFlow = serializers.CharField(source="agent_flow")
    strategy = serializers.CharField()
    status = serializers.CharField()
    question = serializers.CharField()
    answer = serializers.CharField()
    degraded = serializers.BooleanField()
    effectiveVerdict = serializers.CharField(source="effective_verdict")
    feedback = serializers.CharField(allow_null=True)
    feedbackAt = serializers.DateTimeField(source="feedback_at", allow_null=True)
    errorCode = serializers.CharField(source="error_code")
    durationMs = serializers.IntegerField(source="duration_ms", allow_null=True)
    stepCount = serializers.IntegerField(source="step_count")
    toolCount = serializers.IntegerField(source="tool_count")
    promptTokens = serializers.IntegerField(source="prompt_tokens")
    completionTokens = serializers.IntegerField(source="completion_tokens")
    modelName = serializers.CharField(source="model_name")
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)


class TraceRunSerializer(RunColumnsSerializer):
    """The run's columns, and what only its trace shows (the diagnosis, the orchestration, the replay)."""

    sessionId = serializers.CharField(source="session.session_id")
    selfEvaluation = serializers.JSONField(source="self_evaluation")
    diagnosis = StructuredDiagnosisField(allow_null=True, help_text="the structured diagnosis, as GET /api/runs/{runId}")
    orchestrationTrace = serializers.SerializerMethodField()
    feedbackComment = serializers.CharField(source="feedback_comment")
    errorMessage = serializers.CharField(source="error_message")
    promptVersion = serializers.CharField(source="prompt_version")
    replayOf = serializers.SerializerMethodField(help_text="The recorded run this run replays, if any.")
    replayOptions = serializers.JSONField(source="replay_options", allow_null=True)

    def get_replayOf(self, run: DiagnosisRun) -> str | None:  # noqa: N802 (wire name)
        if not run.replay_of_id:
            return None
        return DiagnosisRun.objects.filter(pk=run.replay_of_id).values_list("run_id", flat=True).first()

    def get_orchestrationTrace(self, run: DiagnosisRun) -> dict | None:  # noqa: N802 (wire name)
        return orchestration_trace_read(run.orchestration_trace)


# The run's columns (above), the session's, a step's and a tool call's (below) read alike (camelCase name =
# field of its source column): each is another table's row, with no field of one standing for another's.
class TraceChatSessionSerializer(serializers.Serializer):
    sessionId = serializers.CharField(source="session_id")
    title = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    lastMessageAt = serializers.DateTimeField(source="last_message_at", allow_null=True)


class TraceStepSerializer(serializers.Serializer):
    stepIndex = serializers.IntegerField(source="step_index")
    node = serializers.CharField()
    agent = serializers.CharField()
    attempt = serializers.IntegerField()
    status = serializers.CharField()
    modelName = serializers.CharField(source="model_name")
    modelInput = serializers.JSONField(source="model_input")
    modelOutput = serializers.JSONField(source="model_output")
    hasToolCall = serializers.BooleanField(source="has_tool_call")
    durationMs = serializers.IntegerField(source="duration_ms", allow_null=True)
    promptTokens = serializers.IntegerField(source="prompt_tokens")
    completionTokens = serializers.IntegerField(source="completion_tokens")
    error = serializers.CharField()
    startedAt = serializers.DateTimeField(source="started_at")
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)


class TraceToolInvocationSerializer(serializers.Serializer):
    invocationId = serializers.CharField(source="invocation_id")
    stepIndex = serializers.IntegerField(source="step_index", allow_null=True)
    toolName = serializers.CharField(source="tool_name")
    arguments = serializers.JSONField()
    status = serializers.CharField()
    result = serializers.JSONField()
    truncated = serializers.BooleanField()
    errorMessage = serializers.CharField(source="error_message")
    retrievalDetails = serializers.JSONField(source="retrieval_details")
    evidenceRefs = serializers.JSONField(source="evidence_refs")
    durationMs = serializers.IntegerField(source="duration_ms", allow_null=True)
    replayMode = serializers.CharField(source="replay_mode", help_text="In a replay: recorded, not_in_recording or "
                                       "live_fallback; empty for a live run.")
    sourceInvocation = serializers.SerializerMethodField(help_text="In a replay: the recorded invocation served.")
    createdAt = serializers.DateTimeField(source="created_at")

    def get_sourceInvocation(self, invocation) -> dict | None:  # noqa: N802 (wire name)
        ref = getattr(invocation, "source_invocation_ref", None)
        return {"runId": invocation.source_run_ref, "invocationId": ref} if ref else None


class TraceOutputSerializer(serializers.Serializer):
    run = TraceRunSerializer()
    chatSession = TraceChatSessionSerializer(source="run.session")
    steps = TraceStepSerializer(many=True)
    toolInvocations = TraceToolInvocationSerializer(many=True, source="tool_invocations")


# --- GET /api/diagnosis/{sessionId}/runs ----------------------------------------------------------------

RUN_LIST_MAX_PAGE_SIZE = 100
RUN_LIST_DEFAULT_PAGE_SIZE = 20


class RunListInputSerializer(serializers.Serializer):
    sessionId = serializers.CharField(validators=[_session_id], trim_whitespace=False)
    pageSize = serializers.IntegerField(
        required=False, default=RUN_LIST_DEFAULT_PAGE_SIZE, min_value=1, max_value=RUN_LIST_MAX_PAGE_SIZE,
    )
    cursor = serializers.CharField(required=False, max_length=512)


class RunListItemSerializer(RunColumnsSerializer):
    """The run's columns, and the link to its trace."""

    links = serializers.SerializerMethodField()

    def get_links(self, run: DiagnosisRun) -> dict[str, str]:
        session_id = self.context["session_id"]
        trace = reverse("diagnosis-trace", kwargs={"session_id": session_id})
        return {"trace": f"{trace}?runId={run.run_id}"}


class RunListOutputSerializer(serializers.Serializer):
    sessionId = serializers.CharField()
    pageSize = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = RunListItemSerializer(many=True)


# --- POST /api/feedback ---------------------------------------------------------------------------


class FeedbackInputSerializer(serializers.Serializer):
    sessionId = serializers.CharField(validators=[_session_id], trim_whitespace=False)
    runId = serializers.CharField(validators=[_run_id], trim_whitespace=False)
    feedback = serializers.ChoiceField(choices=DiagnosisRun.Feedback.values)
    comment = serializers.CharField(
        required=False, default="", allow_blank=True, allow_null=True, max_length=COMMENT_MAX_CHARS,
    )


class FeedbackOutputSerializer(serializers.Serializer):
    sessionId = serializers.CharField(source="run.session.session_id")
    runId = serializers.CharField(source="run.run_id")
    status = serializers.CharField(source="run.status")
    feedback = serializers.CharField(source="run.feedback")
    feedbackComment = serializers.CharField(source="run.feedback_comment")
    feedbackBy = serializers.CharField(source="run.feedback_by.get_username")
    feedbackAt = serializers.DateTimeField(source="run.feedback_at")
    caseExists = serializers.SerializerMethodField()

    caseStatus = serializers.SerializerMethodField()

    def get_caseExists(self, given) -> bool:  # noqa: N802 (wire name)
        return given.case is not None

    def get_caseStatus(self, given) -> str | None:  # noqa: N802 (wire name)
        return given.case.status if given.case is not None else None


class CasePublishInputSerializer(serializers.Serializer):
    publish = serializers.BooleanField(default=True, help_text="false withdraws a published case back to candidate")


class CaseOutputSerializer(serializers.Serializer):
    runId = serializers.CharField(source="source_run_id")
    status = serializers.CharField()
    claims = serializers.ListField(child=serializers.DictField())
    publishedBy = serializers.CharField(source="published_by.get_username", allow_null=True, default=None)
    publishedAt = serializers.DateTimeField(source="published_at", allow_null=True)
