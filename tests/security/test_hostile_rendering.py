"""Hostile strings through every renderer: nothing becomes active.

Strings made of HTML, Markdown links and images, autolinks, zero-width and bidi characters, homoglyphs,
table pipes, backticks and backslashes go through every writer of served Markdown (inline text, code spans,
table cells, model Markdown, the answer renderer, the alert report with its table) and every way it is
shown: the console's renderer and a permissive CommonMark renderer with raw HTML and linkify on (what an
API client might use). The HTML is parsed with html5lib (the WHATWG parsing algorithm) and loaded in
Chromium; no element, attribute, URL or script may become active, and no request may leave the page.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from diagnosis.agents.aiops import Task, TaskResult, alert_record
from diagnosis.agents.aiops_report import compose_alert_fallback, render_aiops_report
from diagnosis.answer_render import render_answer, render_simple_answer
from diagnosis.markdown_text import md_cell, md_code, md_inline, md_neutralise
from diagnosis.progress_names import checked_event
from tests.console.test_browser import browser_page  # noqa: F401  (the fixture)
from tests.support.hypo import examples
from tests.support.html_checks import active_markup

HOSTILE = [
    "<img src=x onerror=alert(1)>", "<svg onload=alert(1)>", "<script>alert(1)</script>", "<iframe src=//evil>",
    "<a href=javascript:alert(1)>x</a>", "[click](javascript:alert(1))", "[c](http://evil.example/x)",
    "![pic](http://evil.example/p.png)", "<http://evil.example>", "www.evil.example", "mallory@evil.example",
    "[ref]: http://evil.example", "[ref]", "<!-- x -->", "<?php ?>", "<style>*{}</style>", "&lt;img src=x&gt;",
    "\u200b", "\u202e", "\u2066", "\ufeff", "ｉｍｇ", "＜script＞", "\u2011", "`", "``", "|", "\\", "\\<img src=x>",
    "]", "](", "![", "<", ">", "*", "_", "~~", "\n", "\n\n<div onclick=x>", "\n# h", "\n| a | b |\n|---|---|",
    "<img src=x onerror=alert(1)//", "java\u200bscript:alert(1)", "<ScRiPt>", "<svg><animate onbegin=alert(1)>",
    "\"><img src=x onerror=alert(1)>", "' onmouseover='alert(1)", "data:text/html,<script>alert(1)</script>",
]
hostile_text = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12)), min_size=1, max_size=8).map("".join)
PERMISSIVE = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])  # raw HTML on


def console_html(markdown: str) -> str:
    from traces.rendering import markdown_html

    return str(markdown_html(markdown, citations=["inv-0123abcd"]))


def both(markdown: str) -> list[str]:
    """What is active when the Markdown is shown by the console and by a permissive client."""
    return active_markup(console_html(markdown)) + active_markup(PERMISSIVE.render(markdown))


def claim(statement: str, excerpt: str, tool: str = "query_logs") -> dict:
    return {"claim_id": "c1", "statement": statement,
            "evidence": [{"source_invocation_id": "inv-0123abcd", "tool_name": tool, "raw_path": "$.records[0].message",
                          "evidence_excerpt": excerpt}]}


def rendered_surfaces(text: str) -> dict[str, str]:
    """Every served Markdown surface with `text` in each place tool or model text can reach."""
    answer = render_answer(plan={"version": "answer_plan_v1", "root_cause": ["c1"], "evidence": ["c2"],
                                 "next_steps": [{"claim_id": "c3"}, {"text": text}]},
                           claims=[claim(text, text), {**claim(f"x {text}", text), "claim_id": "c2"},
                                   {**claim(f"Runbook: {text}", text, "lookup_knowledge"), "claim_id": "c3"}],
                           verdict="PASS", language="en", suggestions=[text])
    alert = alert_record({"labels": {"alertname": text, "service": text, "severity": text}, "annotations": {},
                          "state": "firing", "activeAt": text}, alert_id="a1", source="request")
    result = TaskResult(task=Task("t1", text, ["a1"], text), round=1, status="COMPLETED",
                        verified_claims=[claim(text, text)], verified_evidence=claim(text, text)["evidence"])
    report, *_ = render_aiops_report(alerts=[alert], results=[result], language="en", suggestions=[text])
    fallback = compose_alert_fallback(alerts=[alert], results=[result], reason=text, language="en", intake_error=text)
    simple, _ = render_simple_answer(text, language="en")
    return {"inline": f"- {md_inline(text)}", "code": f"- {md_code(text)}",
            "cell": f"| a | b |\n|---|---|\n| {md_cell(text)} | {md_cell(text)} |", "neutralised": md_neutralise(text),
            "answer": answer.markdown, "report": report, "report_fallback": fallback, "simple": simple}


@settings(max_examples=examples(150))
@given(hostile_text)
def test_no_renderer_lets_hostile_text_become_active(text):
    for name, markdown in rendered_surfaces(text).items():
        assert both(markdown) == [], (name, markdown)


@settings(max_examples=examples(150))
@given(hostile_text)
def test_inline_text_reads_as_written(text):
    """Escaping only what would become active: the reader sees the visible characters of the text (inline
    text never starts a line in a served answer, so it follows a word here too). Emphasis and code-span
    marks are left to mean what they mean in Markdown: formatting is not active, so it is not escaped."""
    from diagnosis.markdown_text import plain_line

    text = "".join(ch for ch in text if ch not in "*_~`")
    shown = console_html(f"x {md_inline(text)}")
    import html5lib

    visible = "".join(html5lib.parse(shown, treebuilder="etree", namespaceHTMLElements=False).itertext())
    assert " ".join(visible.split()) == " ".join(f"x {plain_line(text)}".split())


@settings(max_examples=examples(100))
@given(hostile_text, st.sampled_from(["node", "tool", "status", "step"]), st.sampled_from(
    ["node", "toolName", "status", "task_id", "error", "reason_code"]))
def test_the_progress_stream_carries_no_hostile_name(text, kind, field):
    clean, violations = checked_event(kind, {field: text})
    carried = clean.get(field)
    assert carried is None or (carried == text and text.isascii() and "<" not in text and " " not in text)


@pytest.mark.browser
def test_chromium_runs_nothing_and_loads_nothing_from_rendered_hostile_text(browser_page):
    """Every surface of every hostile fragment (alone and combined), rendered both ways, in one page:
    no dialog, no request, no active element, no link but the run's own citations."""
    texts = HOSTILE + ["".join(HOSTILE), " ".join(reversed(HOSTILE))]
    parts = []
    for text in texts:
        for markdown in rendered_surfaces(text).values():
            parts += [console_html(markdown), PERMISSIVE.render(markdown)]
    page = browser_page()
    dialogs, requests = [], []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.route("**/*", lambda route: (requests.append(route.request.url), route.abort()))
    page.set_content(f"<!doctype html><html><body><main id='hostile'>{''.join(parts)}</main></body></html>")
    page.wait_for_timeout(300)  # let any onload/onerror fire (no assertion on time)
    report = page.evaluate("""() => {
        const root = document.getElementById('hostile');
        const active = root.querySelectorAll('script,img,svg,iframe,object,embed,video,audio,link,style,form,input,'
            + 'button,meta,base,frame,frameset,math,template,textarea,select');
        const handlers = [...root.querySelectorAll('*')].flatMap(e => [...e.attributes]
            .filter(a => a.name.startsWith('on') || a.name === 'style' || a.name === 'src').map(a => e.tagName + ' ' + a.name));
        const links = [...root.querySelectorAll('a')].map(a => a.getAttribute('href'))
            .filter(h => !/^#inv-[0-9a-f]{8}$/.test(h || ''));
        return {active: active.length, handlers, links, pwned: window.__pwned || null};
    }""")
    assert dialogs == [] and requests == [], (dialogs, requests[:5])
    assert report == {"active": 0, "handlers": [], "links": [], "pwned": None}, json.dumps(report)[:500]
