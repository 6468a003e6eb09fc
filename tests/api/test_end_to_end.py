"""A client's whole journey: diagnose, read the exact trace, rate it, and see the case reused."""

from __future__ import annotations

import pytest

from diagnosis.models import CaseLibraryEntry, ToolInvocation

# In the services pass: against the production server (gunicorn/uvicorn, a Celery worker and beat).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.production_server]


def test_a_useful_diagnosis_becomes_a_case_that_a_later_run_retrieves(alice_api, bob_api, support_api, demo_knowledge):
    first = alice_api.post("/api/chat", {"question": "Why is payment-service failing?", "sessionId": "e2e-a"}, format="json")
    assert first.status_code == 200, first.content
    run = first.json()
    assert run["status"] == "SUCCESS" and run["verdict"] in ("PASS", "LOW_CONFID")

    trace = alice_api.get(f"/api/diagnosis/e2e-a/trace?runId={run['runId']}").json()
    invocation_ids = {i["invocationId"] for i in trace["toolInvocations"]}
    assert invocation_ids and trace["steps"]
    assert [s["stepIndex"] for s in trace["steps"]] == list(range(len(trace["steps"])))
    verified = trace["run"]["selfEvaluation"]["verifier_evaluation"]["verified_evidence"]
    assert verified and {e["source_invocation_id"] for e in verified} <= invocation_ids
    assert trace["run"]["orchestrationTrace"]["version"] == "stategraph-v1"

    feedback = alice_api.post("/api/feedback", {"sessionId": "e2e-a", "runId": run["runId"], "feedback": "useful"}, format="json")
    assert feedback.status_code == 200 and feedback.json()["caseExists"] is True
    assert CaseLibraryEntry.objects.filter(run__run_id=run["runId"]).exists()
    # A candidate is retrieved by nobody until support staff publish it.
    published = support_api.post(f"/api/cases/{run['runId']}/publish", {}, format="json")
    assert published.status_code == 200 and published.json()["status"] == "PUBLISHED"

    second = bob_api.post("/api/chat", {"question": "payment-service is failing again, why?", "sessionId": "e2e-b"}, format="json").json()
    lookups = ToolInvocation.objects.filter(run__run_id=second["runId"], tool_name="lookup_knowledge", status="SUCCESS")
    retrieved = [r for inv in lookups for r in inv.result["results"]]
    case_id = CaseLibraryEntry.objects.get(run__run_id=run["runId"]).case_id
    assert any(r["source_type"] == "case" and r["source_id"] == case_id for r in retrieved)
    assert run["runId"] not in str(retrieved)  # another user's run is known by its case id only
