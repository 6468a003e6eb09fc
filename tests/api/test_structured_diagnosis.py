"""The structured diagnosis of a run: stored, and returned by the run, chat and trace APIs and the schema."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from diagnosis.models import DiagnosisRun


@pytest.mark.django_db(transaction=True)
def test_a_diagnosis_run_returns_its_structured_root_cause_everywhere(alice_api, demo_knowledge):
    body = alice_api.post("/api/chat", {"question": "Why is payment-service failing?"}, format="json").json()
    assert body["status"] == "SUCCESS", body
    diagnosis = body["diagnosis"]
    root = diagnosis["rootCause"]
    assert root["service"] == "payment-service" and root["cause"], diagnosis
    assert root["claimIds"] and root["summary"].startswith("Root cause")
    assert diagnosis["nothingWrong"] is False and diagnosis["undetermined"] is False
    run = DiagnosisRun.objects.get(run_id=body["runId"])
    assert run.diagnosis == diagnosis
    assert run.root_service == "payment-service"  # the console's service filter reads this column
    # Every claim id of the root cause is a claim the Gatekeeper verified in this run.
    verified = run.self_evaluation["verifier_evaluation"]["verified_executor_output"]["claims"]
    assert set(root["claimIds"]) <= {c["claim_id"] for c in verified}
    assert alice_api.get(f"/api/runs/{body['runId']}").json()["diagnosis"] == diagnosis
    trace = alice_api.get(body["links"]["trace"]).json()
    assert trace["run"]["diagnosis"] == diagnosis


@pytest.mark.django_db(transaction=True)
def test_a_healthy_service_is_nothing_wrong(alice_api, demo_knowledge):
    body = alice_api.post("/api/chat", {"question": "Is catalog-service healthy?"}, format="json").json()
    assert body["status"] == "SUCCESS", body
    assert body["diagnosis"]["rootCause"] is None and body["diagnosis"]["nothingWrong"] is True
    assert body["diagnosis"]["undetermined"] is False
    assert DiagnosisRun.objects.get(run_id=body["runId"]).root_service is None


@pytest.mark.django_db
def test_the_schema_describes_the_structured_diagnosis():
    schema = APIClient().get("/api/schema", HTTP_ACCEPT="application/json").json()["components"]["schemas"]
    run = schema["RunOutput"]["properties"]
    assert "diagnosis" in run
    structured = schema["StructuredDiagnosisOutput"]["properties"]
    assert set(structured) == {"rootCause", "nothingWrong", "undetermined", "symptoms"}
    assert set(schema["RootCauseOutput"]["properties"]) == {"service", "cause", "summary", "startedAt", "claimIds"}
