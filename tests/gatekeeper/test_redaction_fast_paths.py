"""The redactor's fast paths (the cache of clean texts, plain leaves skipped by type) mask exactly what
every rule run on every string masks: never less, never anything else."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnosis import redaction
from diagnosis.redaction import _apply_rules, _mask_all, is_secret_key, redact_text_counted, redact_value_counted
from tests.gatekeeper.test_redaction import CANARIES, NORMAL_LINES
from tests.security.test_masking_properties import secret_in_format
from tests.support.hypo import examples

# Every pattern of the module, including the kinds the canaries leave out.
MORE_SECRETS = [
    "refund rk_live_Canary0123456789abcdef ok", "rk_test_Canary0123456789abcdef", "sk_test_Canary0123456789abcdef",
    "signature=CanarySig0123", "credentials: CanaryCreds42", "credential='canary'", "Server=db;Uid=sa;Pwd={a;b};",
    "passphrase = CanaryPhrase", "private_key: CanaryPk", "master-key=CanaryMaster", "token: \\\"CanaryEsc\\\"",
    "ghs_Canary0123456789abcdefghijklmnopqrstuv", "gho_Canary0123456789abcdefghijklmnopqrstuv",
    "xoxp-1234567890-Canary", "ANPACANARY0123456789", "AROACANARY0123456789 role",
    "-----BEGIN EC PRIVATE KEY-----\nQ2FuYXJ5Qm9keQ==\n-----END EC PRIVATE KEY-----",
    "Authorization: token CanaryGhToken", "authorization=Digest CanaryDigest",
    "amqp://guest:CanaryAmqp@rabbit:5672/", "secret: null", "password: [REDACTED:secret]", "token=",
]
SECRET_TEXTS = [c[0] for c in CANARIES] + MORE_SECRETS
# Clean texts a run repeats (they end up in the cache) and near misses of the rules' literals.
CLEAN_TEXTS = NORMAL_LINES + [
    "payment-service", "query_logs", "12", "", "max_tokens", "token_type", "bypass", "keyboard", "secretary",
    "sk-short", "bearer of bad news", "eyJ.not.a.jwt", "https://example.com/path", "AKIA", "password",
]

PIECE = st.one_of(
    st.sampled_from(SECRET_TEXTS), st.sampled_from(CLEAN_TEXTS), secret_in_format().map(lambda pair: pair[0]), st.text(),
)
TEXT = st.lists(PIECE, max_size=5).flatmap(
    lambda pieces: st.sampled_from([" ", "\n", "", ", ", "=", ":"]).map(lambda sep: sep.join(pieces))
)
KEYS = st.sampled_from(["message", "password", "apiKey", "token", "max_tokens", "headers", "records", "content", "x"])
LEAVES = st.one_of(TEXT, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(KEYS, inner, max_size=4),
        st.dictionaries(KEYS, inner, max_size=3).map(MappingProxyType),
    ),
    max_leaves=12,
)


def redacted_the_long_way(value: Any, counter: list[int]) -> Any:
    """`redact_value` without any fast path: every rule on every string, every type checked in order."""
    if isinstance(value, str):
        masked, n = _apply_rules(value)
        counter[0] += n
        return masked
    if isinstance(value, Mapping):
        return {k: _mask_all(v, counter) if isinstance(k, str) and is_secret_key(k) else redacted_the_long_way(v, counter)
                for k, v in value.items()}
    if isinstance(value, list):
        return [redacted_the_long_way(v, counter) for v in value]
    if isinstance(value, tuple):
        return tuple(redacted_the_long_way(v, counter) for v in value)
    return value


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6))
def test_a_text_is_masked_as_every_rule_masks_it_seen_once_or_again(texts):
    for _ in range(2):  # the second pass answers from the cache wherever it can
        for text in texts:
            assert redact_text_counted(text) == _apply_rules(text)
            assert redact_text_counted(json.dumps({"message": text})) == _apply_rules(json.dumps({"message": text}))


@settings(max_examples=examples(300), deadline=None)
@given(VALUES)
def test_a_value_is_masked_as_the_long_way_masks_it_seen_once_or_again(value):
    for _ in range(2):
        counter = [0]
        expected = redacted_the_long_way(value, counter)
        assert redact_value_counted(value) == (expected, counter[0])


@pytest.mark.parametrize("text", SECRET_TEXTS)
def test_a_text_with_a_secret_is_never_remembered_as_clean(text):
    masked, count = redact_text_counted(text)
    if count:
        assert text not in redaction._CLEAN_TEXTS
        assert redact_text_counted(text) == (masked, count)


def test_a_full_cache_starts_again_and_still_masks_everything(monkeypatch):
    monkeypatch.setattr(redaction, "_CLEAN_TEXTS", {})
    monkeypatch.setattr(redaction, "_clean_chars", [0])
    monkeypatch.setattr(redaction, "_CLEAN_TEXTS_MAX", 3)
    texts = CLEAN_TEXTS + SECRET_TEXTS
    for _ in range(3):
        for text in texts:
            assert redact_text_counted(text) == _apply_rules(text)
            assert len(redaction._CLEAN_TEXTS) <= 3


def test_a_string_subclass_never_answers_from_the_cache():
    class Sly(str):  # claims to be a clean text the cache holds
        def __eq__(self, other):
            return True

        def __hash__(self):
            return hash("payment-service")

    redact_text_counted("payment-service")
    sly = Sly("password=CanaryPw1")
    assert redact_text_counted(sly) == ("password=[REDACTED:secret]", 1)
    assert redact_value_counted({"message": sly}) == ({"message": "password=[REDACTED:secret]"}, 1)


# Longer than the rules' short-text prefilter (4,096 characters): a tool loop resends such texts each turn.
LONG_TEXT = st.lists(PIECE, min_size=1, max_size=4).map(lambda pieces: " ".join(pieces) + "\n" + "log line ok " * 400)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(LONG_TEXT, min_size=1, max_size=3))
def test_a_long_text_is_masked_as_every_rule_masks_it_seen_once_or_again(texts):
    for _ in range(2):
        for text in texts:
            assert len(text) > redaction._SHORT_TEXT
            assert redact_text_counted(text) == _apply_rules(text)
            assert redact_value_counted([{"role": "user", "content": text}]) == (
                [{"role": "user", "content": _apply_rules(text)[0]}], _apply_rules(text)[1])


def test_a_long_clean_text_is_read_once(monkeypatch):
    text = "\n".join(NORMAL_LINES) + "\n" + "GET /api/pay 200 in 12 ms\n" * 300
    assert len(text) > redaction._SHORT_TEXT
    assert redact_text_counted(text) == (text, 0)

    def no_rules(value):
        raise AssertionError("the rules ran again on a text already found clean")

    monkeypatch.setattr(redaction, "_apply_rules", no_rules)
    again = "".join(list(text))  # an equal text, another object: the cache compares content
    assert again is not text
    assert redact_text_counted(again) == (text, 0)
    assert redact_value_counted({"content": again}) == ({"content": text}, 0)


@pytest.mark.parametrize("secret", SECRET_TEXTS[:8])
def test_a_long_text_with_a_secret_is_never_remembered_as_clean(secret):
    text = "x " * 3000 + secret
    masked, count = redact_text_counted(text)
    if count:
        assert text not in redaction._CLEAN_TEXTS
        assert redact_text_counted(text) == (masked, count) == _apply_rules(text)


def test_the_cache_is_bounded_in_characters_and_still_masks_everything(monkeypatch):
    monkeypatch.setattr(redaction, "_CLEAN_TEXTS", {})
    monkeypatch.setattr(redaction, "_clean_chars", [0])
    monkeypatch.setattr(redaction, "_CLEAN_TEXT_CHARS_MAX", 20_000)
    texts = [f"line {i} ok\n" * 600 for i in range(8)] + ["z" * 30_000] + CLEAN_TEXTS + SECRET_TEXTS
    for _ in range(2):
        for text in texts:
            assert redact_text_counted(text) == _apply_rules(text)
            assert sum(map(len, redaction._CLEAN_TEXTS)) == redaction._clean_chars[0] <= 20_000
    assert "z" * 30_000 not in redaction._CLEAN_TEXTS  # longer than the whole bound: never kept
