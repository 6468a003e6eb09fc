"""The one normaliser for model text: the prompt-echo guard and the citation scan see through
invisible characters, compatibility forms and hyphen look-alikes."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diagnosis.agents.catalog import load_catalog, prompt_echoed
from diagnosis.model_text import (
    HYPHEN_LOOKALIKES,
    cap_strings,
    cap_text,
    foreign_citations,
    normalise_model_text,
    scrub_sentences,
)

VERIFIED = {"inv-3f9a2c1b"}


def test_normaliser_applies_nfkc_strips_format_characters_and_folds_hyphens():
    assert normalise_model_text("ｉｎｖ\u20113f9a\u200b2c1b\u2060") == "inv-3f9a2c1b"
    assert normalise_model_text("a\u00adb\u2212c\u2014d") == "ab-c-d"  # soft hyphen is Cf: removed


FORMAT_CHARACTERS = "".join(chr(cp) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf")


def normalised_char_by_char(text: str) -> str:
    """The normaliser's definition, one character at a time."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf" or ch == "\n")
    return text.translate(str.maketrans({c: "-" for c in HYPHEN_LOOKALIKES}))


@given(st.text(alphabet=st.one_of(
    st.characters(),
    st.characters(max_codepoint=127),
    st.sampled_from(FORMAT_CHARACTERS + HYPHEN_LOOKALIKES + "\n\u00a0\uff0d\uff49\u2126\u00b2\ufb01"),
)))
def test_the_normaliser_equals_its_char_by_char_definition_on_any_text(text):
    assert normalise_model_text(text) == normalised_char_by_char(text)


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_comes_back_unchanged(text):
    assert normalise_model_text(text) == normalised_char_by_char(text) == text


def test_every_format_character_is_removed_wherever_it_stands():
    text = "a".join(FORMAT_CHARACTERS)
    assert len(FORMAT_CHARACTERS) > 150
    assert normalise_model_text(text) == normalised_char_by_char(text) == "a" * (len(FORMAT_CHARACTERS) - 1)


@pytest.mark.parametrize("text", [
    "INV-3F9A2C1B", "inv\u20103f9a2c1b", "inv\u2212" "3f9a2c1b", "inv-3f9a2c1b0", "inv-3f9a\u200b2c1b",
    "ｉｎｖ－3f9a2c1b", "inv3f9a2c1b", "inv_3f9a2c1b", "inv-12345678", "inv 3f9a2c1b",
])
def test_look_alike_and_unverified_ids_are_foreign(text):
    assert foreign_citations(f"see [{text}] now", VERIFIED)


@pytest.mark.parametrize("text", ["see [inv-3f9a2c1b].", "inventory-service is invalid", "no ids here", "库存服务"])
def test_canonical_verified_citations_and_ordinary_words_pass(text):
    assert foreign_citations(text, VERIFIED) == []


def test_a_sentence_with_a_foreign_id_is_removed_and_recorded():
    text = "Pool exhausted [inv-3f9a2c1b]. The cache died [INV-3F9A2C1B]. 数据库正常。缓存挂了 inv\u20113f9a2c1b。\nEnd"
    kept, removed = scrub_sentences(text, VERIFIED)
    assert kept == "Pool exhausted [inv-3f9a2c1b]. 数据库正常。\nEnd"
    assert [r["tokens"] for r in removed] == [["INV-3F9A2C1B"], ["inv-3f9a2c1b"]]


def test_prompt_echo_is_detected_through_zero_width_characters():
    line = next(l for p in load_catalog().values() for l in p.text.splitlines() if len(l) > 60)
    assert prompt_echoed(line)
    hidden = "\u200b".join(line[i:i + 5] for i in range(0, len(line), 5))
    assert prompt_echoed(hidden)
    assert prompt_echoed(line.replace("-", "\u2011").replace(" ", "\u00a0"))
    assert not prompt_echoed("payment-service exhausted its connection pool at 10:02.")


def test_caps_mark_where_they_cut():
    assert cap_text("x" * 50, 10) == "x" * 10 + "…[cut 40 chars]"
    capped = cap_strings({"a": ["y" * 30] * 5}, 10, max_items=2)
    assert capped == {"a": ["y" * 10 + "…[cut 20 chars]"] * 2 + ["…[cut 3 items]"]}
