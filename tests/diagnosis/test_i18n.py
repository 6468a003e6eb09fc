"""The engine's texts in the answer's language (diagnosis.i18n): the Chinese from the catalogue, the English
from the msgids, one English word read two ways by its context, and no silent English in a Chinese answer."""

from __future__ import annotations

import pytest

from diagnosis import i18n


def test_a_text_reads_in_the_requested_language_with_its_values():
    message = "Not checked: `{tool}` failed in this run, so what the {kind} would confirm or refute is unknown."
    assert i18n.text(message, "en", tool="query_logs", kind="logs") == (
        "Not checked: `query_logs` failed in this run, so what the logs would confirm or refute is unknown.")
    assert i18n.text(message, "zh", tool="query_logs", kind="日志") == (
        "未能检查：本次运行中 `query_logs` 调用失败，日志能否证实或否定上述结论尚不可知。")


def test_the_language_is_the_callers_not_a_process_locale(monkeypatch):
    monkeypatch.setenv("LANGUAGE", "zh_Hans")
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    assert i18n.text("**Root cause**", "en") == "**Root cause**"
    assert i18n.text("**Root cause**", "zh") == "**根因**"
    assert i18n.text("**Root cause**", None) == "**Root cause**"  # anything but "zh" is English


def test_the_context_tells_one_english_word_apart():
    assert i18n.text("metrics", "zh", context="query_metrics") == "指标"
    assert i18n.text("metrics", "zh", context="query_alerts") == "告警"
    assert i18n.text("metrics", "en", context="query_alerts") == "metrics"


def test_a_text_missing_from_the_catalogue_is_an_error_not_english_in_a_chinese_answer():
    with pytest.raises(i18n.MissingTranslation):
        i18n.text("A sentence nobody translated.", "zh")
    with pytest.raises(i18n.MissingTranslation):
        i18n.text("metrics", "zh", context="query_nothing")
    assert i18n.mark("A sentence nobody translated.") == "A sentence nobody translated."


def test_a_fault_kind_is_labelled_from_the_catalogue_in_each_language():
    from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID, CAUSE_KINDS

    assert CAUSE_KIND_BY_ID["network.dns"].label("zh") == "DNS 解析失败"
    assert CAUSE_KIND_BY_ID["resource.memory"].label("en") == "memory exhaustion (leak or out-of-memory kill)"
    chinese = {kind.id: kind.label("zh") for kind in CAUSE_KINDS}
    assert all(chinese[kind.id] != kind.label_en for kind in CAUSE_KINDS), chinese
    assert len(set(chinese.values())) == len(CAUSE_KINDS)  # no two kinds read the same in Chinese
