"""Masking everywhere: a secret in any of the supported formats, inside any surrounding text, plain or
JSON-escaped (once or twice, as a tool result inside a model request is), never survives the redactor;
and every free text a user supplies is masked before it is stored."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from diagnosis.redaction import redact_text, redact_value

MARKER = re.compile(r"\[REDACTED:[a-z_]+\]")
SECRET = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789", min_size=12, max_size=40)
CASED = st.sampled_from([str.lower, str.upper, str.title, lambda k: k])


@st.composite
def secret_in_format(draw) -> tuple[str, str]:
    """(text holding the secret, the secret)."""
    value = draw(SECRET)
    case = draw(CASED)
    kind = draw(st.sampled_from([
        "odbc", "odbc_braced", "assignment", "json_pair", "url", "bearer", "authorization", "pem", "aws", "openai",
        "github", "jwt",
    ]))
    if kind == "odbc":
        key = case(draw(st.sampled_from(["pwd", "password"])))
        return f"Server=db.internal,1433;Database=shop;{case('uid')}=sa;{key}={value};Encrypt=yes", value
    if kind == "odbc_braced":
        return f"Driver={{ODBC Driver 18}};Uid=sa;{case('pwd')}={{{value};x}};", value
    if kind == "assignment":
        key = case(draw(st.sampled_from(["password", "passwd", "db_password", "secret", "api_key", "token", "pwd"])))
        sep = draw(st.sampled_from(["=", ": ", " = ", ":"]))
        return f"{key}{sep}{value}", value
    if kind == "json_pair":
        key = case(draw(st.sampled_from(["password", "Pwd", "clientSecret", "apiKey", "access_token"])))
        return json.dumps({key: value, "host": "db"}), value
    if kind == "url":
        scheme = draw(st.sampled_from(["postgres", "mysql", "redis", "amqp", "https", "mongodb+srv"]))
        return f"{scheme}://admin:{value}@db.internal:5432/app", value
    if kind == "bearer":
        return f"curl -H 'Bearer {value}9'", value + "9"
    if kind == "authorization":
        return f"{case('authorization')}: Basic {value}", value
    if kind == "pem":
        body = (value * 3)[:64]
        return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n{body}\n-----END RSA PRIVATE KEY-----", body
    if kind == "aws":
        key = "AKIA" + (value.upper() + "ABCDEFGHIJKLMNOP")[:16]
        return f"aws_access_key_id={key}", key
    if kind == "openai":
        return f"key is sk-{value}{value}", f"sk-{value}{value}"
    if kind == "github":
        token = "ghp_" + (value * 3)[:36]
        return f"GITHUB_TOKEN {token}", token
    token = f"eyJ{value}.{value}.{value}"
    return f"jwt {token}", token


AROUND = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(secret=secret_in_format(), prefix=AROUND, suffix=AROUND,
       escaping=st.sampled_from(["plain", "json", "json_twice", "value"]))
def test_a_secret_in_any_format_never_survives_plain_or_json_escaped(secret, prefix, suffix, escaping):
    text, value = secret
    assume(value not in prefix and value not in suffix)
    assume(value not in text.replace(value, "\x00"))  # e.g. a drawn "authorizatio" inside "authorization:"
    assume(not prefix[-1:].isalnum() and not suffix[:1].isalnum())  # a secret glued to a word is another token
    line = f"{prefix} {text} {suffix}"
    if escaping == "plain":
        out = redact_text(line)
    elif escaping == "json":
        out = redact_text(json.dumps({"message": line}))
    elif escaping == "json_twice":
        out = redact_text(json.dumps({"content": json.dumps({"message": line})}))
    else:
        out = json.dumps(redact_value({"records": [{"message": line}]}))
    assert value not in MARKER.sub("", out), (escaping, line, out)


@pytest.mark.django_db
def test_a_feedback_comment_is_masked_before_it_is_stored(alice):
    from diagnosis.models import DiagnosisRun
    from diagnosis.services.feedback import run_feedback_give
    from tests.factories import ChatSessionFactory, DiagnosisRunFactory

    run = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), status=DiagnosisRun.Status.SUCCESS, answer="a")
    run_feedback_give(user=alice, run=run, feedback="not_useful", comment="worked; conn was Server=db;Uid=sa;Pwd=Hunter2Canary;")
    run.refresh_from_db()
    assert "Hunter2Canary" not in run.feedback_comment and "Pwd=[REDACTED:secret]" in run.feedback_comment
