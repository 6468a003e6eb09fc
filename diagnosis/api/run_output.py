"""The run as the API returns it (POST /api/chat, GET /api/runs/{runId}, POST /api/ai_ops with
stream=false, a replay, the trace's diagnosis): its documented shape, field by field, with each
reader-facing field's contract (docs/TRUST.md). Every view serialises a run through `RunOutput`."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from diagnosis.contracts import INVOCATION_ID_PATTERN
from diagnosis.models import DiagnosisRun
from diagnosis.ranking_view import AGREEMENTS, LOCALISATION_OUTCOMES
from diagnosis.selectors import run_advice, run_evidence_checked, run_suggestions
from diagnosis.structured_diagnosis import CAUSE_KIND_IDS, CLAIM_ID_PATTERN


class RootCauseOutput(serializers.Serializer):
    service = serializers.CharField(allow_null=True, help_text="the service label of the records the root-cause "
                                                               "claims cite (server-derived); null when they name none")
    cause = serializers.ChoiceField(list(CAUSE_KIND_IDS), allow_null=True,
                                    help_text="a fault-kind id of the closed taxonomy (diagnosis/localisation/taxonomy.py)")
    summary = serializers.CharField(help_text="plain text: the verified root-cause statement (quoted evidence not "
                                              "included); escape it before putting it in HTML or Markdown")
    startedAt = serializers.CharField(allow_null=True, help_text="ISO 8601: the earliest timestamp of the cited records")
    claimIds = serializers.ListField(child=serializers.RegexField(CLAIM_ID_PATTERN),
                                     help_text="the verified claims it rests on")
    basis = serializers.ChoiceField(("observed", "knowledge_only"), help_text=(
        "knowledge_only: the root cause rests only on runbooks or past cases, not on this incident's telemetry; "
        "the run's verdict is then at most LOW_CONFID"))


class SymptomOutput(serializers.Serializer):
    service = serializers.CharField(help_text="the service label of the records the claim cites")
    summary = serializers.CharField(help_text="plain text: the verified statement")
    claimIds = serializers.ListField(child=serializers.RegexField(CLAIM_ID_PATTERN))


class CoverageOutput(serializers.Serializer):
    alertsAnalysed = serializers.IntegerField(min_value=0)
    alertsReceived = serializers.IntegerField(min_value=0)


class CandidateEvidenceOutput(serializers.Serializer):
    invocationId = serializers.RegexField(INVOCATION_ID_PATTERN, help_text="an invocation of this run")
    tool = serializers.CharField(help_text="the tool that was called (the invocation's own tool name)")
    rawPath = serializers.CharField(help_text="the JSON path of the record in the stored result; the record itself "
                                              "is read from the invocation, never copied here")


class CandidateOutput(serializers.Serializer):
    rank = serializers.IntegerField(min_value=1, help_text="the localiser's rank (roots first); a gap means a "
                                                           "candidate whose name is no service name was left out")
    service = serializers.CharField(help_text="a service (or node:<name>) name from the tool output, matching "
                                              "the service-name pattern; escape it before putting it in HTML")
    kind = serializers.ChoiceField(list(CAUSE_KIND_IDS), allow_null=True,
                                   help_text="a fault-kind id of the closed taxonomy, or null")
    onset = serializers.FloatField(allow_null=True, help_text="Unix seconds: its first sustained deviation")
    strength = serializers.FloatField(help_text="the anomaly strength the ranking weighed")
    explainedBy = serializers.CharField(allow_null=True, help_text="the anomalous dependency that accounts for it")
    explains = serializers.ListField(child=serializers.CharField(), help_text="the candidates it accounts for")
    evidence = CandidateEvidenceOutput(many=True, help_text="the records that show it (at most 4)")


class LocalisationOutput(serializers.Serializer):
    outcome = serializers.ChoiceField(LOCALISATION_OUTCOMES, help_text="the localiser's own outcome")
    reason = serializers.CharField(allow_null=True, help_text="why it is undetermined (an id such as not_separated)")
    subject = serializers.ListField(child=serializers.CharField(), help_text="the services the question names")
    withoutData = serializers.ListField(child=serializers.CharField(),
                                        help_text="the services asked about that returned no telemetry")


class StructuredDiagnosisOutput(serializers.Serializer):
    rootCause = RootCauseOutput(allow_null=True)
    nothingWrong = serializers.BooleanField(help_text="the evidence shows no problem (never while a cited record is "
                                                      "an error log line, a firing alert or a Warning event)")
    undetermined = serializers.BooleanField(
        help_text="a problem whose cause this run could not establish; never healthy and never PASS")
    symptoms = SymptomOutput(many=True)
    coverage = CoverageOutput(required=False, help_text="alert analyses (AI_OPS) only: alerts analysed out of received")
    candidates = CandidateOutput(many=True, required=False, help_text=(
        "a hint, not evidence: the localiser's ranking (top 5) over this run's recorded tool outputs, whatever "
        "model answered; absent on runs recorded before it was kept"))
    localisation = LocalisationOutput(required=False, help_text="the localiser's outcome over the same outputs")
    agreement = serializers.ChoiceField(AGREEMENTS, required=False, help_text=(
        "whether rootCause.service is the ranking's top root (the first candidate nothing explains): "
        "no_root_cause when the diagnosis names none, no_ranking when the localiser found no candidate"))


class AdviceOutput(serializers.Serializer):
    text = serializers.CharField(help_text="inert Markdown: a quoted runbook/case step, or advice not checked "
                                           "against evidence")
    verified = serializers.BooleanField(help_text="true only for a step quoted from a verified runbook or case excerpt")
    destructive = serializers.BooleanField(help_text="the step contains a destructive command (deletes data or "
                                                     "resources, force-pushes, pipes a download into a shell); "
                                                     "never verified, always shown with a warning")
    claimId = serializers.RegexField(CLAIM_ID_PATTERN, allow_null=True)


class _BlankAsNull:
    """A stored blank string means "none": null on the wire."""

    def to_representation(self, value):
        return super().to_representation(value) or None


class OptionalCharField(_BlankAsNull, serializers.CharField):
    pass


class OptionalChoiceField(_BlankAsNull, serializers.ChoiceField):
    pass


def run_links(request, run: DiagnosisRun) -> dict[str, str]:
    """Where a client polls the run, streams its events and reads its trace."""
    return {
        "run": request.build_absolute_uri(reverse("run-detail", args=[run.run_id])),
        "events": request.build_absolute_uri(reverse("run-events", args=[run.run_id])),
        "trace": request.build_absolute_uri(reverse("diagnosis-trace", args=[run.session.session_id])) + f"?runId={run.run_id}",
    }


# Serialises a `DiagnosisRun` with its session selected; `context["request"]` makes the links absolute.
# (A comment, not a docstring: drf-spectacular would publish a docstring as the schema's description.)
class RunOutput(serializers.Serializer):
    sessionId = serializers.CharField(source="session.session_id")
    runId = serializers.CharField(source="run_id")
    status = serializers.ChoiceField(DiagnosisRun.Status.choices)
    agentFlow = serializers.ChoiceField(DiagnosisRun.Flow.choices, source="agent_flow")
    strategy = serializers.ChoiceField(DiagnosisRun.Strategy.choices)
    question = serializers.CharField()
    answer = OptionalCharField(allow_null=True)
    degraded = serializers.BooleanField()
    verdict = OptionalChoiceField(DiagnosisRun.Verdict.choices, allow_null=True, source="effective_verdict")
    evidenceChecked = serializers.SerializerMethodField(help_text="false for SIMPLE answers, which no Gatekeeper checked")
    suggestions = serializers.SerializerMethodField(help_text="advice in the answer that was not checked against "
                                                              "evidence (inert Markdown)")
    advice = serializers.SerializerMethodField(help_text="every next step of the answer with its flags")
    diagnosis = serializers.SerializerMethodField(help_text="null until a diagnosis run succeeds")
    errorCode = OptionalCharField(allow_null=True, source="error_code")
    errorMessage = OptionalCharField(allow_null=True, source="error_message")
    durationMs = serializers.IntegerField(allow_null=True, source="duration_ms")
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(allow_null=True, source="started_at")
    finishedAt = serializers.DateTimeField(allow_null=True, source="finished_at")
    links = serializers.SerializerMethodField()

    def get_evidenceChecked(self, run: DiagnosisRun) -> bool:
        return run_evidence_checked(run=run)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_suggestions(self, run: DiagnosisRun) -> list[str]:
        return run_suggestions(run=run)

    # The advice and the structured diagnosis are stored in their documented shapes by their owners
    # (diagnosis.contracts, diagnosis.structured_diagnosis); they are passed through as read.
    @extend_schema_field(AdviceOutput(many=True))
    def get_advice(self, run: DiagnosisRun) -> list[dict]:
        return run_advice(run=run)

    @extend_schema_field(StructuredDiagnosisOutput(allow_null=True))
    def get_diagnosis(self, run: DiagnosisRun) -> dict | None:
        return run.diagnosis if isinstance(run.diagnosis, dict) else None

    @extend_schema_field(serializers.DictField(child=serializers.URLField()))
    def get_links(self, run: DiagnosisRun) -> dict[str, str]:
        return run_links(self.context["request"], run)


def run_output(request, run: DiagnosisRun) -> dict:
    """The response body of one run, as `RunOutput` documents it."""
    return RunOutput(run, context={"request": request}).data
