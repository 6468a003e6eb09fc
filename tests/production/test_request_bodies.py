"""Request bodies are guarded before they are read, on the production server (gunicorn + uvicorn workers,
config/asgi.py -> diagnosis/api/body_limit.py): an oversized body is refused 413 as it streams in, a body
without valid credentials 401 before it is read, a chunked body within the limit is parsed (the Alertmanager
webhook included), and no body is ever written to a file (the server's TMPDIR stays empty)."""

from __future__ import annotations

import json
import socket
import urllib.parse

import pytest

from diagnosis.models import DiagnosisRun
from tests.aiops.conftest import scenario_alerts, webhook
from tests.production.test_stack import token_of

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

LIMIT = 256 * 1024
HUGE = 300 * 1024 * 1024  # 300 MB
PAYMENT = scenario_alerts("payment-db-pool-exhaustion")


@pytest.fixture
def web(tmp_path):
    from tests.support.server import production_server
    from tests.support.worker import worker_env

    tmpdir = tmp_path / "web-tmp"
    tmpdir.mkdir()
    env = worker_env(STATIC_ROOT=str(tmp_path / "static"), TMPDIR=str(tmpdir))
    with production_server(env=env, workers=1, log_path=tmp_path / "web.log") as proc:
        proc.tmpdir = tmpdir
        yield proc


def connect(web) -> socket.socket:
    netloc = urllib.parse.urlsplit(web.base_url).netloc
    host, port = netloc.split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    return sock


def head(method: str, path: str, headers: dict) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode()


def read_response(sock: socket.socket) -> tuple[int, dict, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head_part, _, rest = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest[:length]


def chunked(body: bytes, size: int = 16 * 1024) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"


def error_of(body: bytes) -> dict:
    return json.loads(body)["error"]


def test_a_300_mb_body_is_refused_413_before_any_of_it_is_sent(web, alice):
    sock = connect(web)
    sock.sendall(head("POST", "/api/chat", {"Authorization": f"Token {token_of(alice)}", "Content-Type": "application/json",
                                            "Content-Length": str(HUGE)}))
    status, headers, body = read_response(sock)  # answered with no byte of the body sent
    assert status == 413 and headers["content-type"] == "application/json"
    assert error_of(body)["code"] == "payload_too_large"
    assert list(web.tmpdir.iterdir()) == []
    assert DiagnosisRun.objects.count() == 0


def test_a_300_mb_body_without_credentials_is_refused_before_it_is_read(web):
    for auth in ({}, {"Authorization": "Token not-a-real-token-0123456789"}, {"Authorization": "Basic dXNlcjpwYXNz"}):
        sock = connect(web)
        sock.sendall(head("POST", "/api/ai_ops", {**auth, "Content-Type": "application/json", "Transfer-Encoding": "chunked"}))
        sock.sendall(b"10000\r\n" + b"x" * 0x10000 + b"\r\n")  # a first chunk of a body that would go on for 300 MB
        status, headers, body = read_response(sock)
        assert status == 401, (auth, body)
        assert error_of(body)["code"] == "not_authenticated" and headers["www-authenticate"] == "Token"
    assert list(web.tmpdir.iterdir()) == []


def test_a_chunked_body_over_the_limit_is_refused_413_as_it_streams_in(web, alice):
    sock = connect(web)
    sock.sendall(head("POST", "/api/ai_ops?stream=false", {"Authorization": f"Bearer {token_of(alice)}",
                                                           "Content-Type": "application/json", "Transfer-Encoding": "chunked"}))
    over = json.dumps(webhook(PAYMENT)).encode()
    over = over + b" " * (LIMIT + 1 - len(over))  # valid JSON, one byte over the limit
    sock.sendall(chunked(over)[:-5])  # the whole body but its last chunk: the server must not need the end
    status, _, body = read_response(sock)
    assert status == 413 and error_of(body)["code"] == "payload_too_large"
    assert DiagnosisRun.objects.count() == 0
    assert list(web.tmpdir.iterdir()) == []


def test_a_chunked_alertmanager_webhook_within_the_limit_is_parsed_and_its_alerts_analysed(web, alice):
    payload = json.dumps(webhook(PAYMENT)).encode()
    sock = connect(web)
    sock.sendall(head("POST", "/api/ai_ops?stream=false", {"Authorization": f"Bearer {token_of(alice)}",
                                                           "Content-Type": "application/json", "Transfer-Encoding": "chunked"}))
    sock.sendall(chunked(payload, size=97))
    status, _, body = read_response(sock)
    assert status == 202, body
    run = DiagnosisRun.objects.get(run_id=json.loads(body)["runId"])
    assert run.agent_flow == "AI_OPS" and run.input["source"] == "alertmanager"
    assert [a["alertname"] for a in run.input["alerts"]] == [a["labels"]["alertname"] for a in PAYMENT]


def test_a_body_just_under_the_limit_is_parsed_in_memory(web, alice):
    question = "Why is payment-service failing?"
    payload = json.dumps({"question": question, "wait": False, "padding": " " * (LIMIT - 200)}).encode()
    assert len(payload) <= LIMIT
    sock = connect(web)
    sock.sendall(head("POST", "/api/chat", {"Authorization": f"Token {token_of(alice)}", "Content-Type": "application/json",
                                            "Transfer-Encoding": "chunked"}) + chunked(payload))
    status, _, body = read_response(sock)
    assert status == 202, body
    assert DiagnosisRun.objects.get(run_id=json.loads(body)["runId"]).question == question
    assert list(web.tmpdir.iterdir()) == []
