"""Interoperability with OpenAI-compatible servers, on the wire of the scripted server:
the assistant tool-call turn's `content`, structured outputs and their fallback levels, max_tokens
per role, a 500 that says the request is invalid, run deadlines, and API-key scrubbing."""
from __future__ import annotations

import time

import pytest

from diagnosis.llm import ChatRequest, ModelDeadlineExceeded, ModelNonRetryableError, ModelRetryableError
from diagnosis.llm import schemas
from diagnosis.llm.openai_model import DEFAULT_MAX_TOKENS, build_chat_model
from tests.support.fake_openai import Reply
from tests.support.fixtures import openai_settings

PLAN = {"version": "planner_plan_v1", "goal": "find it", "services": ["payment-service"], "language": "en",
        "steps": [{"tool": "query_logs", "arguments": {"service": "payment-service"}, "purpose": "errors"}]}


def ask(role: str = "planner", *, json: bool = True, node: str | None = None, **kwargs) -> ChatRequest:
    contract = schemas.output_model(role, node) if json else None
    schema = schemas.response_format(contract)["json_schema"] if contract else None
    return ChatRequest(role=role, messages=[{"role": "system", "content": f"<!-- prompt: {role} v1 -->"},
                                            {"role": "user", "content": "why is payment-service failing? JSON"}],
                       response_format="json" if json else None,
                       output_schema=(schema["name"], schema["schema"]) if schema else None, **kwargs)


# --- the assistant turn that carries tool_calls -----------------------------------------------------


def _tool_round_trip(fake_openai, model):
    fake_openai.enqueue(Reply.tool_calls(("query_logs", {"service": "payment-service"}, "call_1")), Reply.text("done"))
    first = model.complete(ChatRequest(role="executor", messages=[{"role": "user", "content": "go"}],
                                       tools=[{"type": "function", "function": {"name": "query_logs",
                                                                                "parameters": {"type": "object"}}}]))
    assert first.content is None and first.tool_calls
    messages = [{"role": "user", "content": "go"}, first.as_assistant_message(),
                {"role": "tool", "tool_call_id": "call_1", "content": "<tool_output>ok</tool_output>"}]
    model.complete(ChatRequest(role="executor", messages=messages))
    return fake_openai.requests[1].messages[1]


def test_the_tool_call_turn_is_sent_with_empty_content_by_default(fake_openai, make_model):
    sent = _tool_round_trip(fake_openai, make_model())
    assert sent["role"] == "assistant" and sent["content"] == "" and sent["tool_calls"][0]["id"] == "call_1"


def test_the_tool_call_turn_can_be_sent_with_null_content(fake_openai, make_model):
    sent = _tool_round_trip(fake_openai, make_model(tool_call_content="null"))
    assert sent["content"] is None and sent["tool_calls"][0]["function"]["name"] == "query_logs"


def test_the_tool_call_content_setting_is_checked(fake_openai):
    with pytest.raises(ModelNonRetryableError, match="tool_call_content"):
        build_chat_model(openai_settings(fake_openai, LLM_TOOL_CALL_CONTENT="none"))


# --- structured outputs ----------------------------------------------------------------------------


def test_json_schema_sends_the_roles_schema(fake_openai, make_model):
    fake_openai.enqueue(Reply.json(PLAN))
    reply = make_model().complete(ask("planner"))
    sent = fake_openai.requests[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "PlannerPlan_v1"
    assert sent["json_schema"]["schema"] == schemas.json_schema(schemas.PlannerPlan)
    assert sent["json_schema"]["strict"] is False
    assert reply.structured_output == "json_schema"


@pytest.mark.parametrize("level, expected", [
    ("json_object_schema", {"type": "json_object", "schema": schemas.json_schema(schemas.PlannerPlan)}),
    ("json_object", {"type": "json_object"}),
    ("prompt", None),
])
def test_the_weaker_levels_are_sent_when_configured(fake_openai, make_model, level, expected):
    fake_openai.enqueue(Reply.json(PLAN))
    reply = make_model(structured_output=level).complete(ask("planner"))
    assert fake_openai.requests[0].body.get("response_format") == expected
    assert reply.structured_output == level and reply.parse_json() == PLAN


def test_a_server_that_rejects_each_level_gets_the_next_down_to_the_prompt_alone(fake_openai, make_model):
    fake_openai.enqueue(
        Reply.error(400, "response_format type json_schema is not supported by this server"),
        # what llama-cpp-python's server (FastAPI) answers to a response_format it cannot parse
        Reply.raw('{"detail": [{"type": "literal_error", "loc": ["body", "response_format", "type"], '
                  '"msg": "Input should be \'text\' or \'json_object\'"}]}', status=422),
        Reply.error(400, "Invalid value for response_format: json_object"),
        Reply.json(PLAN),
        Reply.json(PLAN),
    )
    model = make_model(max_retries=0)
    reply = model.complete(ask("planner"))
    sent = [request.body.get("response_format") for request in fake_openai.requests]
    assert [f and f["type"] for f in sent] == ["json_schema", "json_object", "json_object", None]
    assert "schema" in sent[1] and "schema" not in sent[2]
    assert reply.structured_output == "prompt" and len(reply.retried_errors) == 3
    # The weaker level sticks for the model's later calls: no rejected request is sent twice.
    model.complete(ask("verifier"))
    assert "response_format" not in fake_openai.requests[4].body
    assert model.describe()["structured_output_in_use"] == "prompt"
    # ... and for the next client of the same server in this process (the next run).
    assert make_model(max_retries=0).describe()["structured_output_in_use"] == "prompt"


def test_a_bad_request_about_something_else_is_not_downgraded(fake_openai, make_model):
    fake_openai.enqueue(Reply.error(400, "messages must not be empty"))
    with pytest.raises(ModelNonRetryableError) as caught:
        make_model().complete(ask("planner"))
    assert caught.value.code == "model_bad_request" and len(fake_openai.requests) == 1


def test_the_structured_output_setting_is_checked(fake_openai):
    with pytest.raises(ModelNonRetryableError, match="structured_output"):
        build_chat_model(openai_settings(fake_openai, LLM_STRUCTURED_OUTPUT="grammar"))
    assert build_chat_model(openai_settings(fake_openai)).structured_output == "json_schema"


def test_every_json_role_has_a_schema_that_its_example_output_satisfies():
    assert schemas.is_valid(schemas.PlannerPlan, PLAN)
    assert not schemas.is_valid(schemas.PlannerPlan, {"question": "echoed input", "mode": "NORMAL"})
    assert schemas.is_valid(schemas.VerifierVerdict, {"verdict": "PASS", "score": 0.9})
    assert not schemas.is_valid(schemas.VerifierVerdict, {"verdict": "MAYBE"})
    for (role, node), model in schemas.OUTPUTS.items():
        assert schemas.output_model(role, node) is model
        assert schemas.json_schema(model)["type"] == "object"
    assert schemas.output_model("simple") is None


def test_tool_arguments_in_the_wire_schema_follow_each_tools_schema():
    params = {"query_logs": {"type": "object", "properties": {"service": {"type": "string"}},
                             "required": ["service"], "additionalProperties": False},
              "query_alerts": {"type": "object", "properties": {}, "additionalProperties": False}}
    schema = schemas.json_schema(schemas.VerifierVerdict, tool_parameters=params)
    variants = schema["$defs"]["SuggestedQuery"]["anyOf"]
    assert [v["properties"]["tool"]["const"] for v in variants] == ["query_alerts", "query_logs"]
    assert variants[1]["properties"]["arguments"]["properties"]["service"]["maxLength"] == schemas.ARGUMENT_TEXT_LIMIT
    assert "maxLength" not in params["query_logs"]["properties"]["service"]  # the tool's own schema is untouched
    # Tool-name fields elsewhere may only name those tools.
    assert schema["$defs"]["EvidenceRef"]["properties"]["tool_name"]["enum"] == ["query_alerts", "query_logs"]


def test_local_validation_names_the_first_bad_field():
    with pytest.raises(Exception) as caught:
        schemas.validate_output(schemas.PlannerPlan, {"steps": [{"purpose": "no tool"}]})
    assert caught.value.code == "model_schema_invalid" and caught.value.field == "steps[0].tool"


# --- bounded generation ----------------------------------------------------------------------------


def test_max_tokens_is_sent_per_role(fake_openai):
    model = build_chat_model(openai_settings(fake_openai, LLM_MAX_TOKENS={"planner": 300, "aiops": 900},
                                             LLM_MAX_TOKENS_VERIFIER="700"))
    fake_openai.always(Reply.json(PLAN))
    for role in ("planner", "verifier", "composer", "aiops"):
        model.complete(ask(role, json=False))
    sent = [request.body["max_tokens"] for request in fake_openai.requests]
    assert sent == [300, 700, DEFAULT_MAX_TOKENS["composer"], 900]


def test_max_tokens_can_use_the_newer_parameter_name(fake_openai, make_model):
    fake_openai.enqueue(Reply.text("hi"))
    make_model(max_tokens_param="max_completion_tokens", max_tokens={"simple": 64}).complete(ask("simple", json=False))
    body = fake_openai.requests[0].body
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body


@pytest.mark.parametrize("value", ["0", "-5", "many", "1.5", 100_000])
def test_bad_max_tokens_settings_are_refused(fake_openai, value):
    with pytest.raises(ModelNonRetryableError, match="LLM_MAX_TOKENS_PLANNER|max_tokens"):
        build_chat_model(openai_settings(fake_openai, LLM_MAX_TOKENS_PLANNER=value))


# --- a 500 that says the request is invalid ---------------------------------------------------------


def test_a_500_saying_the_request_is_invalid_is_not_retried(fake_openai, make_model):
    fake_openai.always(Reply.error(500, "Invalid request: 'content' of the assistant message must be a string",
                                   type="internal_server_error"))
    with pytest.raises(ModelNonRetryableError) as caught:
        make_model(max_retries=2).complete(ask("simple", json=False))
    assert caught.value.code == "model_bad_request" and caught.value.status_code == 500
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize("message", [
    # llama-cpp-python wraps request validation errors and chat-template errors into HTTP 500
    "1 validation error: {'type': 'literal_error', 'loc': ('body', 'messages', 1, 'content'), "
    "'msg': \"Input should be a valid string\"}",
    'can only concatenate str (not "NoneType") to str',
])
def test_a_500_from_a_local_server_rejecting_the_request_is_not_retried(fake_openai, make_model, message):
    fake_openai.always(Reply.error(500, message, type="internal_server_error"))
    with pytest.raises(ModelNonRetryableError):
        make_model(max_retries=2).complete(ask("simple", json=False))
    assert len(fake_openai.requests) == 1


def test_a_plain_500_is_still_retried(fake_openai, make_model):
    fake_openai.always(Reply.error(500, "upstream exploded"))
    with pytest.raises(ModelRetryableError):
        make_model(max_retries=2).complete(ask("simple", json=False))
    assert len(fake_openai.requests) == 3


# --- deadlines ---------------------------------------------------------------------------------------


def test_a_call_that_would_outlive_the_deadline_is_cut_short(fake_openai, make_model):
    fake_openai.always(Reply.stall(5.0))
    model = make_model(read_timeout=10.0, max_retries=2)
    started = time.monotonic()
    with pytest.raises(ModelDeadlineExceeded) as caught:
        model.complete(ask("simple", json=False, deadline=started + 0.5))
    assert caught.value.code == "budget_exhausted"
    assert len(fake_openai.requests) == 1  # cut at the deadline, and no retry after it
    assert time.monotonic() - started < 5.0  # bounded by the deadline, not by the stall or the read timeout


def test_no_attempt_is_sent_after_the_deadline(fake_openai, make_model):
    fake_openai.always(Reply.text("late"))
    with pytest.raises(ModelDeadlineExceeded):
        make_model().complete(ask("simple", json=False, deadline=time.monotonic() - 1))
    assert fake_openai.requests == []


def test_a_retry_that_the_deadline_leaves_no_time_for_is_not_made(fake_openai, make_model):
    fake_openai.always(Reply.error(429, "slow down", retry_after=2))
    model = make_model(max_retries=3, backoff_cap=5.0)
    with pytest.raises(ModelDeadlineExceeded, match="no time to retry"):
        model.complete(ask("simple", json=False, deadline=time.monotonic() + 1.0))
    assert len(fake_openai.requests) == 1


# --- scrubbing the API key from stored errors --------------------------------------------------------


@pytest.mark.parametrize("key", ["x", "ollama", "EMPTY", "sk-1234"])
def test_a_short_placeholder_key_is_not_masked_inside_words(fake_openai, make_model, key):
    fake_openai.always(Reply.error(400, "Unexpected token in the request: expected a message object"))
    with pytest.raises(ModelNonRetryableError) as caught:
        make_model(api_key=key).complete(ask("simple", json=False))
    assert "Unexpected token" in caught.value.message and "expected a message object" in caught.value.message
    assert "***" not in caught.value.message


def test_a_real_key_is_masked_as_a_whole_word_only(fake_openai, make_model):
    key = "local-secret-key-42"
    fake_openai.always(Reply.error(401, f"Incorrect API key provided: {key}. Also xlocal-secret-key-42y stays."))
    with pytest.raises(ModelNonRetryableError) as caught:
        make_model(api_key=key).complete(ask("simple", json=False))
    assert "provided: ***." in caught.value.message
    assert "xlocal-secret-key-42y" in caught.value.message  # not a whole-word match: another token


def test_no_wire_schema_asks_for_a_string_longer_than_a_grammar_compiler_takes():
    """llama.cpp refuses `maxLength` repetitions past its threshold (the executor's summary was 2000)."""
    from diagnosis.agents.runtime import TOOL_PARAMETERS

    def lengths(node):
        if isinstance(node, dict):
            if "maxLength" in node:
                yield node["maxLength"]
            for value in node.values():
                yield from lengths(value)
        elif isinstance(node, list):
            for item in node:
                yield from lengths(item)

    for model in set(schemas.OUTPUTS.values()):
        found = list(lengths(schemas.json_schema(model, tool_parameters=TOOL_PARAMETERS)))
        assert found and max(found) <= schemas.WIRE_TEXT_LIMIT, (model.__name__, max(found))
    assert schemas.ExecutorEvidenceSchema.model_fields["summary"].json_schema_extra["maxLength"] > schemas.WIRE_TEXT_LIMIT
    assert schemas.validate_output(schemas.AiOpsReport, {"report_markdown": "x" * 5000})  # local check stays lenient


@pytest.mark.parametrize("temperature, sent", [(0.2, 0.2), (None, "absent")])
def test_the_temperature_setting_reaches_the_request(fake_openai, settings, temperature, sent):
    """LLM_TEMPERATURE goes from Django settings through the service wiring into every request; unset,
    the field is left out and the server's default applies."""
    from diagnosis.services import wiring

    settings.LLM_PROVIDER, settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = "openai", fake_openai.base_url, "sk-test"
    settings.LLM_TEMPERATURE = temperature
    fake_openai.enqueue(Reply.text("hi"))
    wiring.chat_model().complete(ask("simple", json=False))
    assert fake_openai.requests[0].body.get("temperature", "absent") == sent


def test_a_bad_temperature_stops_start_up(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from tests.foundation.test_settings import load

    assert load(monkeypatch, LLM_TEMPERATURE="0.7")["LLM_TEMPERATURE"] == 0.7
    with pytest.raises(ImproperlyConfigured, match="LLM_TEMPERATURE=3.0 is above the maximum"):
        load(monkeypatch, LLM_TEMPERATURE="3")
