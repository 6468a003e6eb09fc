"""redact_text / redact_value: every secret kind is masked, normal log lines are left alone."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.support.hypo import examples
from diagnosis.redaction import (
    is_secret_key,
    redact_text,
    redact_text_counted,
    redact_value,
    redact_value_counted,
)

# (text with a canary, the secret part that must disappear, the marker kind, context that must survive)
CANARIES = [
    ("calling with sk-canary0123456789abcdefABCDEF ok", "sk-canary0123456789abcdefABCDEF", "openai_key", "calling with"),
    ("key=sk-proj-Canary_0123456789-abcdefghijklmnopqrstuv", "Canary_0123456789", "openai_key", "key="),
    ("AWS_ACCESS_KEY_ID AKIACANARY0123456789 loaded", "AKIACANARY0123456789", "aws_access_key", "loaded"),
    ("sts creds ASIACANARY9876543210 done", "ASIACANARY9876543210", "aws_access_key", "sts creds"),
    ("maps key AIzaSyCanary0123456789abcdefghijklmnopq", "Canary0123456789", "google_api_key", "maps key"),
    ("push with ghp_Canary0123456789abcdefghijklmnopqrstuv", "Canary0123456789abcdef", "github_token", "push with"),
    ("pat github_pat_11CANARY0_abcdefghijklmnopqrstuvwxyz", "CANARY0_abcdefghij", "github_token", "pat"),
    ("slack xoxb-123456789012-CanaryToken99 posted", "CanaryToken99", "slack_token", "posted"),
    ("gitlab glpat-Canary0123456789abcdef clone", "Canary0123456789", "gitlab_token", "clone"),
    ("stripe sk_live_Canary0123456789abcdef charge", "Canary0123456789", "stripe_key", "charge"),
    ("hf hf_Canary0123456789abcdefghijklmnopqrst pull", "Canary0123456789", "huggingface_token", "pull"),
    ("POST /pay Authorization: Bearer canaryTok3n.abc-def_123 -> 401", "canaryTok3n", "authorization",
     "Authorization: Bearer"),
    ('{"headers": {"Authorization": "Basic Y2FuYXJ5OnB3ZA=="}}', "Y2FuYXJ5OnB3ZA==", "authorization", '"Authorization": "Basic '),
    ("retrying with bearer c4n4ryT0kenValue9 now", "c4n4ryT0kenValue9", "bearer_token", "retrying with bearer"),
    ("connect mysql://payments:CanaryPassw0rd!@db.internal:3306/pay failed", "CanaryPassw0rd!", "url_password",
     "mysql://payments:"),
    ("broker redis://:CanaryRedisPw@redis:6379/0 up", "CanaryRedisPw", "url_password", "@redis:6379/0"),
    ("DB_PASSWORD=CanaryPw123 started", "CanaryPw123", "secret", "DB_PASSWORD="),
    ("password: Canary Pw", "Canary", "secret", "password: "),
    ('{"password": "canary pw with spaces", "user": "app"}', "canary pw", "secret", '"user": "app"'),
    ("api_key=CanaryApiKey42&region=eu", "CanaryApiKey42", "secret", "&region=eu"),
    ("clientSecret: CanarySecret42, next", "CanarySecret42", "secret", ", next"),
    ("X-Api-Key: CanaryHeaderKey", "CanaryHeaderKey", "secret", "X-Api-Key:"),
    ("aws_secret_access_key = wJalrCanaryEXAMPLEKEY", "wJalrCanaryEXAMPLEKEY", "secret", "aws_secret_access_key"),
    ("access_token='canary-access-token'", "canary-access-token", "secret", "access_token="),
    ('log "{\\"token\\": \\"CanaryEscaped\\"}"', "CanaryEscaped", "secret", '{\\"token\\": \\"'),
    ("session eyJhbGciOiJIUzI1NiJ9.eyJjYW5hcnkiOiJ5ZXMifQ.c2lnbmF0dXJlQ2FuYXJ5 expired",
     "eyJjYW5hcnkiOiJ5ZXMifQ", "jwt", "expired"),
    ("key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpCanaryBody\nQUJDREVG==\n-----END RSA PRIVATE KEY-----\nloaded",
     "MIIEpCanaryBody", "private_key", "loaded"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAACanary", "ZXktdjEAAAAACanary", "private_key", ""),
    ("webhook https://hooks.slack.com/services/T000/B000/CanaryHook sent", "CanaryHook", "slack_webhook", "sent"),
]


@pytest.mark.parametrize(("text", "secret", "kind", "context"), CANARIES, ids=[c[2] or c[1][:8] for c in CANARIES])
def test_each_secret_kind_is_masked_and_its_context_kept(text, secret, kind, context):
    redacted, count = redact_text_counted(text)
    assert secret not in redacted
    assert count >= 1
    if kind:
        assert f"[REDACTED:{kind}]" in redacted
    assert context in redacted


@pytest.mark.parametrize(("text", "secret", "kind", "context"), CANARIES, ids=[c[2] or c[1][:8] for c in CANARIES])
def test_a_secret_deep_inside_a_long_text_is_masked_too(text, secret, kind, context):
    filler = "2024-05-01T10:02:03Z payment-service INFO request served in 12ms\n" * 200
    redacted, count = redact_text_counted(filler + text + "\n" + filler)
    assert secret not in redacted
    assert count >= 1
    assert redacted.startswith(filler) and redacted.endswith(filler)


NORMAL_LINES = [
    "2024-05-01T10:02:03.123Z payment-service ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms",
    "2024-05-01 10:02:03,123 WARN [order-service] retry 2/3 for http://inventory:8080/reserve?sku=AB-12&qty=3",
    "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7 inv-3f9a2c1b run-0123456789abcdef0123456789abcdef",
    "request 123e4567-e89b-12d3-a456-426614174000 took 45ms; max_tokens=512 prompt_tokens: 1024 token_count=7",
    "FATAL: password authentication failed for user \"payments\"",
    "disk-usage-high on task-runner-0001 in asia-east1-b; key=order:42 cache hit ratio 0.97",
    "kubelet: Back-off restarting failed container payment in pod payment-7d9f8c6b5-x2x4q (OOMKilled, exit code 137)",
    "secretName: db-credentials mounted at /etc/secrets; token_type=bearer expires_in=3600",
    "the bearer of bad news: upstream 503 Service Unavailable from https://api.example.com/v1/charge",
    "db_pool_active_connections{service=\"payment-service\"} max 50 at 10:01, baseline 12",
    "支付服务数据库连接池耗尽 (HikariPool-1), 请求超时 30000ms",
    "password: null; secret=true; token=",
]


@pytest.mark.parametrize("line", NORMAL_LINES)
def test_a_normal_log_line_is_left_untouched(line):
    assert redact_text_counted(line) == (line, 0)


def test_redacting_twice_changes_nothing_more():
    text = "\n".join(c[0] for c in CANARIES)
    once = redact_text(text)
    assert redact_text_counted(once) == (once, 0)


def test_redact_value_masks_secret_keys_entirely_and_recurses():
    value = {
        "password": "hunter2",
        "apiKey": "k-123",
        "headers": {"Authorization": "Bearer abc", "Accept": "application/json"},
        "credentials": {"username": "app", "pin": 1234, "enabled": True},
        "records": [{"message": "login with password=CanaryPw1 ok", "level": "INFO"}],
        "max_tokens": 512,
        "token_type": "bearer",
        "secret_name": "db-creds",
        "empty_token": "",
        ("tuple",): "kept",
    }
    redacted, count = redact_value_counted(value)
    assert redacted["password"] == "[REDACTED:secret]"
    assert redacted["apiKey"] == "[REDACTED:secret]"
    assert redacted["headers"] == {"Authorization": "[REDACTED:secret]", "Accept": "application/json"}
    assert redacted["credentials"] == {"username": "[REDACTED:secret]", "pin": "[REDACTED:secret]", "enabled": True}
    assert redacted["records"][0] == {"message": "login with password=[REDACTED:secret] ok", "level": "INFO"}
    assert (redacted["max_tokens"], redacted["token_type"], redacted["secret_name"]) == (512, "bearer", "db-creds")
    assert redacted["empty_token"] == ""
    assert redacted[("tuple",)] == "kept"
    assert count == 6
    assert value["password"] == "hunter2", "the input is not modified"


def test_redact_value_leaves_non_secret_scalars_and_types_alone():
    value = [1, 2.5, None, True, ("a", "sk-canary0123456789abcdefABCDEF")]
    assert redact_value(value) == [1, 2.5, None, True, ("a", "[REDACTED:openai_key]")]


@pytest.mark.parametrize(("key", "secret"), [
    ("password", True), ("DB_PASSWORD", True), ("apiKey", True), ("x-api-key", True), ("AWS_SECRET_ACCESS_KEY", True),
    ("client_secret", True), ("access_token", True), ("Authorization", True), ("Set-Cookie", True),
    ("max_tokens", False), ("prompt_tokens", False), ("token_type", False), ("secret_name", False), ("key", False),
    ("message", False), ("__name__", False), ("", False),
])
def test_is_secret_key_looks_at_the_last_word_of_the_key(key, secret):
    assert is_secret_key(key) is secret


def test_redact_text_rejects_non_strings():
    with pytest.raises(TypeError):
        redact_text(b"password=x")  # type: ignore[arg-type]


def test_a_redacted_tool_result_stays_json_serialisable():
    result = {"records": [{"message": "Authorization: Bearer abc.def-123", "count": 3, "ok": None}], "password": "x"}
    redacted = redact_value(result)
    assert json.loads(json.dumps(redacted)) == redacted
    assert redacted == {"records": [{"message": "Authorization: Bearer [REDACTED:authorization]", "count": 3, "ok": None}],
                        "password": "[REDACTED:secret]"}


@settings(max_examples=examples(300), deadline=None)
@given(st.text())
def test_redact_text_never_raises_on_random_text(text):
    redacted, count = redact_text_counted(text)
    assert isinstance(redacted, str) and count <= redacted.count("[REDACTED:")  # each redaction leaves its marker
    if count == 0:
        assert redacted == text


SEPARATORS = st.sampled_from([" ", "\n", "\t", " | ", ", ", "; "])


@settings(max_examples=examples(300), deadline=None)
@given(prefix=st.text(), suffix=st.text(), left=SEPARATORS, right=SEPARATORS, canary=st.sampled_from(CANARIES))
def test_a_canary_never_survives_whatever_text_surrounds_it(prefix, suffix, left, right, canary):
    text, secret, _, _ = canary
    assume(secret not in prefix and secret not in suffix)
    assert secret not in redact_text(prefix + left + text + right + suffix)
