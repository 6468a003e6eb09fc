"""The model contract: requests, replies, JSON parsing and the small output validator."""
from __future__ import annotations

import pytest

from diagnosis.llm import (
    ChatModel,
    ChatReply,
    ChatRequest,
    ModelError,
    ModelInvalidOutputError,
    ModelNonRetryableError,
    ModelRetryableError,
    ToolCall,
    Usage,
    parse_json_object,
    validate_object,
)

USER = [{"role": "user", "content": "hi"}]


def test_a_request_refuses_an_unknown_role():
    with pytest.raises(ValueError, match="Unknown model role 'oracle'"):
        ChatRequest(role="oracle", messages=USER)


def test_a_request_refuses_an_unknown_response_format():
    with pytest.raises(ValueError, match="response_format"):
        ChatRequest(role="planner", messages=USER, response_format="xml")


def test_a_request_needs_messages():
    with pytest.raises(ValueError, match="at least one message"):
        ChatRequest(role="planner", messages=[])


def test_a_request_is_immutable():
    request = ChatRequest(role="planner", messages=USER)

    with pytest.raises(AttributeError):
        request.role = "composer"  # type: ignore[misc]


@pytest.mark.parametrize("content", [
    '{"verdict": "PASS"}',
    '```json\n{"verdict": "PASS"}\n```',
    '```\n{"verdict": "PASS"}\n```',
    '  \n```JSON\n{"verdict": "PASS"}```  ',
])
def test_parse_json_accepts_plain_and_fenced_objects(content):
    assert ChatReply(content=content).parse_json() == {"verdict": "PASS"}


@pytest.mark.parametrize("content, problem", [
    (None, "empty"),
    ("   ", "empty"),
    ("Sure! Here is the JSON: {", "not valid JSON"),
    ("[1, 2]", "got array"),
    ('"PASS"', "got string"),
])
def test_parse_json_rejects_anything_but_one_object(content, problem):
    with pytest.raises(ModelInvalidOutputError, match=problem) as caught:
        ChatReply(content=content).parse_json()

    assert caught.value.code == "model_invalid_json"


def test_parse_json_object_names_the_tool_whose_arguments_are_bad():
    with pytest.raises(ModelInvalidOutputError) as caught:
        parse_json_object("{oops", what="Arguments of tool call 'query_logs'", field="query_logs")

    assert caught.value.code == "model_invalid_tool_arguments"
    assert caught.value.field == "query_logs"
    assert "query_logs" in str(caught.value)


def test_validate_object_returns_a_valid_object():
    data = {"verdict": "PASS", "score": 0.8, "claim_checks": []}

    assert validate_object(data, {"verdict": str, "score": (int, float), "claim_checks": list},
                           choices={"verdict": ("PASS", "LOW_CONFID", "REJECT")}) is data


@pytest.mark.parametrize("data, field_name, problem", [
    ({"score": 0.5}, "verdict", "is required"),
    ({"verdict": None, "score": 0.5}, "verdict", "is required"),
    ({"verdict": "PASS", "score": "high"}, "score", "must be integer or number, got string"),
    ({"verdict": "PASS", "score": True}, "score", "got boolean"),
    ({"verdict": "MAYBE", "score": 0.5}, "verdict", "must be one of 'PASS', 'LOW_CONFID', 'REJECT'"),
    ({"verdict": "PASS", "score": 0.5, "rationale": 3}, "rationale", "must be string, got integer"),
])
def test_validate_object_names_the_first_bad_field(data, field_name, problem):
    with pytest.raises(ModelInvalidOutputError, match=problem) as caught:
        validate_object(data, {"verdict": str, "score": (int, float)}, optional={"rationale": str},
                        choices={"verdict": ("PASS", "LOW_CONFID", "REJECT")})

    assert caught.value.code == "model_schema_invalid"
    assert caught.value.field == field_name


def test_validate_object_prefixes_nested_paths():
    with pytest.raises(ModelInvalidOutputError) as caught:
        validate_object({"supported": True}, {"claim_id": str}, path="claim_checks[2]")

    assert caught.value.field == "claim_checks[2].claim_id"


def test_validate_object_rejects_a_non_object():
    with pytest.raises(ModelInvalidOutputError, match="must be a JSON object, got array"):
        validate_object([], {"a": str})


def test_error_kinds_are_stable():
    assert (ModelRetryableError("x").kind, ModelNonRetryableError("x").kind, ModelInvalidOutputError("x").kind) == (
        "retryable", "non_retryable", "invalid_output")
    assert ModelRetryableError("x").retryable and not ModelInvalidOutputError("x").retryable
    assert all(issubclass(cls, ModelError) for cls in (ModelRetryableError, ModelNonRetryableError,
                                                        ModelInvalidOutputError))


def test_an_error_serialises_for_the_audit_trail():
    error = ModelRetryableError("timed out", code="model_timeout", attempts=3, model="m")

    assert error.to_dict() == {"code": "model_timeout", "kind": "retryable", "message": "timed out",
                               "status_code": None, "attempts": 3, "field": None, "model": "m"}


def test_a_reply_becomes_the_assistant_message_for_the_next_turn():
    reply = ChatReply(content=None, tool_calls=[ToolCall("call_1", "query_logs", {"service": "a"}, '{"service":"a"}')])

    assert reply.as_assistant_message() == {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "query_logs", "arguments": '{"service":"a"}'}}],
    }
    assert reply.to_dict()["tool_calls"] == [{"id": "call_1", "name": "query_logs", "arguments": {"service": "a"}}]


def test_usage_adds_up_across_calls():
    assert Usage(10, 2, 12) + Usage(5, 1, 6) == Usage(15, 3, 18)


def test_any_object_with_complete_is_a_chat_model():
    class Echo:
        def complete(self, request: ChatRequest) -> ChatReply:
            return ChatReply(content=request.messages[-1]["content"])

    assert isinstance(Echo(), ChatModel)
