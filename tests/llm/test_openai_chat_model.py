"""OpenAIChatModel driving the real `openai` client against the scripted fake server."""
from __future__ import annotations

import json
import socket
import time

import openai
import pytest

from diagnosis.llm import (
    ChatRequest,
    ModelError,
    ModelInvalidOutputError,
    ModelNonRetryableError,
    ModelRetryableError,
)
from diagnosis.llm.openai_model import OpenAIChatModel
from tests.support.fake_openai import Reply
from tests.support.fixtures import FAKE_API_KEY

PLANNER_PROMPT = "<!-- prompt: planner v1 -->\nYou plan evidence queries. Answer in JSON."
QUERY_LOGS_TOOL = {
    "type": "function",
    "function": {
        "name": "query_logs",
        "description": "Search a service's logs",
        "parameters": {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]},
    },
}


def ask(role: str = "planner", content: str = "why is payment-service failing?", **kwargs) -> ChatRequest:
    return ChatRequest(role=role, messages=[{"role": "system", "content": f"<!-- prompt: {role} v1 -->"},
                                            {"role": "user", "content": content}], **kwargs)


# --- successful replies ---------------------------------------------------------------------------


def test_it_returns_plain_content_with_usage_model_and_latency(fake_openai, make_model):
    fake_openai.enqueue(Reply.text("payment-service is healthy", usage=(42, 7)))

    reply = make_model().complete(ask())

    assert reply.content == "payment-service is healthy"
    assert reply.tool_calls == []
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (42, 7, 49)
    assert reply.model == "fake-default"
    assert reply.finish_reason == "stop"
    assert reply.latency_ms > 0
    assert reply.attempts == 1 and reply.retried_errors == ()


def test_it_parses_tool_calls_into_argument_dicts(fake_openai, make_model):
    fake_openai.enqueue(Reply.tool_calls(("query_logs", {"service": "payment-service", "limit": 20}, "call_a"),
                                         ("query_alerts", {}, "call_b")))

    reply = make_model().complete(ask("executor", tools=[QUERY_LOGS_TOOL]))

    assert reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "query_logs", {"service": "payment-service", "limit": 20}),
        ("call_b", "query_alerts", {}),
    ]
    assert json.loads(reply.tool_calls[0].raw_arguments) == {"service": "payment-service", "limit": 20}


def test_it_treats_empty_tool_arguments_as_an_empty_object(fake_openai, make_model):
    fake_openai.enqueue(Reply.tool_calls(("query_alerts", "")))

    reply = make_model().complete(ask("executor", tools=[QUERY_LOGS_TOOL]))

    assert reply.tool_calls[0].arguments == {}


def test_it_parses_a_json_reply_when_json_was_requested(fake_openai, make_model):
    fake_openai.enqueue(Reply.json({"verdict": "PASS", "score": 0.9}, fenced=True))

    reply = make_model().complete(ask("verifier", response_format="json"))

    assert reply.parse_json() == {"verdict": "PASS", "score": 0.9}


def test_it_sends_tools_with_auto_tool_choice(fake_openai, make_model):
    fake_openai.enqueue(Reply.text("done"))

    make_model().complete(ask("executor", tools=[QUERY_LOGS_TOOL]))

    body = fake_openai.requests[0].body
    sent = body["tools"][0]["function"]
    assert [t["function"]["name"] for t in body["tools"]] == ["query_logs"]
    assert sent["description"] == QUERY_LOGS_TOOL["function"]["description"]
    # Free strings are bounded on the wire, so a grammar-constrained server closes the arguments.
    assert sent["parameters"] == {"type": "object", "required": ["service"],
                                  "properties": {"service": {"type": "string", "maxLength": 256}}}
    assert "maxLength" not in QUERY_LOGS_TOOL["function"]["parameters"]["properties"]["service"]  # not mutated
    assert body["tool_choice"] == "auto"


def test_it_asks_for_a_json_object_only_when_json_is_requested(fake_openai, make_model):
    fake_openai.enqueue(Reply.json({"ok": True}), Reply.text("plain"))
    model = make_model()

    # No output schema on the request: a json_schema setting can only ask for "some JSON object".
    model.complete(ask("verifier", response_format="json", max_tokens=300))
    model.complete(ask("simple"))

    json_body, plain_body = (request.body for request in fake_openai.requests)
    assert json_body["response_format"] == {"type": "json_object"}
    assert json_body["max_tokens"] == 300
    assert "response_format" not in plain_body and "tools" not in plain_body
    assert plain_body["max_tokens"] == 1024  # the simple role's default bound


def test_it_never_sends_the_structured_input(fake_openai, make_model):
    fake_openai.enqueue(Reply.text("ok"))

    make_model().complete(ask(structured_input={"hidden_marker": "structured-only-value"}))

    assert "structured-only-value" not in fake_openai.requests[0].raw_text


def test_it_sends_the_model_name_configured_for_each_role(fake_openai, make_model):
    fake_openai.always(Reply.text("ok"))
    model = make_model(models={"planner": "big-planner", "composer": "small-writer"})

    for role in ("planner", "composer", "verifier"):
        model.complete(ask(role))

    sent = {request.role: request.model for request in fake_openai.requests}
    assert sent == {"planner": "big-planner", "composer": "small-writer", "verifier": "fake-default"}


def test_it_sends_tool_results_back_after_the_assistant_tool_call(fake_openai, make_model):
    fake_openai.enqueue(Reply.tool_calls(("query_logs", {"service": "payment-service"}, "call_1")),
                        Reply.text("pool exhausted"))
    model = make_model()
    first = model.complete(ask("executor", tools=[QUERY_LOGS_TOOL]))

    follow_up = ChatRequest(role="executor", tools=[QUERY_LOGS_TOOL], messages=[
        *ask("executor").messages,
        first.as_assistant_message(),
        {"role": "tool", "tool_call_id": "call_1", "content": {"records": [{"message": "HikariPool-1"}]}},
    ])
    model.complete(follow_up)

    sent = fake_openai.requests[1].messages
    assert sent[2]["tool_calls"][0]["function"] == {"name": "query_logs",
                                                     "arguments": '{"service": "payment-service"}'}
    assert sent[3] == {"role": "tool", "tool_call_id": "call_1",
                       "content": '{"records": [{"message": "HikariPool-1"}]}'}


# --- invalid output -------------------------------------------------------------------------------


def test_it_rejects_malformed_json_as_invalid_output(fake_openai, make_model):
    fake_openai.enqueue(Reply.malformed_json())

    with pytest.raises(ModelInvalidOutputError) as caught:
        make_model().complete(ask("verifier", response_format="json"))

    assert caught.value.code == "model_invalid_json"
    assert caught.value.kind == "invalid_output"
    assert caught.value.raw_output.startswith('{"verdict"')
    assert caught.value.usage.total_tokens > 0
    assert len(fake_openai.requests) == 1


def test_it_rejects_a_json_array_when_an_object_was_requested(fake_openai, make_model):
    fake_openai.enqueue(Reply.json([1, 2, 3]))

    with pytest.raises(ModelInvalidOutputError, match="must be a JSON object, got array"):
        make_model().complete(ask("planner", response_format="json"))


def test_it_rejects_tool_arguments_that_are_not_json(fake_openai, make_model):
    fake_openai.enqueue(Reply.invalid_tool_args("query_logs", '{"service": "payment-service",'))

    with pytest.raises(ModelInvalidOutputError) as caught:
        make_model().complete(ask("executor", tools=[QUERY_LOGS_TOOL]))

    assert caught.value.code == "model_invalid_tool_arguments"
    assert caught.value.field == "query_logs"
    assert caught.value.raw_output == '{"service": "payment-service",'


def test_it_rejects_tool_arguments_that_are_not_an_object(fake_openai, make_model):
    fake_openai.enqueue(Reply.tool_calls(("query_logs", '["payment-service"]')))

    with pytest.raises(ModelInvalidOutputError, match="must be a JSON object"):
        make_model().complete(ask("executor", tools=[QUERY_LOGS_TOOL]))


def test_it_rejects_a_reply_with_neither_content_nor_tool_calls(fake_openai, make_model):
    fake_openai.enqueue(Reply(content=None, finish_reason="length"))

    with pytest.raises(ModelInvalidOutputError) as caught:
        make_model().complete(ask())

    assert caught.value.code == "model_empty_output"


def test_it_rejects_a_body_that_is_not_a_chat_completion(fake_openai, make_model):
    fake_openai.enqueue(Reply.raw("<html>502 Bad Gateway</html>", content_type="application/json"))

    with pytest.raises(ModelInvalidOutputError) as caught:
        make_model().complete(ask())

    assert caught.value.code == "model_invalid_response"


# --- retries --------------------------------------------------------------------------------------


def test_it_succeeds_after_one_retry_when_rate_limited_once(fake_openai, make_model):
    fake_openai.enqueue(Reply.error(429, "Rate limit reached", retry_after=0), Reply.text("recovered"))

    reply = make_model(max_retries=2).complete(ask())

    assert reply.content == "recovered"
    assert reply.attempts == 2
    assert reply.retried_errors == ("model_rate_limited",)
    assert len(fake_openai.requests) == 2


def test_it_gives_up_on_server_errors_after_the_retry_budget(fake_openai, make_model):
    fake_openai.always(Reply.error(500, "upstream exploded"))

    with pytest.raises(ModelRetryableError) as caught:
        make_model(max_retries=2).complete(ask())

    assert caught.value.code == "model_server_error"
    assert caught.value.kind == "retryable"
    assert caught.value.status_code == 500
    assert caught.value.attempts == 3
    assert len(fake_openai.requests) == 3


def test_it_honours_retry_after_only_up_to_the_cap(fake_openai, make_model):
    delays: list[float] = []
    fake_openai.enqueue(Reply.error(429, retry_after=30), Reply.error(503, headers={"retry-after-ms": "150"}),
                        Reply.text("ok"))

    make_model(max_retries=2, backoff_cap=2.0, sleep=delays.append).complete(ask())

    assert delays == [2.0, 0.15]


def test_it_does_not_retry_when_retries_are_disabled(fake_openai, make_model):
    fake_openai.always(Reply.error(503))

    with pytest.raises(ModelRetryableError) as caught:
        make_model(max_retries=0).complete(ask())

    assert caught.value.attempts == 1
    assert len(fake_openai.requests) == 1


@pytest.mark.timeout(30)
def test_it_times_out_a_stalled_server_quickly(fake_openai, make_model):
    fake_openai.always(Reply.stall(2.0))
    model = make_model(read_timeout=0.5, max_retries=1)

    started = time.monotonic()
    with pytest.raises(ModelRetryableError) as caught:
        model.complete(ask())
    elapsed = time.monotonic() - started

    assert caught.value.code == "model_timeout"
    assert caught.value.attempts == 2
    assert len(fake_openai.requests) == 2
    assert elapsed < 10  # only a guard against hangs; two 0.5 s timeouts take about 1 s


def test_it_recovers_when_only_the_first_call_stalls(fake_openai, make_model):
    fake_openai.enqueue(Reply.stall(2.0), Reply.text("fast answer"))

    reply = make_model(read_timeout=0.5, max_retries=1).complete(ask())

    assert reply.content == "fast answer"
    assert reply.retried_errors == ("model_timeout",)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_it_cuts_off_a_five_second_stall_at_a_one_second_timeout(fake_openai, make_model):
    fake_openai.always(Reply.stall(5.0))
    model = make_model(read_timeout=1.0, max_retries=0)

    started = time.monotonic()
    with pytest.raises(ModelRetryableError, match="timed out"):
        model.complete(ask())

    assert time.monotonic() - started < 4.5


def test_it_reports_a_refused_connection_as_retryable(make_model):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    model = make_model(base_url=f"http://127.0.0.1:{closed_port}/v1", max_retries=1)

    with pytest.raises(ModelRetryableError) as caught:
        model.complete(ask())

    assert caught.value.code == "model_connection_error"
    assert caught.value.attempts == 2


# --- non-retryable failures -----------------------------------------------------------------------


def test_it_fails_at_once_on_bad_credentials(fake_openai, make_model):
    fake_openai.always(Reply.error(401, "Incorrect API key provided"))

    with pytest.raises(ModelNonRetryableError) as caught:
        make_model(max_retries=3).complete(ask())

    assert caught.value.code == "model_auth_failed"
    assert caught.value.kind == "non_retryable"
    assert caught.value.attempts == 1
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize("status, code", [
    (400, "model_bad_request"),
    (403, "model_permission_denied"),
    (404, "model_not_found"),
    (422, "model_bad_request"),
    (409, "model_client_error"),
])
def test_it_does_not_retry_client_errors(fake_openai, make_model, status, code):
    fake_openai.always(Reply.error(status))

    with pytest.raises(ModelNonRetryableError) as caught:
        make_model(max_retries=3).complete(ask())

    assert caught.value.code == code
    assert caught.value.status_code == status
    assert len(fake_openai.requests) == 1


def test_it_keeps_the_api_key_out_of_every_error_message(fake_openai, make_model):
    # A server that echoes the key back (some proxies do) must not leak it into errors or logs.
    fake_openai.enqueue(Reply.error(401, f"Incorrect API key provided: {FAKE_API_KEY}"),
                        Reply.error(500, f"auth header was Bearer {FAKE_API_KEY}"),
                        Reply.malformed_json())
    model = make_model(max_retries=0)

    errors: list[ModelError] = []
    for request in (ask(), ask(), ask("verifier", response_format="json")):
        with pytest.raises(ModelError) as caught:
            model.complete(request)
        errors.append(caught.value)

    assert [error.code for error in errors] == ["model_auth_failed", "model_server_error", "model_invalid_json"]
    for error in errors:
        assert FAKE_API_KEY not in str(error)
        assert FAKE_API_KEY not in repr(error)
        assert FAKE_API_KEY not in json.dumps(error.to_dict())
        assert FAKE_API_KEY not in str(error.__cause__) + str(error.__context__)
    assert errors[0].__context__ is None and errors[1].__context__ is None  # SDK exceptions are not chained


def test_it_sends_the_key_only_in_the_authorization_header(fake_openai, make_model):
    fake_openai.enqueue(Reply.text("ok"))

    make_model().complete(ask())

    request = fake_openai.requests[0]
    assert request.headers["authorization"] == f"Bearer {FAKE_API_KEY}"
    assert FAKE_API_KEY not in request.raw_text


# --- configuration --------------------------------------------------------------------------------


def test_it_configures_explicit_timeouts_and_no_sdk_retries(make_model):
    model = make_model(connect_timeout=1.5, read_timeout=7.0)

    timeout = model.client.timeout
    assert isinstance(timeout, openai.Timeout)
    assert (timeout.connect, timeout.read) == (1.5, 7.0)
    assert timeout.read != 600
    assert model.client.max_retries == 0


def test_it_describes_itself_without_the_key(make_model):
    model = make_model(models={"planner": "big-planner"})

    description = model.describe()

    assert description["provider"] == "openai"
    assert description["base_url"].startswith("http://127.0.0.1:")
    assert description["models"]["planner"] == "big-planner"
    assert description["models"]["composer"] == "fake-default"
    assert FAKE_API_KEY not in json.dumps(description) + repr(model)


@pytest.mark.parametrize("overrides, problem", [
    ({"api_key": ""}, "API key is missing"),
    ({"default_model": ""}, "Default model name is missing"),
    ({"models": {"oracle": "x"}}, "unknown roles"),
    ({"read_timeout": 0}, "timeouts must be positive"),
    ({"max_retries": 50}, "max_retries must be between"),
])
def test_it_refuses_an_unusable_configuration(overrides, problem):
    options = {"base_url": "http://127.0.0.1:9/v1", "api_key": FAKE_API_KEY, "default_model": "m", **overrides}

    with pytest.raises(ModelNonRetryableError, match=problem) as caught:
        OpenAIChatModel(**options)

    assert caught.value.code == "model_config_error"
