"""Schemathesis against the project's own OpenAPI schema (/api/schema), in-process over WSGI.

Every operation gets generated valid and invalid requests, authenticated with a client's token:
no response is a server error, every documented response matches its schema, and credentials are
not ignored (Schemathesis' `ignored_auth` re-sends accepted requests without and with bad
credentials and expects a refusal). Operations on ids are also fuzzed with a real run's ids, so
their 200 bodies are validated, not only their 404s. Bounded: MAX_EXAMPLES per mode, no shrinking.
"""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import ignored_auth, not_a_server_error
from schemathesis.openapi.checks import IgnoredAuth
from schemathesis.specs.openapi.checks import negative_data_rejection, response_schema_conformance

from diagnosis.api.throttling import ChatThrottle

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks"), pytest.mark.timeout(240)]

MAX_EXAMPLES = 25
OPERATIONS = (
    "POST /api/chat", "POST /api/ai_ops", "GET /api/runs/{run_id}", "GET /api/runs/{run_id}/events",
    "GET /api/diagnosis/{session_id}/trace", "GET /api/diagnosis/{session_id}/runs", "POST /api/feedback",
    "GET /api/health", "POST /api/cases/{run_id}/publish", "POST /api/runs/{run_id}/replay",
    "GET /api/runs/{run_a}/diff/{run_b}",
)
STATS: Counter = Counter()


def json_response_schema_conformance(ctx, response, case):
    """Schemathesis' body check on JSON responses only. The two event streams (run events, alert
    analysis) are documented as a plain string, which no event object matches; their server errors,
    authentication and JSON error bodies are still checked."""
    if response.headers.get("content-type", [""])[0].startswith("text/event-stream") and response.status_code == 200:
        return None
    return response_schema_conformance(ctx, response, case)


class RecordingApp:
    """The Django WSGI app, counting what it answered: anonymous probes, statuses, server errors."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        authenticated = "HTTP_AUTHORIZATION" in environ or "sessionid" in environ.get("HTTP_COOKIE", "")

        def recording_start_response(status, headers, exc_info=None):
            code = int(status[:3])
            STATS["requests"] += 1
            STATS[f"status {code // 100}xx"] += 1
            if not authenticated and environ["PATH_INFO"] not in ("/api/health", "/api/schema"):
                STATS["anonymous requests"] += 1
                STATS[f"anonymous {code}"] += 1
            return start_response(status, headers, exc_info)

        return self.app(environ, recording_start_response)


@pytest.fixture
def api_schema(settings, monkeypatch):
    from config.wsgi import application

    # Generated requests must reach the views, not the per-user limits (tested in test_throttling).
    monkeypatch.setattr(ChatThrottle, "THROTTLE_RATES", {**ChatThrottle.THROTTLE_RATES, "chat": "100000/min"})
    settings.CHAT_MAX_ACTIVE_RUNS = 1000
    return schemathesis.openapi.from_wsgi("/api/schema?format=json", RecordingApp(application))


@pytest.fixture
def token(alice) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=alice)[0].key


@pytest.fixture
def alice_run(alice):
    from tests.traces.conftest import make_run

    return make_run(owner=alice, steps=2)


def fuzz(operation, strategy, *, headers: dict, checks: list, max_examples: int = MAX_EXAMPLES) -> None:
    @given(case=strategy)
    @hypothesis_settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
                         phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def run(case):
        STATS[f"cases {operation.label}"] += 1
        case.call_and_validate(headers=headers, checks=checks)

    run()


def checks_for(label: str, *, negative: bool) -> list:
    checks = [not_a_server_error, ignored_auth, json_response_schema_conformance]
    if negative:
        checks.append(negative_data_rejection)
    return checks


def test_the_schema_has_exactly_the_operations_fuzzed_here(api_schema):
    labels = {result.ok().label for result in api_schema.get_all_operations()}
    assert labels == set(OPERATIONS)


@pytest.mark.parametrize("label", OPERATIONS)
def test_generated_requests_cause_no_server_error_and_match_the_schema(api_schema, token, label):
    operation = api_schema.find_operation_by_label(label)
    headers = {"Authorization": f"Token {token}"}
    before = STATS["requests"]
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        try:
            fuzz(operation, operation.as_strategy(generation_mode=mode), headers=headers,
                 checks=checks_for(label, negative=mode == GenerationMode.NEGATIVE))
        except Unsatisfiable:
            # Nothing about this operation can be made invalid (e.g. one free-form path string):
            # the positive cases already send arbitrary strings there.
            assert mode == GenerationMode.NEGATIVE
            STATS["operations without invalid inputs"] += 1
    assert STATS["status 5xx"] == 0
    print(f"\n{label}: {STATS['requests'] - before} requests, no server error")


SEEDED = {
    "GET /api/runs/{run_id}": lambda run: {"path_parameters": {"run_id": run.run_id}},
    "GET /api/runs/{run_id}/events": lambda run: {"path_parameters": {"run_id": run.run_id}},
    "GET /api/diagnosis/{session_id}/trace": lambda run: {"path_parameters": {"session_id": run.session.session_id},
                                                         "query": {"runId": run.run_id}},
    "GET /api/diagnosis/{session_id}/runs": lambda run: {"path_parameters": {"session_id": run.session.session_id}},
    "GET /api/runs/{run_a}/diff/{run_b}": lambda run: {"path_parameters": {"run_a": run.run_id, "run_b": run.run_id}},
}


@pytest.mark.parametrize("label", sorted(SEEDED))
def test_requests_on_a_real_run_validate_the_200_bodies_and_enforce_auth(api_schema, token, alice_run, label):
    operation = api_schema.find_operation_by_label(label)
    before = Counter(STATS)
    fuzz(operation, operation.as_strategy(**SEEDED[label](alice_run)), headers={"Authorization": f"Token {token}"},
         checks=checks_for(label, negative=False), max_examples=10)
    assert STATS["status 2xx"] > before["status 2xx"], "no request reached the run: nothing was validated"
    # ignored_auth re-sent the accepted requests without credentials: each was refused.
    probes = STATS["anonymous requests"] - before["anonymous requests"]
    assert probes > 0 and STATS["anonymous 401"] - before["anonymous 401"] == probes
    assert STATS["status 5xx"] == 0


def test_feedback_on_a_real_run_validates_its_200_body(api_schema, token, alice_run):
    operation = api_schema.find_operation_by_label("POST /api/feedback")
    for feedback in ("useful", "not_useful"):
        case = operation.Case(body={"sessionId": alice_run.session.session_id, "runId": alice_run.run_id,
                                    "feedback": feedback, "comment": "\u202e\U0001f4a5 checked"},
                              media_type="application/json")
        response = case.call_and_validate(headers={"Authorization": f"Token {token}"},
                                          checks=[not_a_server_error, response_schema_conformance, ignored_auth])
        assert response.status_code == 200


def test_the_auth_check_fails_on_an_endpoint_that_ignores_credentials(api_schema, token, alice_run, monkeypatch):
    """The checks above can fail: break GET /api/runs/{run_id} so that it ignores who asks, and
    `ignored_auth` reports it (ST401)."""
    from rest_framework.permissions import AllowAny

    from diagnosis.api import chat
    from diagnosis.models import DiagnosisRun

    monkeypatch.setattr(chat.RunView, "permission_classes", [AllowAny])
    monkeypatch.setattr(chat, "run_get_for_user",
                        lambda user, run_id: DiagnosisRun.objects.select_related("session").filter(run_id=run_id).first())
    operation = api_schema.find_operation_by_label("GET /api/runs/{run_id}")
    counted = Counter(STATS)  # this deliberate hole must not count in the suite's figures
    with pytest.raises(BaseExceptionGroup) as found:
        fuzz(operation, operation.as_strategy(path_parameters={"run_id": alice_run.run_id}),
             headers={"Authorization": f"Token {token}"}, checks=[ignored_auth], max_examples=3)
    STATS.clear()
    STATS.update(counted)
    assert found.group_contains(IgnoredAuth)


def test_summary_of_the_fuzzing(api_schema):
    print("\nschemathesis: " + ", ".join(f"{k}={v}" for k, v in sorted(STATS.items()) if not k.startswith("cases")))
    assert STATS["status 5xx"] == 0
    assert STATS["anonymous requests"] == STATS["anonymous 401"]  # every credential-less probe was refused
