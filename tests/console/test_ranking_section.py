"""The run page's "Ranking (a hint, not evidence)" section: the candidates the run's diagnosis keeps, their
records linked like citations (and marked as hints, never as verified excerpts), and whether the diagnosis
agreed with the ranking; "no ranking recorded" for runs recorded before it was kept."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from tests.console.scenarios import happy_run, ranked

pytestmark = pytest.mark.django_db


def _page(client, run) -> str:
    return client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk])).content.decode()


def _section(page: str) -> str:
    block = page[page.index('id="ranking"'):]
    return block[:block.index("</section>")]


def test_the_section_lists_the_candidates_with_links_to_their_records(auditor_client, alice):
    run = ranked(happy_run(owner=alice))
    logs = run.tool_invocations.get(tool_name="query_logs").invocation_id
    block = _section(_page(auditor_client, run))
    assert "Ranking (a hint, not evidence)" in block
    rows = re.findall(r'<tr class="rc-candidate">(.*?)</tr>', block, re.S)
    assert len(rows) == 2
    assert "ledger-db" in rows[0] and "dependency.database" in rows[0] and "payment-service" in rows[0]  # explains
    assert '<time datetime="2026-11-29T10:02:11Z">' in rows[0]  # the onset as a time, not Unix seconds
    assert "ledger-db" in rows[1] and "resource.pool" in rows[1]  # explained by the root
    links = re.findall(r'<a class="rc-mono rc-cite rc-hint-link" href="#([^"]+)" data-invocation="([^"]+)" '
                       r'data-mark="([^"]+)"', block)
    assert [(href, inv) for href, inv, _ in links] == [(logs, logs)] * 3
    assert links[0][2] == "ranking: the record at $.records[3].message"
    agreement = re.search(r'<p id="ranking-agreement"[^>]*>(.*?)</p>', block, re.S).group(1)
    assert "differs" in agreement and "payment-service" in agreement and "ledger-db" in agreement


def test_the_records_are_marked_as_hints_and_never_counted_as_verified_excerpts(auditor_client, alice):
    run = ranked(happy_run(owner=alice))
    logs = run.tool_invocations.get(tool_name="query_logs").invocation_id
    page = _page(auditor_client, run)
    item = page[page.index(f'id="{logs}"'):]
    item = item[:item.index("</details>")]
    hint = re.search(r'<mark class="rc-hint" title="ranking: the record at \$\.records\[3\]\.message">(.*?)</mark>', item)
    assert hint and "Circuit breaker" in hint.group(1)
    assert "1 verified excerpt" in item  # the Gatekeeper's one, not the ranking's three
    # records[1] is both cited and ranked: the verified excerpt wins, the hint does not hide it
    assert 'title="claim c1: verified excerpt"' in item


def test_the_part_loaded_on_demand_marks_the_record_a_candidate_cites(auditor_client, alice):
    run = ranked(happy_run(owner=alice))
    logs = run.tool_invocations.get(tool_name="query_logs").invocation_id
    part = auditor_client.get(reverse("admin:diagnosis_diagnosisrun_part", args=[run.pk, "result", logs]))
    assert part.status_code == 200
    assert 'class="rc-hint" title="ranking: the record at $.records[0].message"' in part.content.decode()


def test_a_run_recorded_before_the_ranking_says_no_ranking_recorded(auditor_client, alice):
    run = happy_run(owner=alice)
    assert 'id="ranking"' not in _page(auditor_client, run)  # no diagnosis at all: no section
    DiagnosisRun.objects.filter(pk=run.pk).update(diagnosis={"rootCause": None, "nothingWrong": False,
                                                             "undetermined": True, "symptoms": []})
    block = _section(_page(auditor_client, run))
    assert "no ranking recorded" in block and "rc-candidate" not in block


@pytest.mark.parametrize("agreement, words", [("agrees", "agreed with the ranking"),
                                              ("no_root_cause", "named no root-cause service"),
                                              ("no_ranking", "ranked no candidate")])
def test_the_agreement_line_says_what_was_recorded(auditor_client, alice, agreement, words):
    run = ranked(happy_run(owner=alice), agreement=agreement)
    DiagnosisRun.objects.filter(pk=run.pk).update(model_name="qwen2.5:7b-instruct")  # a real model's run
    block = _section(_page(auditor_client, run))
    assert words in re.search(r'<p id="ranking-agreement"[^>]*>(.*?)</p>', block, re.S).group(1)


def test_names_from_tool_output_are_escaped(auditor_client, alice):
    run = ranked(happy_run(owner=alice))
    run.diagnosis["candidates"][0].update(service="<img src=x onerror=alert(1)>", explains=["<b>x</b>"])
    run.diagnosis["localisation"]["subject"] = ["<svg onload=alert(1)>"]
    DiagnosisRun.objects.filter(pk=run.pk).update(diagnosis=run.diagnosis)
    block = _section(_page(auditor_client, run))
    assert "&lt;img src=x onerror=alert(1)&gt;" in block and "<img" not in block
    assert "&lt;b&gt;x&lt;/b&gt;" in block and "<svg" not in block
