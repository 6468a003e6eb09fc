"""Run diff: two runs side by side with the differences marked; the comparison is plain data."""

from __future__ import annotations

import pytest
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from tests.console.scenarios import evidence_retry_run, happy_run
from traces.diff import run_facts, runs_diff

pytestmark = pytest.mark.django_db
DIFF = reverse("admin:diagnosis_diagnosisrun_diff")


def facts(run):
    return run_facts(run, list(run.tool_invocations.order_by("id")))


def test_the_same_question_before_and_after_a_change(alice):
    before = happy_run(owner=alice)
    after = evidence_retry_run(owner=alice)
    diff = runs_diff(facts(before), facts(after))
    changed = dict((s.label, s) for s in diff.scalars)
    assert changed["verdict"].changed and (changed["verdict"].left, changed["verdict"].right) == ("PASS", "")  # the fallback answered
    assert changed["degraded"].changed and changed["tokens"].changed and changed["tokens"].delta.endswith("%")
    assert not changed["model"].changed
    tools = next(d for d in diff.lists if d.label == "tools called")
    assert tools.left == [("query_logs", "same")]
    assert tools.right == [("query_logs", "same"), ("query_metrics", "added")]
    route = next(d for d in diff.lists if d.label == "route")
    assert ("verifier → evidence_retry (evidence_gap)", "added") in route.right
    assert any(tag == "removed" for _, tag in route.left)
    assert "answer" in diff.changed and "route" in diff.changed and "claims rejected" in diff.changed


def test_a_run_compared_with_itself_has_no_difference(alice):
    run = happy_run(owner=alice)
    diff = runs_diff(facts(run), facts(run))
    assert diff.changed == [] and all(line.tag == "equal" for line in diff.answer)


def test_the_page_shows_both_runs_with_the_differences_highlighted(staff_client, alice):
    before, after = happy_run(owner=alice), evidence_retry_run(owner=alice)
    page = staff_client.get(DIFF + f"?a={before.run_id[:12]}&b={after.run_id}").content.decode()
    assert before.run_id in page and after.run_id in page
    assert 'class="rc-changed" data-side="right" data-field="verdict">—' in page
    assert 'class="" data-side="right" data-field="model">' in page  # unchanged: not highlighted
    assert '<li class="added">query_metrics</li>' in page
    assert 'id="diff-summary"' in page and "differences</strong>" in page


def test_bad_picks_are_explained(staff_client, alice):
    run = happy_run(owner=alice)
    page = staff_client.get(DIFF + f"?a=hello&b=run-ffffffff").content.decode()
    assert "is not a run, session or invocation id" in page and "No run found for" in page
    assert staff_client.get(DIFF + f"?a={run.run_id}").status_code == 200
    DiagnosisRun.objects.filter(pk=run.pk)  # nothing written
