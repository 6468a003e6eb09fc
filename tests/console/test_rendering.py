"""The HTML helpers of the run-detail page: pretty JSON with the verified excerpt marked at its exact path."""

from __future__ import annotations

import re

from traces.rendering import excerpt_in_context, highlight_for, json_html, markdown_html

RESULT = {"records": [{"message": "pool ok"}, {"message": "HikariPool-1 - Connection is not available,\n  request timed out"}],
          "series": [{"values": [[1764410400, "7"], [1764410460, "20"]], "max": 20}]}


def marks(html) -> list[str]:
    return re.findall(r'<mark class="evidence"[^>]*>(.*?)</mark>', str(html), re.S)


def test_an_excerpt_is_marked_only_at_its_path_with_whitespace_normalised():
    html = json_html(RESULT, [highlight_for("$.records[1].message", "Connection is not available, request")])
    assert marks(html) == ["Connection is not available,\\n  request"]


def test_a_negative_index_names_the_same_element():
    assert marks(json_html(RESULT, [highlight_for("$.records[-1].message", "Connection is not")])) == ["Connection is not"]


def test_a_cited_container_marks_the_excerpt_in_its_strings_and_numbers():
    assert marks(json_html(RESULT, [highlight_for("$.records[1]", "timed out")])) == ["timed out"]
    assert marks(json_html(RESULT, [highlight_for("$.series[0].max", "20")])) == ['<span class="j-num">20</span>']


def test_a_malformed_path_or_empty_excerpt_marks_nothing():
    assert highlight_for("records[1]", "pool") is None
    assert highlight_for("$.records[1].message", "   ") is None
    assert marks(json_html(RESULT)) == []


def test_values_are_escaped_and_short_pairs_stay_on_one_line():
    html = str(json_html({"<k>": "<script>alert(1)</script>", "pair": [1764410400, "7"]}))
    assert "<script>" not in html and "&lt;script&gt;" in html and "&quot;&lt;k&gt;&quot;" in html
    assert '[<span class="j-num">1764410400</span>, <span class="j-str">"7"</span>]' in html


def test_a_huge_value_is_cut_with_a_pointer_to_the_json_trace():
    html = str(json_html({"records": ["x" * 100] * 5000}, limit=5000))
    assert len(html) < 20_000 and "the JSON trace has the full value" in html


def test_a_json_string_content_is_pretty_printed():
    assert '<span class="j-key">&quot;verdict&quot;</span>: <span class="j-str">"PASS"</span>' in str(json_html('{"verdict": "PASS"}'))


def test_the_excerpt_in_context_keeps_some_text_around_it():
    text = "a" * 500 + " HikariPool-1 - Connection is not available " + "b" * 500
    html = str(excerpt_in_context(text, "Connection is not available"))
    assert html.startswith("…") and html.endswith("…")
    assert marks(html) == ["Connection is not available"]
    assert excerpt_in_context(text, "not there at all") is None
    assert marks(excerpt_in_context(RESULT["records"], "timed out")) == ["timed out"]


def test_markdown_keeps_tables_and_code_and_drops_scripts():
    html = str(markdown_html("| a | b |\n|---|---|\n| 1 | 2 |\n\n```\ncode\n```\n\n<iframe src=x></iframe>"))
    assert "<table>" in html and "<pre><code>code" in html and "<iframe" not in html


def test_a_bullet_list_right_after_a_paragraph_is_a_list():
    html = str(markdown_html("Root cause:\n- pool exhausted\n- retries pile up\n\nNext steps:\n1. raise the pool\n2. watch it"))
    assert "<ul>\n<li>pool exhausted</li>\n<li>retries pile up</li>\n</ul>" in html
    assert "<ol>\n<li>raise the pool</li>" in html
    assert "Root cause:</p>" in html


def test_gfm_tables_and_strikethrough_render_and_raw_html_does_not():
    html = str(markdown_html("| a | b |\n|:-|-:|\n| 1 | 2 |\n\n~~old~~ new\n\n<img src=x onerror=alert(1)> "
                             "[x](javascript:alert(1)) https://example.com"))
    assert '<th style="text-align:left">a</th>' in html and '<td style="text-align:right">2</td>' in html
    assert "<s>old</s> new" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html  # raw HTML is text
    assert 'href="javascript' not in html and "[x](javascript:alert(1))" in html
    assert 'href="https://example.com"' not in html  # no linkify: only written links are links


def test_citations_of_this_run_link_to_their_invocation_and_others_do_not():
    html = str(markdown_html("- pool exhausted [inv-0123abcd] [inv-99999999]", citations=["inv-0123abcd"]))
    assert '<a class="citation" href="#inv-0123abcd">[inv-0123abcd]</a>' in html
    assert "[inv-99999999]" in html and 'href="#inv-99999999"' not in html
