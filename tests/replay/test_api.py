"""POST /api/runs/{runId}/replay and GET /api/runs/{a}/diff/{b}: access, bad input, the schema."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from diagnosis.models import ChatSession, DiagnosisRun
from diagnosis.selectors import run_events_after

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_owner_replays_a_run_and_reads_the_diff(alice_api, recorded, eager_tasks):
    original = recorded("payment-db-pool-exhaustion")
    response = alice_api.post(f"/api/runs/{original.run_id}/replay", {"model": "offline", "wait": True}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["replayOf"] == original.run_id and body["run"]["status"] == "SUCCESS"
    replay = DiagnosisRun.objects.get(run_id=body["run"]["runId"])
    assert replay.replay_of_id == original.pk and replay.replay_options["model"] == "offline"

    trace = alice_api.get(f"/api/diagnosis/{replay.session.session_id}/trace?runId={replay.run_id}").json()
    assert trace["run"]["replayOf"] == original.run_id and trace["run"]["replayOptions"]["model"] == "offline"
    invocations = trace["toolInvocations"]
    assert invocations and all(i["replayMode"] == "recorded" for i in invocations)
    assert [i["sourceInvocation"] for i in invocations] == [
        {"runId": original.run_id, "invocationId": i} for i in original.tool_invocations.order_by("id").values_list(
            "invocation_id", flat=True)]
    # The progress log tells how each call was served; a live run's tool events have no such key.
    tools = [e.data for e in run_events_after(run_pk=replay.pk, after=0) if e.kind == "tool"]
    assert [(t["invocationId"], t["replayMode"]) for t in tools] == [(i["invocationId"], "recorded") for i in invocations]
    assert all("replayMode" not in e.data for e in run_events_after(run_pk=original.pk, after=0) if e.kind == "tool")

    diff = alice_api.get(f"/api/runs/{original.run_id}/diff/{replay.run_id}")
    assert diff.status_code == 200, diff.content
    data = diff.json()
    assert data["claims"]["lost"] == [] and data["claims"]["added"] == []
    assert data["claims"]["verified"] == len(data["left"]["claimsVerified"]) > 0
    assert data["rootCause"]["agree"] is True and data["rootCause"]["left"].startswith("Root cause")
    assert data["verdict"] == {"left": original.effective_verdict, "right": original.effective_verdict,
                               "changed": False, "dropped": False}
    assert data["right"]["replayOf"] == original.run_id and data["right"]["unsupportedClaims"] == 0
    assert data["answerChanged"] is False and data["tools"] == {"added": [], "removed": []}


def test_another_user_can_neither_replay_nor_diff_a_run(alice_api, bob_api, recorded, bob, eager_tasks):
    original = recorded("inventory-disk-full")
    sessions = ChatSession.objects.count()
    response = bob_api.post(f"/api/runs/{original.run_id}/replay", {}, format="json")
    missing = bob_api.post(f"/api/runs/run-{'0' * 32}/replay", {}, format="json")
    assert response.status_code == missing.status_code == 404
    assert response.json() == missing.json() and response.json()["error"]["field"] == "runId"
    assert ChatSession.objects.count() == sessions and not DiagnosisRun.objects.filter(replay_of=original).exists()
    from tests.replay.conftest import record_scenario

    own = record_scenario(bob, "inventory-disk-full")
    assert bob_api.get(f"/api/runs/{own.run_id}/diff/{original.run_id}").status_code == 404
    assert bob_api.get(f"/api/runs/{original.run_id}/diff/{own.run_id}").status_code == 404
    assert bob_api.get(f"/api/runs/{own.run_id}/diff/{own.run_id}").status_code == 200


def test_support_staff_replay_any_run_into_their_own_session(support_api, support_user, recorded, eager_tasks):
    original = recorded("order-memory-leak-oom")
    response = support_api.post(f"/api/runs/{original.run_id}/replay", {"model": "offline", "wait": True}, format="json")
    assert response.status_code == 200, response.content
    replay = DiagnosisRun.objects.select_related("session").get(run_id=response.json()["run"]["runId"])
    assert replay.session.owner_id == support_user.pk and replay.status == "SUCCESS"


@pytest.mark.parametrize(("body", "field"), [
    ({"promptVersion": "no-such-catalog"}, "promptVersion"),
    ({"models": {"janitor": "gpt"}}, "models"),
    ({"liveFallback": "maybe"}, "liveFallback"),
    ({"model": ""}, "model"),
])
def test_bad_replay_input_is_a_400_naming_the_field(alice_api, recorded, body, field):
    original = recorded("inventory-disk-full")
    response = alice_api.post(f"/api/runs/{original.run_id}/replay", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == field
    assert not DiagnosisRun.objects.filter(replay_of=original).exists()


def test_a_run_in_progress_cannot_be_replayed_yet(alice_api, alice):
    session = ChatSession.objects.create(session_id="s-busy", owner=alice)
    run = DiagnosisRun.objects.create(session=session, question="why?", status="RUNNING")
    response = alice_api.post(f"/api/runs/{run.run_id}/replay", {}, format="json")
    assert response.status_code == 409 and response.json()["error"]["code"] == "run_not_finished"


def test_the_openapi_schema_has_both_endpoints():
    paths = APIClient().get("/api/schema", HTTP_ACCEPT="application/json").json()["paths"]
    replay = paths["/api/runs/{run_id}/replay"]["post"]
    assert {"200", "202"} <= set(replay["responses"]) and "requestBody" in replay
    assert "200" in paths["/api/runs/{run_a}/diff/{run_b}"]["get"]["responses"]
