"""A scripted OpenAI-compatible Chat Completions server for tests (stdlib only, 127.0.0.1, free port).

Point a real `openai` client (or OpenAIChatModel) at ``server.base_url`` and script what it answers:

    with FakeOpenAI() as server:
        server.enqueue(Reply.error(429, retry_after=0), Reply.text("hello"))  # any role, in order
        server.enqueue(Reply.json({"verdict": "PASS"}), role="verifier")      # only for the verifier
        server.always(lambda request: Reply.text(f"echo {request.last_user_message}"))  # the default
        ...
        assert len(server.requests) == 2 and "secret" not in server.requests[0].raw_text

A request's role is read from the prompt header (``<!-- prompt: planner v1 -->``) in its first
system/developer message, else from ``model_roles`` (model name -> role). The answer is the first
of: the role's queue, the shared queue, the role's ``always``, the shared ``always``; with nothing
scripted the server answers HTTP 418 so the test fails loudly with a non-retryable error.
"""
from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Union

CHAT_PATH = "/v1/chat/completions"
ROLE_MARKER = re.compile(r"<!--\s*prompt:\s*([A-Za-z_][\w-]*)")
_DEFAULT_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
                        404: "invalid_request_error", 429: "rate_limit_error"}
_DEFAULT_ERROR_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with the class methods rather than by hand."""

    status: int = 200
    content: str | None = None
    calls: tuple[dict[str, Any], ...] = ()  # OpenAI-shaped tool calls
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    error_body: dict[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    stall_seconds: float = 0.0
    trickle_seconds: float = 0.0
    raw_body: bytes | None = None
    model: str | None = None

    @classmethod
    def text(cls, content: str, *, finish_reason: str = "stop", usage: tuple[int, int] | None = None,
             model: str | None = None) -> Reply:
        return cls(content=content, finish_reason=finish_reason, usage=_usage_dict(usage), model=model)

    @classmethod
    def json(cls, obj: Any, *, fenced: bool = False, usage: tuple[int, int] | None = None) -> Reply:
        """A final answer whose content is `obj` serialised (optionally inside a ```json fence)."""
        text = json.dumps(obj, ensure_ascii=False)
        return cls.text(f"```json\n{text}\n```" if fenced else text, usage=usage)

    @classmethod
    def tool_calls(cls, *calls: tuple, content: str | None = None,
                   usage: tuple[int, int] | None = None) -> Reply:
        """Calls as ``(name, args)`` or ``(name, args, call_id)``; a str `args` is sent verbatim."""
        wire = []
        for index, call in enumerate(calls):
            name, args = call[0], call[1]
            call_id = call[2] if len(call) > 2 else None
            wire.append({
                "id": call_id or f"call_{index}",
                "type": "function",
                "function": {"name": name,
                             "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)},
            })
        return cls(content=content, calls=tuple(wire), finish_reason="tool_calls", usage=_usage_dict(usage))

    @classmethod
    def malformed_json(cls, text: str = '{"verdict": "PASS", "score": 0.9, "claim_checks": [') -> Reply:
        """Content that claims to be JSON but does not parse."""
        return cls.text(text)

    @classmethod
    def invalid_tool_args(cls, name: str = "query_logs", raw_arguments: str = '{"service": "payment-service",') -> Reply:
        return cls.tool_calls((name, raw_arguments))

    @classmethod
    def error(cls, status: int, message: str | None = None, *, type: str | None = None, code: str | None = None,
              retry_after: float | None = None, headers: dict[str, str] | None = None) -> Reply:
        """An HTTP error with the OpenAI error body ``{"error": {message, type, param, code}}``."""
        error_type = type or _DEFAULT_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        body = {"message": message or f"fake_openai scripted HTTP {status}", "type": error_type, "param": None,
                "code": code if code is not None else _DEFAULT_ERROR_CODES.get(status)}
        extra = dict(headers or {})
        if retry_after is not None:
            extra["retry-after"] = f"{retry_after:g}"
        return cls(status=status, error_body=body, headers=tuple(extra.items()))

    @classmethod
    def stall(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Wait `seconds` before answering (`then`, or a short text); a client timeout cuts it off."""
        return replace(then or cls.text("answer after a stall"), stall_seconds=seconds)

    @classmethod
    def trickle(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Answer slowly: the headers at once, then one byte of leading JSON whitespace a second for
        `seconds`, then the body. A long call that no read timeout cuts (a slow model streaming)."""
        return replace(then or cls.text("answer after a slow call"), trickle_seconds=seconds)

    @classmethod
    def raw(cls, body: bytes | str, *, status: int = 200, content_type: str = "application/json") -> Reply:
        """A verbatim HTTP body, e.g. a non-JSON 200 from a broken proxy."""
        data = body.encode() if isinstance(body, str) else body
        return cls(status=status, raw_body=data, headers=(("content-type", content_type),))


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, as sent on the wire."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names; includes `authorization: Bearer <key>` by design
    raw: bytes
    body: dict[str, Any] | None
    role: str | None
    received_at: float = field(default_factory=time.time)

    @property
    def raw_text(self) -> str:
        """The body as text: search this (not `headers`) to prove nothing secret was sent to the model."""
        return self.raw.decode("utf-8", errors="replace")

    @property
    def model(self) -> str | None:
        return (self.body or {}).get("model")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("function", {}).get("name") for tool in self.tools]

    @property
    def last_user_message(self) -> str | None:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return message.get("content")
        return None

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """The ``role: tool`` messages, in order (what the client sent back after tool calls)."""
        return [m for m in self.messages if m.get("role") == "tool"]


Responder = Union[Reply, Callable[[RecordedRequest], Reply]]


class FakeOpenAI:
    """A background ThreadingHTTPServer that answers POST /v1/chat/completions from a script."""

    def __init__(self, *, model_roles: dict[str, str] | None = None, host: str = "127.0.0.1") -> None:
        self.model_roles = dict(model_roles or {})
        self._host = host
        self._lock = threading.Lock()
        self._queues: dict[str | None, list[Responder]] = {}
        self._always: dict[str | None, Responder] = {}
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.responder_errors: list[Exception] = []

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._server is None:
            self._closing.clear()
            self._server = ThreadingHTTPServer((self._host, 0), _handler_for(self))
            self._server.daemon_threads = True
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="fake-openai", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wakes stalled handlers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started; use it as a context manager or call start()")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """What to pass as OPENAI_BASE_URL / base_url: ``http://127.0.0.1:<port>/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    # --- scripting ----------------------------------------------------------------------------------

    def enqueue(self, *replies: Responder, role: str | None = None) -> FakeOpenAI:
        """Answer the next requests (of `role`, or of any role) with these, once each, in order."""
        with self._lock:
            self._queues.setdefault(role, []).extend(replies)
        return self

    def always(self, reply: Responder, *, role: str | None = None) -> FakeOpenAI:
        """Answer with this whenever the queues have nothing for the request (not consumed)."""
        with self._lock:
            self._always[role] = reply
        return self

    def pending(self, role: str | None = None) -> int:
        """How many queued replies (for `role`; shared ones with role=None) are still unused."""
        with self._lock:
            return len(self._queues.get(role, []))

    def assert_all_consumed(self) -> None:
        with self._lock:
            left = {role or "*": len(queue) for role, queue in self._queues.items() if queue}
        assert not left, f"fake_openai: scripted replies never requested: {left}"

    def reset(self) -> None:
        with self._lock:
            self._queues.clear()
            self._always.clear()
            self._requests.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every chat-completions request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, role: str) -> list[RecordedRequest]:
        return [request for request in self.requests if request.role == role]

    # --- serving ------------------------------------------------------------------------------------

    def _role_of(self, body: dict[str, Any] | None) -> str | None:
        if not body:
            return None
        for message in body.get("messages") or []:
            if message.get("role") in ("system", "developer"):
                match = ROLE_MARKER.search(_text_of(message.get("content")))
                if match:
                    return match.group(1)
                break
        return self.model_roles.get(body.get("model"))

    def _record_and_pick(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            responder: Responder | None = None
            for key in ([request.role] if request.role is not None else []) + [None]:
                queue = self._queues.get(key)
                if queue:
                    responder = queue.pop(0)
                    break
            else:
                if request.role is not None:
                    responder = self._always.get(request.role)
                if responder is None:
                    responder = self._always.get(None)
        if responder is None:
            return Reply.error(418, f"fake_openai: nothing scripted for role {request.role!r}", type="fake_unscripted")
        if not callable(responder):
            return responder
        try:
            return responder(request)
        except Exception as exc:  # a broken test responder must fail the test, not look like a 5xx to retry
            with self._lock:
                self.responder_errors.append(exc)
            return Reply.error(418, f"fake_openai: responder raised {type(exc).__name__}: {exc}",
                               type="fake_responder_error")

    def _completion(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if reply.calls:
            message["tool_calls"] = list(reply.calls)
        completion_text = (reply.content or "") + "".join(c["function"]["arguments"] for c in reply.calls)
        usage = reply.usage or _usage_dict((max(1, len(json.dumps(request.messages)) // 4),
                                            max(1, len(completion_text) // 4)))
        return {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or request.model or "fake-model",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": reply.finish_reason or ("tool_calls" if reply.calls else "stop")}],
            "usage": usage,
            "system_fingerprint": "fp_fake_openai",
        }


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "FakeOpenAI/1"

        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            if path != CHAT_PATH:
                self._send(404, _error_body(f"fake_openai serves only {CHAT_PATH}, not {path}"))
                return
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = RecordedRequest(method="POST", path=path,
                                      headers={k.lower(): v for k, v in self.headers.items()},
                                      raw=raw, body=body, role=fake._role_of(body))
            reply = fake._record_and_pick(request)
            if reply.stall_seconds and fake._closing.wait(reply.stall_seconds):
                return  # shutting down: drop the connection
            if reply.trickle_seconds:
                self._send(reply.status, fake._completion(request, reply), reply.headers, trickle=reply.trickle_seconds)
            elif reply.raw_body is not None:
                self._send(reply.status, reply.raw_body, reply.headers)
            elif reply.error_body is not None:
                self._send(reply.status, {"error": reply.error_body}, reply.headers)
            else:
                self._send(reply.status, fake._completion(request, reply), reply.headers)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.split("?", 1)[0] == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model",
                                                             "created": 0, "owned_by": "fake"}]})
            else:
                self._send(404, _error_body(f"fake_openai: no route {self.path}"))

        def _send(self, status: int, payload: Any, headers: Iterable[tuple[str, str]] = (), trickle: float = 0.0) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            ticks = int(trickle)
            header_map = {"content-type": "application/json", **{k.lower(): v for k, v in headers}}
            try:
                self.send_response(status)
                for name, value in header_map.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(ticks + len(data)))
                self.end_headers()
                for _ in range(ticks):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    if fake._closing.wait(1.0):
                        return
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout): that is what the test wanted

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


def _error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


def _usage_dict(usage: tuple[int, int] | None) -> dict[str, int] | None:
    if usage is None:
        return None
    prompt, completion = usage
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def answer_plan(payload: dict, *, next_steps: list | None = None, root: int = 1) -> dict:
    """An honest composer's ``answer_plan_v1`` for a composer request payload: the first ``root``
    verified claims as the root cause, the others as evidence."""
    ids = [c["claim_id"] for c in (payload.get("verified_executor_output") or {}).get("claims") or []]
    return {"version": "answer_plan_v1", "root_cause": ids[:root], "evidence": ids[root:], "impact": [],
            "timeline": [], "next_steps": list(next_steps or [])}
