"""Who may do what (SPEC §9): four roles against every API endpoint and every audit-console page.

Client A (alice) and client B (bob) own one finished run each; support staff (charlie) and the
auditor (dana) read everything. B never reads, lists, streams or rates A's sessions and runs: 404,
exactly like a missing one. Anonymous callers get 401 from every non-public API endpoint; writes
with a session cookie need a CSRF token; only staff with a role enter the console.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib import admin
from django.middleware.csrf import _get_new_csrf_string
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from diagnosis.models import AgentStep, CaseLibraryEntry, ChatSession, DiagnosisRun, RunReview, ToolInvocation
from tests.api.conftest import sse_events, token_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("api_executor")]

ROLES = ("alice", "bob", "support", "auditor")
PUBLIC_API = {"/api/health", "/api/schema", "/api/docs"}
MISSING_RUN = "run-" + "0" * 32


def run_url(run) -> str:
    return f"/api/runs/{run.run_id}"


def events_url(run) -> str:
    return f"/api/runs/{run.run_id}/events"


def trace_url(run, session_id=None) -> str:
    return f"/api/diagnosis/{session_id or run.session.session_id}/trace?runId={run.run_id}"


def list_url(run) -> str:
    return f"/api/diagnosis/{run.session.session_id}/runs"


def feedback_body(run, session_id=None) -> dict:
    return {"sessionId": session_id or run.session.session_id, "runId": run.run_id, "feedback": "useful",
            "comment": "checked"}


# What each role gets on each endpoint, for Alice's run (the row owner is "alice").
API_MATRIX = {
    "GET /api/runs/{A}": {"alice": 200, "bob": 404, "support": 200, "auditor": 200},
    "GET /api/runs/{A}/events": {"alice": 200, "bob": 404, "support": 200, "auditor": 200},
    "GET /api/diagnosis/{A.session}/trace": {"alice": 200, "bob": 404, "support": 200, "auditor": 200},
    "GET /api/diagnosis/{A.session}/runs": {"alice": 200, "bob": 404, "support": 200, "auditor": 200},
    "POST /api/feedback {A}": {"alice": 200, "bob": 404, "support": 200, "auditor": 403},
    # Only support staff publish a case (the feedback row above made Alice's run a candidate).
    "POST /api/cases/{A}/publish": {"alice": 403, "bob": 403, "support": 200, "auditor": 403},
    # A session is written only by its owner: even staff cannot post into someone else's.
    "POST /api/chat {A.session}": {"alice": 200, "bob": 404, "support": 404, "auditor": 404},
    "POST /api/ai_ops {A.session}": {"alice": 202, "bob": 404, "support": 404, "auditor": 404},
    # A replay is a new run of the caller's; auditors read a run but do not replay it.
    "POST /api/runs/{A}/replay": {"alice": 202, "bob": 404, "support": 202, "auditor": 403},
    "GET /api/runs/{A}/diff/{A}": {"alice": 200, "bob": 404, "support": 200, "auditor": 200},
}


def call(client: APIClient, endpoint: str, run):
    if endpoint == "GET /api/runs/{A}":
        return client.get(run_url(run))
    if endpoint == "GET /api/runs/{A}/events":
        return client.get(events_url(run))
    if endpoint == "GET /api/diagnosis/{A.session}/trace":
        return client.get(trace_url(run))
    if endpoint == "GET /api/diagnosis/{A.session}/runs":
        return client.get(list_url(run))
    if endpoint == "POST /api/feedback {A}":
        return client.post("/api/feedback", feedback_body(run), format="json")
    if endpoint == "POST /api/cases/{A}/publish":
        return client.post(f"/api/cases/{run.run_id}/publish", {}, format="json")
    if endpoint == "POST /api/chat {A.session}":
        return client.post("/api/chat", {"question": "hello there", "sessionId": run.session.session_id}, format="json")
    if endpoint == "POST /api/ai_ops {A.session}":
        return client.post("/api/ai_ops", {"sessionId": run.session.session_id, "stream": False}, format="json")
    if endpoint == "POST /api/runs/{A}/replay":
        return client.post(f"/api/runs/{run.run_id}/replay", {}, format="json")
    if endpoint == "GET /api/runs/{A}/diff/{A}":
        return client.get(f"/api/runs/{run.run_id}/diff/{run.run_id}")
    raise AssertionError(endpoint)


def body_of(response) -> bytes:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content)
    return response.content


def test_every_role_gets_exactly_its_status_on_every_endpoint(clients, world):
    alice_run = world["alice"]
    rows, wrong = [], []
    for endpoint, expected in API_MATRIX.items():
        for role in ROLES:
            response = call(clients[role], endpoint, alice_run)
            body = body_of(response).decode()
            rows.append(f"{endpoint:40} {role:8} {response.status_code}")
            if response.status_code != expected[role]:
                wrong.append(f"{endpoint} as {role}: expected {expected[role]}, got {response.status_code} {body[:200]}")
            if response.status_code == 404:
                # Nothing of A's run leaks into the refusal.
                assert alice_run.question not in body and alice_run.answer not in body
    print(f"\naccess matrix: {len(rows)} requests, {len(wrong)} mismatches\n" + "\n".join(rows))
    assert not wrong, "\n".join(wrong)


def test_a_hidden_run_is_indistinguishable_from_a_missing_one(clients, world):
    bob, alice_run = clients["bob"], world["alice"]
    hidden = bob.get(run_url(alice_run))
    missing = bob.get(f"/api/runs/{MISSING_RUN}")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()
    hidden_events = bob.get(events_url(alice_run))
    missing_events = bob.get(f"/api/runs/{MISSING_RUN}/events")
    assert hidden_events.status_code == missing_events.status_code == 404
    hidden_list = bob.get(list_url(alice_run))
    missing_list = bob.get("/api/diagnosis/no-such-session/runs")
    assert hidden_list.json() == missing_list.json()
    assert json.loads(hidden_events.content) == json.loads(missing_events.content)


def test_bob_cannot_reach_alices_run_through_his_own_session(clients, world):
    bob, alice_run, bob_run = clients["bob"], world["alice"], world["bob"]
    own_session = bob_run.session.session_id
    assert bob.get(trace_url(alice_run, session_id=own_session)).status_code == 404
    response = bob.post("/api/feedback", feedback_body(alice_run, session_id=own_session), format="json")
    assert response.status_code == 404
    # and the owner cannot mix ids either: a run is found only in its own session
    assert clients["alice"].get(trace_url(alice_run, session_id=own_session)).status_code == 404


def test_bobs_refused_feedback_changes_nothing_and_creates_no_case(clients, world):
    alice_run = world["alice"]
    CaseLibraryEntry.objects.filter(run=alice_run).delete()
    before = DiagnosisRun.objects.values().get(pk=alice_run.pk)
    assert clients["bob"].post("/api/feedback", feedback_body(alice_run), format="json").status_code == 404
    assert clients["auditor"].post("/api/feedback", feedback_body(alice_run), format="json").status_code == 403
    assert DiagnosisRun.objects.values().get(pk=alice_run.pk) == before
    assert not CaseLibraryEntry.objects.filter(run=alice_run).exists()


def test_alices_runs_are_absent_from_everything_bob_can_list(clients, world, bob):
    alice_run, bob_run = world["alice"], world["bob"]
    # Bob posts into his own session: its list and the run he gets back hold only his rows.
    chat = clients["bob"].post("/api/chat", {"question": "hello there", "sessionId": bob_run.session.session_id},
                               format="json")
    assert chat.status_code == 200, chat.content
    page = clients["bob"].get(list_url(bob_run)).json()
    listed = {item["runId"] for item in page["results"]}
    assert bob_run.run_id in listed and chat.json()["runId"] in listed
    assert alice_run.run_id not in listed
    text = clients["bob"].get(list_url(bob_run)).content.decode()
    assert alice_run.session.session_id not in text and alice_run.question not in text
    trace = clients["bob"].get(trace_url(bob_run)).content.decode()
    assert alice_run.run_id not in trace and alice_run.question not in trace
    # Bob's new run was recorded in Bob's session, not in Alice's.
    assert ChatSession.objects.get(session_id=bob_run.session.session_id).owner == bob
    assert not DiagnosisRun.objects.filter(session=alice_run.session).exclude(pk=alice_run.pk).exists()


def test_support_staff_and_auditors_list_and_stream_alices_run(clients, world):
    alice_run = world["alice"]
    for role in ("support", "auditor"):
        listed = {item["runId"] for item in clients[role].get(list_url(alice_run)).json()["results"]}
        assert listed == {alice_run.run_id}
        events = sse_events(clients[role].get(events_url(alice_run)))
        assert events[-1]["event"] == "status" and events[-1]["data"]["runId"] == alice_run.run_id


# --------------------------------------------------------------------------- unauthenticated callers


def _api_routes() -> list[str]:
    """Every URL pattern under /api/, as a path with dummy but well-formed parameters."""
    found = []

    def walk(patterns, prefix):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                found.append(prefix + str(p.pattern))

    walk(get_resolver().url_patterns, "/")
    values = {"run_id": MISSING_RUN, "run_a": MISSING_RUN, "run_b": MISSING_RUN, "session_id": "s-unknown"}
    paths = []
    for route in found:
        if not route.startswith("/api/"):
            continue
        paths.append(re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values.get(m[1], "x"), route))
    return sorted(set(paths))


def test_the_route_table_has_no_api_endpoint_this_matrix_does_not_know():
    known = PUBLIC_API | {"/api/chat", "/api/feedback", "/api/ai_ops", f"/api/runs/{MISSING_RUN}",
                          f"/api/cases/{MISSING_RUN}/publish",
                          f"/api/runs/{MISSING_RUN}/events", "/api/diagnosis/s-unknown/trace",
                          "/api/diagnosis/s-unknown/runs", f"/api/runs/{MISSING_RUN}/replay",
                          f"/api/runs/{MISSING_RUN}/diff/{MISSING_RUN}"}
    assert set(_api_routes()) <= known, f"new API endpoints need rows in the access matrix: {set(_api_routes()) - known}"


@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete"])
def test_every_non_public_api_endpoint_answers_401_to_anonymous_callers(method, world):
    checked = 0
    for path in _api_routes():
        if path in PUBLIC_API:
            continue
        response = getattr(APIClient(), method)(path, {}, format="json")
        assert response.status_code == 401, (method, path, response.status_code)
        assert json.loads(response.content)["error"]["code"] == "not_authenticated"
        assert response["WWW-Authenticate"].startswith("Token")
        checked += 1
    assert checked >= 6
    print(f"\n{method.upper()}: {checked} endpoints answered 401")


@pytest.mark.parametrize("header", ["Token 0123456789abcdef0123456789abcdef01234567", "Token ", "Bearer x", "Token a b"])
def test_an_invalid_token_is_401_on_every_endpoint(header, world):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    alice_run = world["alice"]
    for method, path, body in (
        ("get", run_url(alice_run), None), ("get", events_url(alice_run), None), ("get", trace_url(alice_run), None),
        ("get", list_url(alice_run), None), ("post", "/api/feedback", feedback_body(alice_run)),
        ("post", "/api/chat", {"question": "hello"}), ("post", "/api/ai_ops", {}),
    ):
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code == 401, (header, path, response.status_code)
    assert not DiagnosisRun.objects.exclude(pk__in=[r.pk for r in world.values()]).exists()


def test_a_deactivated_users_token_stops_working(alice, world):
    client = token_client(alice)
    assert client.get(run_url(world["alice"])).status_code == 200
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert client.get(run_url(world["alice"])).status_code == 401


def test_the_public_endpoints_reveal_no_user_data(alice, world):
    Token.objects.get_or_create(user=alice)
    secrets = {alice.username, alice.email, Token.objects.get(user=alice).key}
    for run in world.values():
        secrets |= {run.run_id, run.session.session_id, run.question, run.answer}
    anonymous = APIClient()
    pages = {
        "/api/health": anonymous.get("/api/health"),
        "/api/schema": anonymous.get("/api/schema", HTTP_ACCEPT="application/json"),
        "/api/schema?format=yaml": anonymous.get("/api/schema"),
        "/api/docs": anonymous.get("/api/docs"),
    }
    for path, response in pages.items():
        assert response.status_code == 200, path
        text = response.content.decode()
        leaked = sorted(s for s in secrets if s in text)
        assert not leaked, f"{path} reveals {leaked}"
    assert set(pages["/api/health"].json()) == {"status", "checks", "lastReapAt"}


# --------------------------------------------------------------------------- CSRF on session-authenticated writes


def session_client(user, *, csrf: bool) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    if csrf:
        token = _get_new_csrf_string()
        client.cookies["csrftoken"] = token
        client.credentials(HTTP_X_CSRFTOKEN=token)
    return client


def test_session_authenticated_writes_without_a_csrf_token_are_403_and_write_nothing(alice, world):
    client = session_client(alice, csrf=False)
    alice_run = world["alice"]
    before = DiagnosisRun.objects.count()
    chat = client.post("/api/chat", {"question": "hello there"}, format="json")
    feedback = client.post("/api/feedback", feedback_body(alice_run), format="json")
    aiops = client.post("/api/ai_ops", {"stream": False}, format="json")
    for response in (chat, feedback, aiops):
        assert response.status_code == 403, response.content
        assert "CSRF" in response.json()["error"]["message"]
    assert DiagnosisRun.objects.count() == before
    assert DiagnosisRun.objects.get(pk=alice_run.pk).feedback is None
    # Reads need no token, so the session itself is good.
    assert client.get(run_url(alice_run)).status_code == 200


def test_the_same_writes_with_a_csrf_token_succeed(alice, world):
    client = session_client(alice, csrf=True)
    assert client.post("/api/feedback", feedback_body(world["alice"]), format="json").status_code == 200
    assert client.post("/api/chat", {"question": "hello there"}, format="json").status_code == 200


def test_console_feedback_without_a_csrf_token_is_403(support_staff, world):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(support_staff)
    run = world["alice"]
    response = client.post(reverse("admin:diagnosis_diagnosisrun_feedback", args=[run.pk]), {"feedback": "useful"})
    assert response.status_code == 403
    assert DiagnosisRun.objects.get(pk=run.pk).feedback is None


# --------------------------------------------------------------------------- the audit console


AUDIT_MODELS = (ChatSession, DiagnosisRun, AgentStep, ToolInvocation, CaseLibraryEntry, RunReview)


def console_pages(world) -> dict[str, str]:
    """Every console page: index, each audit changelist and change/detail page, and the non-audit
    admin pages (users, groups, tokens) a role must not reach."""
    run = world["alice"]
    objects = {
        ChatSession: run.session, DiagnosisRun: run, AgentStep: AgentStep.objects.filter(run=run).first(),
        ToolInvocation: ToolInvocation.objects.filter(run=run).first(), CaseLibraryEntry: CaseLibraryEntry.objects.get(run=run),
        RunReview: RunReview.objects.get_or_create(run=run, defaults={"trigger": "manual"})[0],
    }
    pages = {"index": reverse("admin:index"), "app diagnosis": reverse("admin:app_list", args=["diagnosis"])}
    registered = [m for m in admin.site._registry if m._meta.app_label == "diagnosis"]
    assert set(registered) == set(AUDIT_MODELS), "a new console model needs rows in the access matrix"
    for model in AUDIT_MODELS:
        name = model._meta.model_name
        pages[f"{name} list"] = reverse(f"admin:diagnosis_{name}_changelist")
        pages[f"{name} detail"] = reverse(f"admin:diagnosis_{name}_change", args=[objects[model].pk])
        pages[f"{name} history"] = reverse(f"admin:diagnosis_{name}_history", args=[objects[model].pk])
    pages["run list filtered by session"] = (reverse("admin:diagnosis_diagnosisrun_changelist")
                                             + f"?session__id__exact={run.session_id}")
    pages["review queue"] = reverse("admin:diagnosis_diagnosisrun_review_queue")
    pages["run diff"] = reverse("admin:diagnosis_diagnosisrun_diff") + f"?a={run.run_id}&b={run.run_id}"
    invocation = objects[ToolInvocation]
    pages["run page part: tool call"] = reverse("admin:diagnosis_diagnosisrun_part",
                                                args=[run.pk, "tool", invocation.invocation_id])
    pages["run page part: whole result"] = reverse("admin:diagnosis_diagnosisrun_part",
                                                   args=[run.pk, "result", invocation.invocation_id])
    return pages


FORBIDDEN_FOR_ROLES = ("user list", "group list", "token list")


def other_admin_pages() -> dict[str, str]:
    return {"user list": reverse("admin:auth_user_changelist"), "group list": reverse("admin:auth_group_changelist"),
            "token list": reverse("admin:authtoken_tokenproxy_changelist")}


def _login_redirect(response) -> bool:
    return response.status_code == 302 and response["Location"].startswith(reverse("admin:login"))


def test_nobody_without_the_staff_flag_enters_any_console_page(alice, bob, world):
    from django.test import Client

    pages = {**console_pages(world), **other_admin_pages()}
    feedback = reverse("admin:diagnosis_diagnosisrun_feedback", args=[world["alice"].pk])
    visitors = {"anonymous": Client()}
    for user in (alice, bob):
        logged_in = Client()
        logged_in.force_login(user)
        visitors[f"{user.username} (session)"] = logged_in
        visitors[f"{user.username} (API token)"] = Client(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    count = 0
    for who, client in visitors.items():
        for name, url in pages.items():
            response = client.get(url)
            assert _login_redirect(response), (who, name, response.status_code)
            count += 1
        response = client.post(feedback, {"feedback": "useful"})
        assert _login_redirect(response), (who, "feedback", response.status_code)
        count += 1
    assert DiagnosisRun.objects.get(pk=world["alice"].pk).feedback is None
    print(f"\nconsole: {count} requests by {len(visitors)} non-staff visitors, all sent to the login page")


@pytest.mark.parametrize("role", ["support_staff", "auditor"])
def test_both_roles_read_every_audit_page_and_no_account_page(request, role, world):
    from django.test import Client

    client = Client()
    client.force_login(request.getfixturevalue(role))
    run = world["alice"]
    for name, url in console_pages(world).items():
        response = client.get(url)
        assert response.status_code == 200, (role, name, response.status_code)
    detail = client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk])).content.decode()
    assert run.run_id in detail
    for name, url in other_admin_pages().items():
        assert client.get(url).status_code == 403, (role, name)


def test_support_staff_rate_from_the_console_and_the_auditor_cannot(support_staff, auditor, world):
    from django.test import Client

    run = world["alice"]
    url = reverse("admin:diagnosis_diagnosisrun_feedback", args=[run.pk])
    auditor_client = Client()
    auditor_client.force_login(auditor)
    assert auditor_client.post(url, {"feedback": "not_useful"}).status_code == 403
    assert DiagnosisRun.objects.get(pk=run.pk).feedback is None
    staff_client = Client()
    staff_client.force_login(support_staff)
    DiagnosisRun.objects.filter(pk=run.pk).update(status="SUCCESS", effective_verdict="PASS", degraded=False)
    response = staff_client.post(url, {"feedback": "useful"})  # a verified answer: "useful" is allowed
    assert response.status_code == 302 and not _login_redirect(response)
    assert DiagnosisRun.objects.get(pk=run.pk).feedback == "useful"


def test_a_staff_flag_without_a_role_reads_no_audit_page(world):
    from django.test import Client

    from tests.factories import UserFactory

    client = Client()
    client.force_login(UserFactory(username="erin", is_staff=True))
    pages = console_pages(world)
    index = client.get(pages.pop("index")).content.decode()
    assert "/admin/diagnosis/" not in index  # no link to any audit table
    assert client.get(pages.pop("app diagnosis")).status_code == 404  # an app with no visible model
    for name, url in pages.items():
        assert client.get(url).status_code == 403, name
