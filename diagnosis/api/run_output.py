"""The run as the API returns it (POST /api/chat, GET /api/runs/{runId}, the trace's diagnosis): its
documented shape, field by field, with each reader-facing field's contract (docs/TRUST.md)."""

from __future__ import annotations

from rest_framework import serializers

from diagnosis.models import DiagnosisRun
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


class StructuredDiagnosisOutput(serializers.Serializer):
    rootCause = RootCauseOutput(allow_null=True)
    nothingWrong = serializers.BooleanField(help_text="the evidence shows no problem (never while a cited record is "
                                                      "an error log line, a firing alert or a Warning event)")
    undetermined = serializers.BooleanField(
        help_text="a problem whose cause this run could not establish; never healthy and never PASS")
    symptoms = SymptomOutput(many=True)
    coverage = CoverageOutput(required=False, help_text="alert analyses (AI_OPS) only: alerts analysed out of received")


class AdviceOutput(serializers.Serializer):
    text = serializers.CharField(help_text="inert Markdown: a quoted runbook/case step, or advice not checked "
                                           "against evidence")
    verified = serializers.BooleanField(help_text="true only for a step quoted from a verified runbook or case excerpt")
    destructive = serializers.BooleanField(help_text="the step contains a destructive command (deletes data or "
                                                     "resources, force-pushes, pipes a download into a shell); "
                                                     "never verified, always shown with a warning")
    claimId = serializers.RegexField(CLAIM_ID_PATTERN, allow_null=True)


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
                                        help_text="advice in the answer that was not checked against evidence "
                                                  "(inert Markdown)")
    advice = AdviceOutput(many=True, help_text="every next step of the answer with its flags")
    diagnosis = StructuredDiagnosisOutput(allow_null=True, help_text="null until a diagnosis run succeeds")
    errorCode = serializers.CharField(allow_null=True)
    errorMessage = serializers.CharField(allow_null=True)
    durationMs = serializers.IntegerField(allow_null=True)
    createdAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)
    links = serializers.DictField(child=serializers.URLField())
