"""The alert report's wording: its texts are in the engine's catalogue (diagnosis.i18n; the catalogue's own
checks are in tests/architecture/test_text_catalogue.py), so a Chinese report never falls back or breaks
on a value; and a line the rendered body already says is not repeated as a suggestion."""

from __future__ import annotations

from diagnosis import i18n
from diagnosis.alert_render import COVERAGE, NEXT_LOGS, REMOVED_NOTE, STOPPED_EARLY


def test_the_report_texts_read_in_both_languages_with_their_values():
    assert i18n.text(COVERAGE, "zh", n=1, total=2) == "覆盖范围：共 2 条告警，已分析 1 条。"
    assert i18n.text(COVERAGE, "en", n=1, total=2) == "Coverage: 1 of 2 alert(s) analysed."
    assert i18n.text(STOPPED_EARLY, "zh", reason="budget") == "_分析提前终止（budget）；本报告只包含此前已验证的内容。_"
    assert i18n.text(REMOVED_NOTE, "zh", n=2, reasons="r").startswith("**已删除未经验证的陈述**：本报告中有 2 条陈述")
    assert i18n.text(NEXT_LOGS, "zh") == "检查告警服务的错误日志和关键指标（错误率、延迟、资源饱和度）。"


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
