"""GET /api/diagnosis/{sessionId}/trace?runId=…"""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from diagnosis.ids import new_run_id
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from tests.factories import ChatSessionFactory
from tests.traces.conftest import ORCHESTRATION_TRACE, make_run

pytestmark = pytest.mark.django_db


def trace_url(session_id: str, run_id: str | None = None) -> str:
    url = reverse("diagnosis-trace", kwargs={"session_id": session_id})
    return f"{url}?runId={run_id}" if run_id is not None else url


def get_trace(api, user, run, *, session_id=None):
    api.force_authenticate(user)
    return api.get(trace_url(session_id or run.session.session_id, run.run_id))


def test_it_rejects_a_request_without_run_id(api, alice, alice_run):
    api.force_authenticate(alice)
    response = api.get(trace_url(alice_run.session.session_id))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
    assert response.json()["error"]["field"] == "runId"


@pytest.mark.parametrize("run_id", ["", "abc", "run-XYZ", "run-" + "0" * 31, "RUN-" + "a" * 32, "run-" + "a" * 32 + " "])
def test_it_rejects_a_malformed_run_id(api, alice, alice_run, run_id):
    api.force_authenticate(alice)
    response = api.get(reverse("diagnosis-trace", kwargs={"session_id": alice_run.session.session_id}),
                       {"runId": run_id})
    assert response.status_code == 400
    assert response.json()["error"] == {"code": "invalid_input", "message": response.json()["error"]["message"],
                                        "field": "runId"}


def test_it_rejects_a_malformed_session_id(api, alice, alice_run):
    api.force_authenticate(alice)
    response = api.get(trace_url("-bad!id", alice_run.run_id))
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "sessionId"


def test_it_returns_404_for_a_run_of_another_session_of_the_same_owner(api, alice, alice_run):
    other = ChatSessionFactory(owner=alice)
    response = get_trace(api, alice, alice_run, session_id=other.session_id)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_it_returns_404_for_a_run_id_that_does_not_exist(api, alice, alice_run):
    api.force_authenticate(alice)
    response = api.get(trace_url(alice_run.session.session_id, new_run_id()))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found" and "run" not in response.json()


def test_it_returns_404_for_another_clients_run_exactly_like_a_missing_one(api, alice, bob, alice_run):
    hidden = get_trace(api, bob, alice_run)
    missing = api.get(trace_url(alice_run.session.session_id, new_run_id()))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()


def test_it_returns_the_owners_own_trace(api, alice, alice_run):
    response = get_trace(api, alice, alice_run)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"run", "chatSession", "steps", "toolInvocations"}
    assert body["run"]["runId"] == alice_run.run_id
    assert body["run"]["sessionId"] == alice_run.session.session_id
    assert body["run"]["status"] == "SUCCESS"
    assert body["run"]["orchestrationTrace"] == ORCHESTRATION_TRACE
    assert body["chatSession"]["sessionId"] == alice_run.session.session_id


def assert_is_the_trace_of(response, run) -> None:
    """A 200 holding this run's own trace: its ids, its steps and its tool calls."""
    assert response.status_code == 200
    body = response.json()
    assert (body["run"]["runId"], body["run"]["sessionId"]) == (run.run_id, run.session.session_id)
    assert [s["stepIndex"] for s in body["steps"]] == list(run.steps.order_by("step_index").values_list("step_index", flat=True))
    assert [t["invocationId"] for t in body["toolInvocations"]] == list(
        run.tool_invocations.order_by("id").values_list("invocation_id", flat=True))


def test_it_lets_support_staff_read_anyones_trace(api, support_staff, alice_run):
    assert_is_the_trace_of(get_trace(api, support_staff, alice_run), alice_run)


def test_it_lets_an_auditor_read_anyones_trace(api, auditor, alice_run):
    assert_is_the_trace_of(get_trace(api, auditor, alice_run), alice_run)


def test_it_lets_a_superuser_read_anyones_trace(api, alice_run):
    from tests.factories import UserFactory

    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    assert_is_the_trace_of(get_trace(api, root, alice_run), alice_run)


def test_it_does_not_treat_the_is_staff_flag_alone_as_support_staff(api, support_user, alice_run):
    response = get_trace(api, support_user, alice_run)
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": response.json()["error"]["message"]}}


def test_it_returns_401_without_credentials(api, alice_run):
    response = api.get(trace_url(alice_run.session.session_id, alice_run.run_id))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Token"


def test_it_accepts_token_authentication_with_one_query_for_the_token(api, alice, alice_run, django_assert_num_queries):
    token = Token.objects.create(user=alice)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    with django_assert_num_queries(4):  # token+user, run+session, steps, invocations
        response = api.get(trace_url(alice_run.session.session_id, alice_run.run_id))
    assert_is_the_trace_of(response, alice_run)


def test_it_returns_the_exact_shape_of_every_part(api, alice, alice_run):
    body = get_trace(api, alice, alice_run).json()
    assert set(body["run"]) == {
        "runId", "sessionId", "agentFlow", "strategy", "status", "question", "answer", "degraded",
        "effectiveVerdict", "selfEvaluation", "diagnosis", "orchestrationTrace", "feedback", "feedbackComment", "feedbackAt",
        "errorCode", "errorMessage", "durationMs", "stepCount", "toolCount", "promptTokens", "completionTokens",
        "modelName", "promptVersion", "replayOf", "replayOptions", "createdAt", "startedAt", "finishedAt",
    }
    assert set(body["chatSession"]) == {"sessionId", "title", "createdAt", "lastMessageAt"}
    assert set(body["steps"][0]) == {
        "stepIndex", "node", "agent", "attempt", "status", "modelName", "modelInput", "modelOutput", "hasToolCall",
        "durationMs", "promptTokens", "completionTokens", "error", "startedAt", "finishedAt",
    }
    assert set(body["toolInvocations"][0]) == {
        "invocationId", "stepIndex", "toolName", "arguments", "status", "result", "truncated", "errorMessage",
        "retrievalDetails", "evidenceRefs", "durationMs", "replayMode", "sourceInvocation", "createdAt",
    }
    assert body["run"]["replayOf"] is None and body["toolInvocations"][0]["sourceInvocation"] is None
    assert body["steps"][0]["modelInput"] == [{"role": "user", "content": "step 0"}]
    assert body["toolInvocations"][0]["arguments"] == {"service": "payment-service"}


@pytest.mark.parametrize("steps", [1, 200])
def test_it_costs_three_queries_whatever_the_number_of_steps(api, alice, django_assert_num_queries, steps):
    run = make_run(owner=alice, steps=steps)
    api.force_authenticate(alice)
    with django_assert_num_queries(3):  # run+session (visibility inside), steps, invocations with step index
        response = api.get(trace_url(run.session.session_id, run.run_id))
    assert len(response.json()["steps"]) == len(response.json()["toolInvocations"]) == steps


def test_support_staff_pay_the_same_three_queries(api, support_staff, alice, django_assert_num_queries):
    run = make_run(owner=alice, steps=5)
    api.force_authenticate(support_staff)
    with django_assert_num_queries(3):
        response = api.get(trace_url(run.session.session_id, run.run_id))
    assert_is_the_trace_of(response, run)
    assert len(response.json()["steps"]) == 5


def test_it_orders_steps_by_step_index_and_invocations_by_id_with_their_step(api, alice):
    run = make_run(owner=alice)
    for index in (7, 2, 5):  # inserted out of order
        AgentStep.objects.create(run=run, session_id=run.session.session_id, step_index=index, node="n", agent="a")
    steps = {s.step_index: s for s in AgentStep.objects.filter(run=run)}
    first = ToolInvocation.objects.create(run=run, session_id=run.session.session_id, step=steps[7],
                                          invocation_id="inv-0000000b", tool_name="t", status="SUCCESS")
    second = ToolInvocation.objects.create(run=run, session_id=run.session.session_id, step=None,
                                           invocation_id="inv-0000000a", tool_name="t", status="ERROR")
    third = ToolInvocation.objects.create(run=run, session_id=run.session.session_id, step=steps[2],
                                          invocation_id="inv-0000000c", tool_name="t", status="SUCCESS")
    body = get_trace(api, alice, run).json()
    assert [s["stepIndex"] for s in body["steps"]] == [2, 5, 7]
    assert [(i["invocationId"], i["stepIndex"]) for i in body["toolInvocations"]] == [
        (first.invocation_id, 7), (second.invocation_id, None), (third.invocation_id, 2),
    ]


def test_it_does_not_mix_in_steps_or_invocations_of_another_run_of_the_session(api, alice):
    run = make_run(owner=alice, steps=2)
    make_run(owner=alice, session=run.session, steps=3)
    body = get_trace(api, alice, run).json()
    assert len(body["steps"]) == 2 and len(body["toolInvocations"]) == 2


@pytest.mark.parametrize("stored", [
    None,
    {"version": "stategraph-v0", "transitions": []},
    {"transitions": []},
    ["stategraph-v1"],
    "not json",
    42,
])
def test_it_returns_a_null_orchestration_trace_when_the_stored_one_is_absent_or_invalid(api, alice, stored):
    run = make_run(owner=alice, orchestration_trace=stored)
    assert get_trace(api, alice, run).json()["run"]["orchestrationTrace"] is None


def test_it_parses_an_orchestration_trace_stored_as_a_json_string(api, alice):
    import json

    run = make_run(owner=alice, orchestration_trace=json.dumps(ORCHESTRATION_TRACE))
    assert get_trace(api, alice, run).json()["run"]["orchestrationTrace"] == ORCHESTRATION_TRACE


def test_it_returns_the_self_evaluation_and_feedback_as_stored(api, alice):
    evaluation = {"rule_evaluation": {"claims_verified": 2}, "verifier_evaluation": {"score": 0.9}}
    run = make_run(owner=alice, self_evaluation=evaluation, feedback="useful", feedback_comment="spot on")
    body = get_trace(api, alice, run).json()["run"]
    assert body["selfEvaluation"] == evaluation
    assert (body["feedback"], body["feedbackComment"]) == ("useful", "spot on")


def test_it_returns_the_trace_of_a_failed_run_with_its_error(api, alice):
    run = make_run(owner=alice, status=DiagnosisRun.Status.FAILED, answer="", error_code="worker_lost",
                   error_message="heartbeat stale", orchestration_trace=None, steps=1)
    body = get_trace(api, alice, run).json()
    assert (body["run"]["status"], body["run"]["errorCode"]) == ("FAILED", "worker_lost")
    assert len(body["steps"]) == 1
