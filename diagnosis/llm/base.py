"""The model contract every agent talks to: requests, replies, usage, and model errors.

Stdlib only, so the graph, the agents and the offline analyser can use it without a network client.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping, Protocol, runtime_checkable

ROLES: tuple[str, ...] = ("planner", "executor", "verifier", "composer", "simple", "aiops")
RESPONSE_FORMATS: tuple[str | None, ...] = (None, "json")
RAW_OUTPUT_LIMIT = 4000  # characters of a bad model output kept on the error for the audit trail

ErrorKind = Literal["retryable", "non_retryable", "invalid_output"]


# --- errors -------------------------------------------------------------------------------------


class ModelError(Exception):
    """A model call that did not produce a usable reply; `code` is stable and stored on the run."""

    kind: ClassVar[ErrorKind] = "non_retryable"
    default_code: ClassVar[str] = "model_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status_code: int | None = None,
        attempts: int = 1,
        field: str | None = None,
        raw_output: str | None = None,
        model: str | None = None,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.status_code = status_code
        self.attempts = attempts
        self.field = field
        self.raw_output = raw_output[:RAW_OUTPUT_LIMIT] if raw_output else raw_output
        self.model = model
        self.usage = usage

    @property
    def retryable(self) -> bool:
        return self.kind == "retryable"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe summary for steps, events and run error fields."""
        return {
            "code": self.code,
            "kind": self.kind,
            "message": self.message,
            "status_code": self.status_code,
            "attempts": self.attempts,
            "field": self.field,
            "model": self.model,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ModelRetryableError(ModelError):
    """Transient provider fault (timeout, connection, 429, 5xx); retries were already spent."""

    kind: ClassVar[ErrorKind] = "retryable"
    default_code: ClassVar[str] = "model_unavailable"


class ModelNonRetryableError(ModelError):
    """A fault that the same call cannot fix: credentials, permissions, bad request, configuration."""

    kind: ClassVar[ErrorKind] = "non_retryable"
    default_code: ClassVar[str] = "model_request_rejected"


class ModelDeadlineExceeded(ModelNonRetryableError):
    """The run's wall-time budget ran out before the call (or during it, cutting it short)."""

    default_code: ClassVar[str] = "budget_exhausted"


class ModelInvalidOutputError(ModelError):
    """The model answered, but not with what was asked for (bad JSON, schema, tool arguments)."""

    kind: ClassVar[ErrorKind] = "invalid_output"
    default_code: ClassVar[str] = "model_invalid_output"


# --- request and reply --------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


# Alike in shape to tools.registry.ToolOutcome only (an id, a tool name, arguments): a model's request, not what
# the call produced.
@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ChatRequest:
    """One model call. `structured_input` is what the prompt was rendered from (never sent).

    `output_schema` is ``(name, JSON Schema)`` of the JSON answer, for servers that can enforce it;
    `deadline` is a ``time.monotonic()`` instant the call (with its retries) must not outlive.
    """

    role: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    response_format: Literal["json"] | None = None
    structured_input: dict[str, Any] | None = None
    max_tokens: int | None = None
    output_schema: tuple[str, dict[str, Any]] | None = None
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Unknown model role {self.role!r}; use one of {', '.join(ROLES)}")
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format must be None or 'json', got {self.response_format!r}")
        if not self.messages:
            raise ValueError("A ChatRequest needs at least one message")
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {self.max_tokens}")

    # This and ChatReply below are shaped like tools.backends.traces' `is_error` and TraceQuery: a likeness, no logic.
    @property
    def wants_json(self) -> bool:
        return self.response_format == "json"


@dataclass(frozen=True)
class ChatReply:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    latency_ms: float = 0.0
    finish_reason: str | None = None
    attempts: int = 1
    # Codes of the failed attempts that were retried before this reply (e.g. ["model_rate_limited"]).
    retried_errors: tuple[str, ...] = ()
    # How the JSON shape was asked for: "json_schema", "json_object", "prompt", or None (no JSON wanted).
    structured_output: str | None = None

    @property
    def has_tool_calls(self) -> bool:
        return bool(self.tool_calls)

    def parse_json(self) -> dict[str, Any]:
        """The content as a JSON object, tolerating a ```json fence; anything else is invalid output."""
        return parse_json_object(self.content, what="model content")

    def as_assistant_message(self) -> dict[str, Any]:
        """The OpenAI-style assistant message to append before sending tool results back."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": call.raw_arguments}}
                for call in self.tool_calls
            ]
        return message

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe record of the reply for the audit trail."""
        return {
            "content": self.content,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "usage": self.usage.to_dict(),
            "model": self.model,
            "latency_ms": self.latency_ms,
            "finish_reason": self.finish_reason,
            "attempts": self.attempts,
            "retried_errors": list(self.retried_errors),
            "structured_output": self.structured_output,
        }


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a ChatRequest: the OpenAI-compatible client, the offline analyser, fakes."""

    def complete(self, request: ChatRequest) -> ChatReply: ...


# --- parsing and validating model JSON ----------------------------------------------------------

_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n?(?P<body>.*?)\n?[ \t]*```$", re.DOTALL)


def strip_code_fence(text: str) -> str:
    text = text.strip()
    match = _FENCE.match(text)
    return match.group("body").strip() if match else text


def parse_json_object(text: str | None, *, what: str = "model output", field: str | None = None) -> dict[str, Any]:
    """Parse `text` as one JSON object or raise ModelInvalidOutputError naming what was parsed."""
    code = "model_invalid_tool_arguments" if field else "model_invalid_json"
    if text is None or not text.strip():
        raise ModelInvalidOutputError(f"{what} is empty; expected a JSON object", code=code, field=field,
                                      raw_output=text)
    try:
        data = json.loads(strip_code_fence(text))
    except json.JSONDecodeError as exc:
        raise ModelInvalidOutputError(
            f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
            code=code, field=field, raw_output=text,
        ) from None
    if not isinstance(data, dict):
        raise ModelInvalidOutputError(
            f"{what} must be a JSON object, got {_json_type(data)}", code=code, field=field, raw_output=text,
        )
    return data


def validate_object(
    data: Any,
    required: Mapping[str, type | tuple[type, ...]],
    *,
    optional: Mapping[str, type | tuple[type, ...]] | None = None,
    choices: Mapping[str, tuple[Any, ...] | frozenset[Any] | set[Any]] | None = None,
    path: str = "",
) -> dict[str, Any]:
    """Check a parsed model object: required keys and types, optional keys' types, allowed values.

    Raises ModelInvalidOutputError (code ``model_schema_invalid``) whose `field` names the first bad
    key, e.g. ``claim_checks[2].claim_id`` when called with ``path="claim_checks[2]"``.
    """
    if not isinstance(data, dict):
        raise _schema_error(path or "$", f"must be a JSON object, got {_json_type(data)}")
    for key, expected in required.items():
        if key not in data or data[key] is None:
            raise _schema_error(_join(path, key), "is required")
        _check_type(data[key], expected, _join(path, key))
    for key, expected in (optional or {}).items():
        if data.get(key) is not None:
            _check_type(data[key], expected, _join(path, key))
    for key, allowed in (choices or {}).items():
        if key in data and data[key] not in allowed:
            allowed_text = ", ".join(repr(value) for value in allowed)
            raise _schema_error(_join(path, key), f"must be one of {allowed_text}, got {data[key]!r}")
    return data


def _check_type(value: Any, expected: type | tuple[type, ...], field_name: str) -> None:
    expected_types = expected if isinstance(expected, tuple) else (expected,)
    # bool is an int subclass in Python but not a number in JSON.
    if isinstance(value, bool) and bool not in expected_types:
        raise _schema_error(field_name, f"must be {_type_names(expected_types)}, got boolean")
    if not isinstance(value, expected_types):
        raise _schema_error(field_name, f"must be {_type_names(expected_types)}, got {_json_type(value)}")


def _schema_error(field_name: str, problem: str) -> ModelInvalidOutputError:
    return ModelInvalidOutputError(f"Model output field '{field_name}' {problem}",
                                   code="model_schema_invalid", field=field_name)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_JSON_NAMES = {dict: "object", list: "array", str: "string", int: "integer", float: "number",
               bool: "boolean", type(None): "null"}


def _json_type(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join(_JSON_NAMES.get(t, t.__name__) for t in types)
