"""The alert report's wording catalogue (diagnosis/alert_report_text.json): every key the renderer says exists
in both languages, with the same placeholders, so a Chinese report never falls back or breaks on a value."""

from __future__ import annotations

import re
import string
from pathlib import Path

from diagnosis.alert_render import TEXT, t

USED = re.compile(r"""\b(?:t|report_text)\(\s*["']([a-z_]+)["']""")
SOURCES = ("diagnosis/alert_render.py", "diagnosis/agents/aiops_report.py", "diagnosis/agents/aiops_nodes.py")
ROOT = Path(__file__).resolve().parents[2]


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_entry_has_both_languages_with_the_same_placeholders():
    assert TEXT and all(set(entry) == {"en", "zh"} for entry in TEXT.values())
    assert {k: e for k, e in TEXT.items() if _fields(e["en"]) != _fields(e["zh"])} == {}


def test_every_key_the_renderers_say_is_in_the_catalogue():
    used = {key for path in SOURCES for key in USED.findall((ROOT / path).read_text(encoding="utf-8"))}
    assert {"coverage", "removed_note", "stopped_early", "next_logs"} <= used  # the scan sees the call sites
    assert used - set(TEXT) == set()
    assert t("coverage", "zh", n=1, total=2) == "覆盖范围：共 2 条告警，已分析 1 条。"


def test_a_reporter_line_the_rendered_body_already_says_is_not_a_suggestion():
    from diagnosis.agents.aiops import Task, TaskResult, alert_record
    from diagnosis.agents.aiops_report import render_aiops_report, report_suggestions

    alert = alert_record({"labels": {"alertname": "PoolSaturated", "service": "payment-service"}, "annotations": {},
                          "state": "firing"}, alert_id="a1", source="request")
    result = TaskResult(task=Task("t1", "payment-service", ["a1"], "why"), round=1, status="PARTIAL")
    reporter = "Coverage: 1 of 1 alert(s) analysed.\n\n- Pause the refund batch before resizing the pool.\n"
    report, _removed, _cited, advice = render_aiops_report(alerts=[alert], results=[result], language="en",
                                                           suggestions=report_suggestions(reporter))
    assert [a["text"] for a in advice] == ["Pause the refund batch before resizing the pool."]
    assert report.count("Coverage: 1 of 1 alert(s) analysed.") == 1
