"""Reviewer tools in a real browser: scores richer than good/bad (numeric 1-5 and categorical, each with
a name and a description) beside the binary feedback, and per-user saved views of the run list's
filters, search, sort and columns."""

from __future__ import annotations

import pytest

from tests.console.conftest import support_staff_create
from tests.console.scenarios import happy_run
from tests.console.test_browser import _log_in, _screenshot, browser_page, roles  # noqa: F401 (fixtures)
from tests.factories import DiagnosisRunFactory, UserFactory
from traces.models import RunScore, SavedView, ScoreConfig

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
LIST = "/admin/diagnosis/diagnosisrun/"


def test_a_reviewer_gives_a_numeric_and_a_categorical_score_beside_the_feedback(live_server, roles, browser_page):
    sam = support_staff_create("sam")
    run = happy_run(owner=UserFactory(username="oncall-bot"))
    helpful = ScoreConfig.objects.create(name="helpfulness", kind="numeric", description="How much the answer helps")
    cause = ScoreConfig.objects.create(name="root cause", kind="categorical", categories=["right", "partly", "wrong"],
                                       description="Was the named root cause the real one?")
    ScoreConfig.objects.create(name="retired", kind="numeric", active=False)
    page = browser_page()
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}{LIST}{run.pk}/change/#scores")
    forms = page.locator("form.rc-score-form")
    assert forms.count() == 2  # the retired score is not offered
    assert "How much the answer helps" in page.locator('form[data-score="helpfulness"]').inner_text()
    assert page.locator(f"#score-{helpful.pk} option").all_inner_texts() == ["choose…", "1", "2", "3", "4", "5"]
    page.select_option(f"#score-{helpful.pk}", "4")
    page.locator('form[data-score="helpfulness"] button').click()
    page.wait_for_selector(".messagelist .success")
    page.select_option(f"#score-{cause.pk}", "partly")
    page.locator('form[data-score="root cause"] button').click()
    page.wait_for_selector("#scores-given")
    assert page.locator('#scores-given tr[data-score="helpfulness"]').inner_text().split("\t")[1].strip() == "4 / 5"
    assert "partly" in page.locator('#scores-given tr[data-score="root cause"]').inner_text()
    assert page.locator("#feedback-form").count() == 1  # the binary feedback is still there
    assert {(s.config.name, s.value, s.user_id) for s in RunScore.objects.filter(run=run)} == {
        ("helpfulness", "4", sam.pk), ("root cause", "partly", sam.pk)}
    _screenshot(page, "run_detail_scores.png")


def test_saved_views_keep_filters_search_sort_and_columns_for_their_owner_only(live_server, roles, browser_page):
    support_staff_create("sam")
    support_staff_create("kim")
    owner = UserFactory(username="oncall-bot")
    slow = DiagnosisRunFactory(session__owner=owner, question="pool slow", degraded=True, duration_ms=9000)
    DiagnosisRunFactory(session__owner=owner, question="pool fast", degraded=True, duration_ms=100)
    DiagnosisRunFactory(session__owner=owner, question="pool healthy", degraded=False)
    page = browser_page()
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}{LIST}?degraded__exact=1&q=pool&o=-8")
    page.locator("#saved-views > summary").click()
    for column in ("session_link", "strategy", "tokens"):
        page.locator(f'#save-view-form input[value="{column}"]').uncheck()
    page.fill("#view-name", "degraded pool, slowest first")
    page.click("#save-view-form button[type=submit]")
    page.wait_for_selector("#result_list")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2 and rows.first.locator("td.field-run_link a").get_attribute("title") == slow.run_id
    assert not page.locator("#result_list th.column-session_link").is_visible()
    assert page.locator("#result_list th.column-question_preview").is_visible()

    page.goto(f"{live_server.url}{LIST}")
    page.locator('#saved-views a[data-view="degraded pool, slowest first"]').click()
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == 2
    assert page.locator("#searchbar").input_value() == "pool"
    assert not page.locator("#result_list th.column-tokens").is_visible()
    assert not page.locator("#result_list td.field-tokens").first.is_visible()
    _screenshot(page, "run_list_saved_view.png")

    view = SavedView.objects.get(name="degraded pool, slowest first")
    other = page.context.browser.new_page(viewport={"width": 1440, "height": 1000})
    _log_in(other, live_server, "kim")
    other.goto(f"{live_server.url}{LIST}")
    assert other.locator('#saved-views a[data-view]').count() == 0
    response = other.goto(f"{live_server.url}{LIST}saved-views/{view.pk}/")
    assert response.status == 404
