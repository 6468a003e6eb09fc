"""POST /api/chat, GET /api/runs/{runId} and its event stream, on the embedded default."""

from __future__ import annotations

import pytest

from diagnosis.models import ChatSession, DiagnosisRun, RunEvent
from tests.api.conftest import sse_events
from tests.support.fake_openai import Reply

# Transactional: the run is enqueued on commit, as it is outside a test transaction.
pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Why is payment-service failing?"


@pytest.mark.production_server
def test_it_runs_a_diagnosis_and_returns_the_finished_run(alice_api, demo_knowledge):
    response = alice_api.post("/api/chat", {"question": QUESTION, "sessionId": "s-1"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "SUCCESS" and body["sessionId"] == "s-1" and body["runId"].startswith("run-")
    assert body["strategy"] == "DIAGNOSIS" and body["answer"]
    assert body["links"]["trace"].endswith(f"/api/diagnosis/s-1/trace?runId={body['runId']}")
    assert ChatSession.objects.get(session_id="s-1").owner.username == "alice"


def test_wait_false_answers_202_with_links(alice_api, demo_knowledge, settings):
    from unittest import mock

    from tests.support.celery_conf import celery_conf

    settings.CELERY_TASK_ALWAYS_EAGER = False  # nothing consumes the queue here: the run stays PENDING
    with celery_conf(task_always_eager=False), mock.patch("diagnosis.tasks.execute_run.delay"):
        response = alice_api.post("/api/chat", {"question": QUESTION, "wait": False}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "PENDING"
    assert set(body["links"]) == {"run", "events", "trace"}


@pytest.mark.production_server
def test_the_legacy_field_names_are_accepted(alice_api, demo_knowledge):
    response = alice_api.post("/api/chat", {"Question": "hello there", "Id": "legacy-1"}, format="json")
    assert response.status_code == 200
    assert response.json()["sessionId"] == "legacy-1"
    assert response.json()["strategy"] == "SIMPLE"


@pytest.mark.parametrize("payload, field", [
    ({"question": ""}, "question"),
    ({"question": "   "}, "question"),
    ({}, "question"),
    ({"question": "x" * 4001}, "question"),
    ({"question": "hi", "sessionId": "bad id!"}, "sessionId"),
    ({"question": "hi", "sessionId": "-starts-with-dash"}, "sessionId"),
    ({"question": "hi", "mode": "turbo"}, "mode"),
    ({"question": "hi", "requestId": "a b"}, "requestId"),
    ({"question": ["not", "a", "string"]}, "question"),
])
def test_bad_input_gets_400_naming_the_field_and_creates_nothing(alice_api, payload, field):
    response = alice_api.post("/api/chat", payload, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == field
    assert DiagnosisRun.objects.count() == 0


@pytest.mark.production_server
def test_a_session_of_someone_else_is_404_and_nothing_is_created(alice_api, bob_api, demo_knowledge):
    assert alice_api.post("/api/chat", {"question": "hi", "sessionId": "alice-s"}, format="json").status_code == 200
    before = DiagnosisRun.objects.count()
    response = bob_api.post("/api/chat", {"question": QUESTION, "sessionId": "alice-s"}, format="json")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert DiagnosisRun.objects.count() == before


@pytest.mark.production_server
def test_the_same_request_id_twice_returns_the_same_run(alice_api, demo_knowledge):
    first = alice_api.post("/api/chat", {"question": "hello", "sessionId": "s-2", "requestId": "req-1"}, format="json").json()
    second = alice_api.post("/api/chat", {"question": "hello", "sessionId": "s-2", "requestId": "req-1"}, format="json").json()
    assert first["runId"] == second["runId"]
    assert DiagnosisRun.objects.filter(session__session_id="s-2").count() == 1


def test_unauthenticated_requests_get_401(client):
    from rest_framework.test import APIClient

    api = APIClient()
    for response in (api.post("/api/chat", {"question": "hi"}, format="json"), api.get(f"/api/runs/run-{'0' * 32}")):
        assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    assert not DiagnosisRun.objects.exists() and not ChatSession.objects.exists()


@pytest.mark.production_server
def test_the_run_endpoint_is_visible_only_to_its_owner_and_support(alice_api, bob_api, support_api, demo_knowledge):
    run_id = alice_api.post("/api/chat", {"question": "hello"}, format="json").json()["runId"]
    assert alice_api.get(f"/api/runs/{run_id}").json()["status"] == "SUCCESS"
    assert bob_api.get(f"/api/runs/{run_id}").status_code == 404
    assert support_api.get(f"/api/runs/{run_id}").status_code == 200
    assert alice_api.get("/api/runs/not-a-run").json()["error"]["field"] == "runId"


@pytest.mark.production_server
def test_the_event_stream_replays_the_run_in_order_and_closes(alice_api, demo_knowledge):
    run_id = alice_api.post("/api/chat", {"question": QUESTION}, format="json").json()["runId"]
    response = alice_api.get(f"/api/runs/{run_id}/events", HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/event-stream")
    events = sse_events(response)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "status" and events[0]["data"]["status"] == "RUNNING"
    assert kinds[-1] == "status" and events[-1]["data"]["status"] == "SUCCESS"
    assert {"node", "step", "tool"} <= set(kinds)
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    nodes = [e["data"]["node"] for e in events if e["event"] == "node"]
    assert nodes[0] == "planner" and nodes[-1] in ("composer", "fallback")


@pytest.mark.production_server
def test_the_event_stream_resumes_after_last_event_id(alice_api, demo_knowledge):
    run_id = alice_api.post("/api/chat", {"question": QUESTION}, format="json").json()["runId"]
    everything = sse_events(alice_api.get(f"/api/runs/{run_id}/events"))
    resumed = sse_events(alice_api.get(f"/api/runs/{run_id}/events", HTTP_LAST_EVENT_ID=everything[2]["id"]))
    assert [e["id"] for e in resumed] == [e["id"] for e in everything[3:]]


@pytest.mark.production_server
def test_step_and_tool_events_are_told_by_their_rows_and_each_sse_id_is_a_place_in_the_run(alice_api, demo_knowledge):
    """A step's start and end and a tool call are stored once (their rows); their events are derived
    from them, and every SSE id is the event's place: 1, 2, 3… across the run's three tables."""
    run_id = alice_api.post("/api/chat", {"question": QUESTION}, format="json").json()["runId"]
    streamed = [e for e in sse_events(alice_api.get(f"/api/runs/{run_id}/events")) if e.get("id")]
    run = DiagnosisRun.objects.get(run_id=run_id)
    assert not RunEvent.objects.filter(run=run, kind__in=["step", "tool"]).exists()  # not stored twice
    rows = [(seq, kind) for seq, kind in RunEvent.objects.filter(run=run).values_list("seq", "kind")]
    steps = list(run.steps.order_by("step_index"))
    rows += [(step.seq, "step") for step in steps] + [(step.end_seq, "step") for step in steps]
    calls = list(run.tool_invocations.order_by("seq"))
    rows += [(call.seq, "tool") for call in calls]
    assert [(int(e["id"]), e["event"]) for e in streamed] == sorted(rows)
    assert [int(e["id"]) for e in streamed] == list(range(1, len(rows) + 1)) and len(steps) > 3 and calls
    by_id = {int(e["id"]): e["data"] for e in streamed}
    for step in steps:
        assert by_id[step.seq] == {"stepIndex": step.step_index, "node": step.node, "attempt": step.attempt,
                                   "status": "RUNNING", "runId": run_id}
        assert by_id[step.end_seq] == {"stepId": step.pk, "status": step.status, "durationMs": step.duration_ms,
                                       "hasToolCall": step.has_tool_call, "runId": run_id}
    for call in calls:
        assert by_id[call.seq] == {"invocationId": call.invocation_id, "toolName": call.tool_name,
                                   "status": call.status, "durationMs": call.duration_ms, "runId": run_id}


@pytest.mark.production_server
def test_another_client_cannot_stream_a_run(alice_api, bob_api, demo_knowledge):
    run_id = alice_api.post("/api/chat", {"question": "hello"}, format="json").json()["runId"]
    response = bob_api.get(f"/api/runs/{run_id}/events")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "not_found" and run_id not in response.content.decode()


@pytest.mark.production_server
def test_greetings_take_the_simple_path_with_one_step_and_no_trace(alice_api, demo_knowledge):
    body = alice_api.post("/api/chat", {"question": "Hello, who are you?"}, format="json").json()
    run = DiagnosisRun.objects.get(run_id=body["runId"])
    assert run.strategy == "SIMPLE" and run.orchestration_trace is None and run.steps.count() == 1


def test_mode_forces_the_strategy(alice_api, demo_knowledge):
    body = alice_api.post("/api/chat", {"question": "Hello", "mode": "diagnosis"}, format="json").json()
    assert body["strategy"] == "DIAGNOSIS"
    body = alice_api.post("/api/chat", {"question": QUESTION, "mode": "simple"}, format="json").json()
    assert body["strategy"] == "SIMPLE"


def test_history_reaches_the_planner_and_executor_prompts_only(alice_api, demo_knowledge, eager_tasks, openai_llm):
    openai_llm.always(Reply.text("Hi! Ask me about an incident."), role="simple")
    alice_api.post("/api/chat", {"question": "Remember the canary word marmalade", "sessionId": "mem-1"}, format="json")
    openai_llm.always(Reply.error(400, "stop here"), role="planner")
    alice_api.post("/api/chat", {"question": QUESTION, "sessionId": "mem-1"}, format="json")
    planner = openai_llm.requests_for("planner")[0]
    assert "marmalade" in planner.raw_text
    assert not any("marmalade" in r.raw_text for r in openai_llm.requests_for("verifier") + openai_llm.requests_for("composer"))
