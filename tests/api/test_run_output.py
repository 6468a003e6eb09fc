"""RunOutput: the one serialiser of a run's response body (chat, run detail, alert analysis, replay)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIRequestFactory

from diagnosis.api.run_output import RunOutput, run_output
from diagnosis.models import DiagnosisRun
from tests.factories import ChatSessionFactory, DiagnosisRunFactory

pytestmark = pytest.mark.django_db
DIAGNOSIS = {"rootCause": None, "nothingWrong": True, "undetermined": False, "symptoms": []}


def request():
    return APIRequestFactory().get("/api/runs/x", HTTP_HOST="testserver")


def test_a_pending_run_has_nulls_where_nothing_is_stored_yet(alice):
    run = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice, session_id="s-out"))
    body = run_output(request(), run)
    assert set(body) == set(RunOutput().fields)
    assert (body["sessionId"], body["runId"], body["status"]) == ("s-out", run.run_id, "PENDING")
    assert body["answer"] is body["verdict"] is body["errorCode"] is body["errorMessage"] is body["diagnosis"] is None
    assert body["startedAt"] is None and body["createdAt"].endswith("Z")
    assert body["links"] == {
        "run": f"http://testserver/api/runs/{run.run_id}",
        "events": f"http://testserver/api/runs/{run.run_id}/events",
        "trace": f"http://testserver/api/diagnosis/s-out/trace?runId={run.run_id}",
    }


def test_a_finished_run_carries_its_stored_values(alice):
    run = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), status=DiagnosisRun.Status.FAILED,
                              answer="partial", effective_verdict="LOW_CONFID", error_code="worker_lost",
                              error_message="the worker died", duration_ms=1234, diagnosis=DIAGNOSIS,
                              strategy=DiagnosisRun.Strategy.SIMPLE)
    body = run_output(request(), run)
    assert (body["status"], body["answer"], body["verdict"]) == ("FAILED", "partial", "LOW_CONFID")
    assert (body["errorCode"], body["errorMessage"], body["durationMs"]) == ("worker_lost", "the worker died", 1234)
    assert body["diagnosis"] == DIAGNOSIS and body["evidenceChecked"] is False
    assert body["suggestions"] == [] and body["advice"] == []


def test_a_stored_diagnosis_that_is_not_an_object_reads_as_null(alice):
    run = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), diagnosis=["not", "an", "object"])
    assert run_output(request(), run)["diagnosis"] is None
