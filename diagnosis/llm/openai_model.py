# size: one client: request building, retries, deadline, structured output and its local validation.
"""ChatModel over any OpenAI-compatible Chat Completions server, and the settings-driven model factory.

Timeouts are always explicit and retries are ours (bounded, only for transient faults), so a slow or
failing provider ends a call within a known time instead of hanging a run.
"""
from __future__ import annotations

import email.utils
import json
import math
import random
import re
import time
from typing import Any, Callable, Mapping

import openai
from openai import OpenAI

from .base import (
    ROLES, ChatModel, ChatReply, ChatRequest, ModelDeadlineExceeded, ModelError, ModelInvalidOutputError,
    ModelNonRetryableError, ModelRetryableError, ToolCall, Usage, parse_json_object,
)
from .schemas import bounded_tools

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
MAX_RETRIES_LIMIT = 5
# How a JSON answer is asked for, strongest first; a server that rejects one level gets the next.
#   json_schema         {"type": "json_schema", "json_schema": {name, schema, strict}}  (OpenAI, llama.cpp's
#                       llama-server, vLLM, Ollama)
#   json_object_schema  {"type": "json_object", "schema": {...}}  (llama-cpp-python's server, Anyscale-style)
#   json_object         {"type": "json_object"}: some JSON object, any shape
#   prompt              no response_format: the prompt alone asks for JSON
STRUCTURED_OUTPUT_LEVELS = ("json_schema", "json_object_schema", "json_object", "prompt")
SCHEMA_LEVELS = ("json_schema", "json_object_schema")  # the levels that make the server enforce the schema
# The level a server accepted after rejecting stronger ones, per (base URL, configured level): later
# clients of the same process (one per run) start there instead of paying a rejected request each.
_LEARNED_LEVELS: dict[tuple[str, str], int] = {}
TOOL_CALL_CONTENT_MODES = ("empty", "null")  # `content` of an assistant message that carries tool_calls
# Tokens one call may generate, per role (LLM_MAX_TOKENS_<ROLE>); a local server otherwise generates
# up to its context size.
DEFAULT_MAX_TOKENS = {"planner": 1024, "executor": 2048, "verifier": 1536, "composer": 2048,
                      "simple": 1024, "aiops": 2048}
MAX_TOKENS_LIMIT = 32_768
MIN_KEY_LENGTH_TO_SCRUB = 8  # shorter keys ("x", "EMPTY", "ollama") are placeholders, and masking them mangles text
# A 4xx/5xx whose body says the request itself is wrong: sending it again cannot help.
_INVALID_REQUEST_RE = re.compile(
    r"(?i)invalid[_ ]request|bad[_ ]request|validation error|unprocessable|invalid (?:value|type|parameter|argument|"
    r"schema|grammar|message|content)|is not (?:a )?valid|not supported|unsupported|extra inputs are not permitted|"
    # pydantic/FastAPI validation text that llama-cpp-python wraps into a 500, and the TypeError its chat
    # template raises on a message field it cannot render: the same request fails the same way again.
    r"input should be|field required|literal_error|TypeError|NoneType|can only concatenate")
# ... and says it is the response_format that the server does not take: ask for the next weaker level.
_RESPONSE_FORMAT_RE = re.compile(r"(?i)response_format|json_schema|json_object|grammar|guided|structured output")
_SECRET_PATTERNS = (
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
)


class OpenAIChatModel:
    """The `openai` client with per-role model names, explicit timeouts and our own bounded retries."""

    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        default_model: str,
        models: Mapping[str, str] | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float | None = None,
        max_tokens_param: str = "max_tokens",
        max_tokens: Mapping[str, int] | None = None,
        structured_output: str = "json_schema",
        tool_call_content: str = "empty",
        backoff_base: float = 0.25,
        backoff_cap: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Why it is long: its keyword settings (one per deployment option, docs/MODELS.md) and their checks."""
        if not api_key:
            raise ModelNonRetryableError("OpenAI API key is missing; set OPENAI_API_KEY",
                                         code="model_config_error")
        if not default_model:
            raise ModelNonRetryableError("Default model name is missing; set OPENAI_MODEL",
                                         code="model_config_error")
        unknown_roles = sorted(set(models or {}) - set(ROLES))
        if unknown_roles:
            raise ModelNonRetryableError(
                f"Model names given for unknown roles {unknown_roles}; roles are {', '.join(ROLES)}",
                code="model_config_error")
        if connect_timeout <= 0 or read_timeout <= 0:
            raise ModelNonRetryableError("Model timeouts must be positive seconds", code="model_config_error")
        if not 0 <= max_retries <= MAX_RETRIES_LIMIT:
            raise ModelNonRetryableError(f"max_retries must be between 0 and {MAX_RETRIES_LIMIT}",
                                         code="model_config_error")
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ModelNonRetryableError("max_tokens_param must be 'max_tokens' or 'max_completion_tokens'",
                                         code="model_config_error")
        if structured_output not in STRUCTURED_OUTPUT_LEVELS:
            raise ModelNonRetryableError(
                f"structured_output must be one of {', '.join(STRUCTURED_OUTPUT_LEVELS)}, got {structured_output!r}",
                code="model_config_error")
        if tool_call_content not in TOOL_CALL_CONTENT_MODES:
            raise ModelNonRetryableError(
                f"tool_call_content must be 'empty' or 'null', got {tool_call_content!r}", code="model_config_error")
        limits = {**DEFAULT_MAX_TOKENS, **dict(max_tokens or {})}
        bad_limits = {role: n for role, n in limits.items()
                      if role not in ROLES or isinstance(n, bool) or not isinstance(n, int)
                      or not 1 <= n <= MAX_TOKENS_LIMIT}
        if bad_limits:
            raise ModelNonRetryableError(
                f"max_tokens per role must be integers from 1 to {MAX_TOKENS_LIMIT} for roles {', '.join(ROLES)}; "
                f"got {bad_limits}", code="model_config_error")

        self.base_url = base_url or DEFAULT_BASE_URL
        self.default_model = default_model
        self.models = {role: (models or {}).get(role) or default_model for role in ROLES}
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self.max_retries = int(max_retries)
        self.temperature = temperature
        self.max_tokens_param = max_tokens_param
        self.max_tokens = limits
        self.structured_output = structured_output  # the configured level, the strongest ever sent
        self._structured_level = max(STRUCTURED_OUTPUT_LEVELS.index(structured_output),
                                     _LEARNED_LEVELS.get((self.base_url, structured_output), 0))
        self.tool_call_content = tool_call_content
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._sleep = sleep
        self._api_key = api_key
        # openai.Timeout is the httpx(2) Timeout class the installed SDK expects. Its default would
        # be a 600 s read timeout, so it is always set here. SDK retries are off: ours are counted.
        self.timeout = openai.Timeout(self.read_timeout, connect=self.connect_timeout)
        self._client = OpenAI(api_key=api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0)

    @property
    def client(self) -> OpenAI:
        return self._client

    def model_for(self, role: str) -> str:
        return self.models.get(role, self.default_model)

    def describe(self) -> dict[str, Any]:
        """What the audit trail records about this model; never the API key."""
        return {
            "provider": self.provider,
            "base_url": _without_userinfo(self.base_url),
            "models": dict(self.models),
            "default_model": self.default_model,
            "timeouts": {"connect": self.connect_timeout, "read": self.read_timeout},
            "max_retries": self.max_retries,
            "max_tokens": dict(self.max_tokens),
            "structured_output": self.structured_output,
            "structured_output_in_use": self.structured_output_in_use,
            "tool_call_content": self.tool_call_content,
        }

    @property
    def structured_output_in_use(self) -> str:
        """The level sent now: the configured one, or a weaker one after the server rejected it."""
        return STRUCTURED_OUTPUT_LEVELS[self._structured_level]

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(base_url={_without_userinfo(self.base_url)!r}, models={self.models!r})"

    # --- the call ---------------------------------------------------------------------------------

    def complete(self, request: ChatRequest) -> ChatReply:
        model_name = self.model_for(request.role)
        body, structured = self._request_body(request, model_name)
        started = time.perf_counter()
        retried: list[str] = []
        attempt = 0
        failures = 0  # attempts that count against max_retries (a weaker response_format does not)
        while True:
            attempt += 1
            error: ModelError | None = None
            timeout, capped = self._attempt_timeout(request, attempt=attempt, model_name=model_name, retried=retried)
            try:
                completion = self._client.chat.completions.create(**body, timeout=timeout)
            except (openai.OpenAIError, json.JSONDecodeError) as exc:
                error = self._model_error(exc, attempt=attempt, model_name=model_name)
                delay = self._retry_delay(attempt, exc)
                if capped and isinstance(exc, openai.APITimeoutError):
                    error = ModelDeadlineExceeded(
                        f"The run's wall-time budget ran out during the model call (cut short after "
                        f"{timeout.read:.1f}s, attempt {attempt})", attempts=attempt, model=model_name)
                elif structured and self._weaker_format_helps(exc, error):
                    retried.append(error.code)
                    self._structured_level += 1
                    _LEARNED_LEVELS[(self.base_url, self.structured_output)] = self._structured_level
                    body, structured = self._request_body(request, model_name)
                    continue
            if error is None:
                break
            failures += 1
            if not error.retryable or failures > self.max_retries:
                # Raised outside the except block so the SDK exception (whose text may echo
                # request details) is not chained onto ours.
                raise error
            retried.append(error.code)
            if request.deadline is not None and time.monotonic() + delay >= request.deadline:
                raise ModelDeadlineExceeded(
                    f"The run's wall-time budget leaves no time to retry after {error.code} "
                    f"(attempt {attempt}): {error.message}", attempts=attempt, model=model_name,
                    status_code=error.status_code)
            self._sleep(delay)
        latency_ms = (time.perf_counter() - started) * 1000.0
        return self._reply(request, completion, model_name=model_name, attempts=attempt,
                           latency_ms=latency_ms, retried=tuple(retried), structured=structured)

    def _attempt_timeout(self, request: ChatRequest, *, attempt: int, model_name: str,
                         retried: list[str]) -> tuple[Any, bool]:
        """This attempt's timeout: the configured one, cut to what is left of the run's deadline."""
        if request.deadline is None:
            return self.timeout, False
        remaining = request.deadline - time.monotonic()
        if remaining <= 0:
            last = f" after {retried[-1]}" if retried else ""
            raise ModelDeadlineExceeded(f"The run's wall-time budget is spent{last} (attempt {attempt} not sent)",
                                        attempts=max(attempt - 1, 1), model=model_name)
        if remaining >= self.read_timeout and remaining >= self.connect_timeout:
            return self.timeout, False
        return openai.Timeout(min(self.read_timeout, remaining),
                              connect=min(self.connect_timeout, remaining)), remaining < self.read_timeout

    def _weaker_format_helps(self, exc: Exception, error: ModelError) -> bool:
        """A server that rejects the response_format we asked for gets the next weaker level."""
        if error.retryable or self._structured_level >= len(STRUCTURED_OUTPUT_LEVELS) - 1:
            return False
        if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422, 500, 501):
            return False
        return bool(_RESPONSE_FORMAT_RE.search(_error_text(exc)))

    def _request_body(self, request: ChatRequest, model_name: str) -> tuple[dict[str, Any], str | None]:
        """The wire body, and how its JSON answer was asked for (None when no JSON is wanted)."""
        messages = [_wire_message(m, tool_call_content=self.tool_call_content) for m in request.messages]
        body: dict[str, Any] = {"model": model_name, "messages": messages}
        if request.tools:
            body["tools"] = bounded_tools(list(request.tools))
            body["tool_choice"] = "auto"
        structured = None
        if request.wants_json:
            structured = self.structured_output_in_use
            if structured in SCHEMA_LEVELS and request.output_schema is None:
                structured = "json_object"  # nothing to enforce beyond "some JSON"
            if structured == "json_schema":
                name, schema = request.output_schema
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": name, "schema": schema, "strict": False}}
            elif structured == "json_object_schema":
                body["response_format"] = {"type": "json_object", "schema": request.output_schema[1]}
            elif structured == "json_object":
                # The provider also needs the word "JSON" in a message; the prompts carry it.
                body["response_format"] = {"type": "json_object"}
            # "prompt": the prompt alone asks for JSON; the answer is validated like the others.
        max_tokens = request.max_tokens or self.max_tokens.get(request.role)
        if max_tokens:
            body[self.max_tokens_param] = max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body, structured

    def _reply(self, request: ChatRequest, completion: Any, *, model_name: str, attempts: int,
               latency_ms: float, retried: tuple[str, ...], structured: str | None = None) -> ChatReply:
        usage = _usage(getattr(completion, "usage", None))
        served_by = getattr(completion, "model", None) or model_name
        context = {"attempts": attempts, "model": served_by, "usage": usage}
        if not hasattr(completion, "choices"):  # e.g. an HTML error page served with status 200
            raise ModelInvalidOutputError("Model server sent a response that is not a chat completion",
                                          code="model_invalid_response", **context)
        choices = completion.choices or []
        if not choices or getattr(choices[0], "message", None) is None:
            raise ModelInvalidOutputError("Model returned no choices", code="model_empty_output", **context)
        choice = choices[0]
        message = choice.message
        content = message.content
        try:
            tool_calls = [_tool_call(call, index) for index, call in enumerate(message.tool_calls or [])]
            if content is None and not tool_calls:
                raise ModelInvalidOutputError(
                    f"Model returned neither content nor tool calls (finish_reason={choice.finish_reason!r})",
                    code="model_empty_output")
            reply = ChatReply(content=content, tool_calls=tool_calls, usage=usage, model=served_by,
                              latency_ms=latency_ms, finish_reason=choice.finish_reason, attempts=attempts,
                              retried_errors=retried, structured_output=structured)
            if request.wants_json and not tool_calls:
                reply.parse_json()
        except ModelInvalidOutputError as error:
            error.attempts, error.model, error.usage = attempts, served_by, usage
            error.message = self._scrub(error.message)
            error.args = (error.message,)
            if error.raw_output is None:
                error.raw_output = content
            raise
        return reply

    # --- failures and retries -----------------------------------------------------------------------

    def _model_error(self, exc: Exception, *, attempt: int, model_name: str) -> ModelError:
        context: dict[str, Any] = {"attempts": attempt, "model": model_name}
        if isinstance(exc, json.JSONDecodeError):  # the SDK parses the body itself; a proxy sent non-JSON
            return ModelInvalidOutputError(f"Model server sent a body that is not JSON ({exc.msg})",
                                           code="model_invalid_response", **context)
        detail = self._scrub(_upstream_message(exc))
        if isinstance(exc, openai.APITimeoutError):
            return ModelRetryableError(
                f"Model call timed out (connect {self.connect_timeout:g}s, read {self.read_timeout:g}s) "
                f"after {attempt} attempt(s)", code="model_timeout", **context)
        if isinstance(exc, openai.APIConnectionError):
            return ModelRetryableError(
                f"Could not connect to the model server at {_without_userinfo(self.base_url)} "
                f"after {attempt} attempt(s): {detail}", code="model_connection_error", **context)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            text = f"Model server answered HTTP {status} after {attempt} attempt(s): {detail}"
            context["status_code"] = status
            if status == 429:
                return ModelRetryableError(text, code="model_rate_limited", **context)
            if status == 408:
                return ModelRetryableError(text, code="model_timeout", **context)
            if status >= 500 and _says_invalid_request(exc):
                # e.g. llama.cpp answering 500 to a message shape it cannot template: a retry gets the same.
                return ModelNonRetryableError(text, code="model_bad_request", **context)
            if status >= 500:
                return ModelRetryableError(text, code="model_server_error", **context)
            if status == 401:
                return ModelNonRetryableError(text, code="model_auth_failed", **context)
            if status == 403:
                return ModelNonRetryableError(text, code="model_permission_denied", **context)
            if status == 404:
                return ModelNonRetryableError(text, code="model_not_found", **context)
            if status in (400, 422):
                return ModelNonRetryableError(text, code="model_bad_request", **context)
            return ModelNonRetryableError(text, code="model_client_error", **context)
        if isinstance(exc, openai.APIResponseValidationError):
            return ModelInvalidOutputError(f"Model server sent a response that is not a chat completion: {detail}",
                                           code="model_invalid_response", **context)
        return ModelNonRetryableError(f"Model client error ({type(exc).__name__}): {detail}",
                                      code="model_client_error", **context)

    def _retry_delay(self, attempt: int, exc: Exception) -> float:
        response = getattr(exc, "response", None)
        retry_after = _retry_after_seconds(response.headers) if response is not None else None
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.backoff_cap)
        backoff = min(self.backoff_base * 2 ** (attempt - 1), self.backoff_cap)
        return backoff * (1 - 0.25 * random.random())

    def _scrub(self, text: str) -> str:
        key = self._api_key
        if key and len(key) >= MIN_KEY_LENGTH_TO_SCRUB:
            # Only the key as a whole token: never a fragment inside another word.
            text = re.sub(rf"(?<![\w-]){re.escape(key)}(?![\w-])", "***", text)
        for pattern in _SECRET_PATTERNS:
            text = pattern.sub("***", text)
        return text


# --- factory --------------------------------------------------------------------------------------


def build_chat_model(config: Mapping[str, Any]) -> ChatModel:
    """The ChatModel named by plain settings values (LLM_PROVIDER offline|openai, OPENAI_*)."""
    provider = str(config.get("LLM_PROVIDER") or "offline").strip().lower()
    if provider == "offline":
        return _build_offline(config)
    if provider != "openai":
        raise ModelNonRetryableError(f"Unknown LLM_PROVIDER {provider!r}; use 'offline' or 'openai'",
                                     code="model_config_error")
    default_model = str(config.get("OPENAI_MODEL") or DEFAULT_MODEL)
    models = {role: str(name) for role, name in dict(config.get("OPENAI_MODELS") or {}).items() if name}
    for role in ROLES:
        per_role = config.get(f"OPENAI_MODEL_{role.upper()}")
        if per_role:
            models[role] = str(per_role)
    temperature = config.get("OPENAI_TEMPERATURE")
    return OpenAIChatModel(
        base_url=str(config.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL),
        api_key=str(config.get("OPENAI_API_KEY") or ""),
        default_model=default_model,
        models=models,
        connect_timeout=_number(config, "OPENAI_CONNECT_TIMEOUT", 5.0),
        read_timeout=_number(config, "OPENAI_READ_TIMEOUT", 60.0),
        max_retries=int(_number(config, "OPENAI_MAX_RETRIES", 2)),
        temperature=None if temperature in (None, "") else _number(config, "OPENAI_TEMPERATURE", 0.0),
        max_tokens_param=str(config.get("OPENAI_MAX_TOKENS_PARAM") or "max_tokens"),
        max_tokens=_max_tokens(config),
        structured_output=str(config.get("LLM_STRUCTURED_OUTPUT") or "json_schema").strip().lower(),
        tool_call_content=str(config.get("LLM_TOOL_CALL_CONTENT") or "empty").strip().lower(),
    )


def _max_tokens(config: Mapping[str, Any]) -> dict[str, int]:
    """LLM_MAX_TOKENS (a role -> tokens mapping) and LLM_MAX_TOKENS_<ROLE>, over the defaults."""
    limits = dict(DEFAULT_MAX_TOKENS)
    merged = {**dict(config.get("LLM_MAX_TOKENS") or {}),
              **{role: config.get(f"LLM_MAX_TOKENS_{role.upper()}") for role in ROLES
                 if config.get(f"LLM_MAX_TOKENS_{role.upper()}") not in (None, "")}}
    for role, value in merged.items():
        if value in (None, ""):
            continue
        key = f"LLM_MAX_TOKENS_{str(role).upper()}"
        number = _number({key: value}, key, 0)
        if number != int(number):
            raise ModelNonRetryableError(f"{key} must be a whole number, got {value!r}",
                                         code="model_config_error")
        limits[role] = int(number)
    return limits


def _build_offline(config: Mapping[str, Any]) -> ChatModel:
    try:
        from diagnosis.llm.offline import OfflineAnalyser  # imported late: it is a separate component
    except ImportError as exc:
        raise ModelNonRetryableError(
            f"LLM_PROVIDER=offline needs diagnosis.llm.offline.OfflineAnalyser, which cannot be imported "
            f"({exc}); install it or set LLM_PROVIDER=openai", code="model_config_error") from exc
    from_config = getattr(OfflineAnalyser, "from_config", None)
    return from_config(config) if callable(from_config) else OfflineAnalyser()


def _number(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ModelNonRetryableError(f"{key} must be a number, got {value!r}", code="model_config_error") from None
    if not math.isfinite(number):
        raise ModelNonRetryableError(f"{key} must be a finite number, got {value!r}", code="model_config_error")
    return number


# --- helpers ----------------------------------------------------------------------------------------


def _wire_message(message: Mapping[str, Any], *, tool_call_content: str = "empty") -> dict[str, Any]:
    wire = dict(message)
    # An assistant turn that only calls tools has no text. OpenAI takes null or "", but several
    # local servers (llama-cpp-python) answer null with HTTP 500: send "" unless told otherwise.
    if wire.get("role") == "assistant" and wire.get("tool_calls") and wire.get("content") is None \
            and tool_call_content == "empty":
        wire["content"] = ""
    # Tool results must be strings on the wire; tools hand back JSON objects.
    if wire.get("role") == "tool" and not isinstance(wire.get("content"), str):
        wire["content"] = json.dumps(wire.get("content"), ensure_ascii=False, default=str)
    return wire


def _tool_call(call: Any, index: int) -> ToolCall:
    function = getattr(call, "function", None)
    name = getattr(function, "name", None) if function is not None else None
    if not name:
        raise ModelInvalidOutputError(f"Tool call #{index} has no function name", code="model_invalid_tool_call")
    raw = getattr(function, "arguments", None) or ""
    # Some servers send "" for a call without arguments; that is an empty object, not an error.
    arguments = {} if not raw.strip() else parse_json_object(raw, what=f"Arguments of tool call '{name}'",
                                                              field=name)
    return ToolCall(id=getattr(call, "id", None) or f"call_{index}", name=name, arguments=arguments,
                    raw_arguments=raw)


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    prompt = int(getattr(raw, "prompt_tokens", 0) or 0)
    completion = int(getattr(raw, "completion_tokens", 0) or 0)
    total = int(getattr(raw, "total_tokens", 0) or 0) or prompt + completion
    return Usage(prompt, completion, total)


def _error_text(exc: Exception) -> str:
    """Everything the error body says (message, type, code, param), for classifying it."""
    body = getattr(exc, "body", None)
    parts = [str(getattr(exc, "message", "") or "")]
    if isinstance(body, dict):
        parts += [str(body.get(key) or "") for key in ("message", "type", "code", "param")]
        detail = body.get("detail")  # FastAPI-style validation errors
        if detail:
            parts.append(json.dumps(detail, default=str)[:1000])
    elif body is not None:
        parts.append(str(body)[:1000])
    return " ".join(parts)


def _says_invalid_request(exc: Exception) -> bool:
    return bool(_INVALID_REQUEST_RE.search(_error_text(exc)))


def _upstream_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and body.get("message"):
        message = str(body["message"])
    else:
        message = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    return message[:500]


def _retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    try:
        if headers.get("retry-after-ms"):
            seconds = float(headers["retry-after-ms"]) / 1000.0
        elif headers.get("retry-after"):
            value = headers["retry-after"]
            try:
                seconds = float(value)
            except ValueError:
                seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        else:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) else None


def _without_userinfo(url: str) -> str:
    return re.sub(r"^(\w+://)[^/@]*@", r"\1", url)
