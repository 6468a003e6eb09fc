"""The run list in a real browser tells the truth: a search and a filter run together over every run
(counts and sorting included), a malformed filter or search is named beside its control while the list
stays as it was, and the search reaches the answer and the root cause, Chinese included."""

from __future__ import annotations

import re

import pytest

from diagnosis.models import ChatSession, DiagnosisRun
from tests.console.test_browser import _log_in, _screenshot, browser_page, roles  # noqa: F401 (fixtures)
from tests.console.conftest import support_staff_create
from tests.factories import ChatSessionFactory, DiagnosisRunFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
LIST = "/admin/diagnosis/diagnosisrun/"
NEWER = 510  # more newer matches than the console used to keep before applying a filter (500)
OLDER = 7


@pytest.fixture
def many_pool_runs(roles):
    """OLDER degraded runs about the connection pool, then NEWER healthy ones about it too."""
    owner = UserFactory(username="oncall-bot")
    session = ChatSessionFactory(owner=owner)
    older = [DiagnosisRunFactory(session=session, question=f"connection pool exhausted on db-{n}", degraded=True,
                                 duration_ms=90_000 + n) for n in range(OLDER)]
    DiagnosisRun.objects.bulk_create([
        DiagnosisRun(session=session, question=f"Why is the connection pool slow? ({n})", duration_ms=100 + n)
        for n in range(NEWER)])
    return older


def _rows(page):
    return page.locator("#result_list tbody tr")


def test_a_search_with_a_filter_lists_and_counts_every_match(live_server, many_pool_runs, browser_page):
    support_staff_create("sam")
    page = browser_page()
    _log_in(page, live_server, "sam")

    page.goto(f"{live_server.url}{LIST}?degraded__exact=1&q=pool")
    assert _rows(page).count() == OLDER
    assert re.search(rf"\b{OLDER} diagnosis runs", page.locator("#changelist .paginator").inner_text())
    assert f"{OLDER} results" in page.locator("#search-result-count").inner_text()
    _screenshot(page, "run_list_search_filter.png", full_page=True)

    # without the filter: every match is counted, exactly (it is cheap), never a smaller number
    page.goto(f"{live_server.url}{LIST}?q=pool")
    footer = page.locator("#changelist .paginator").inner_text()
    assert f"{NEWER + OLDER} diagnosis runs" in footer and "more than" not in footer

    # sorting by duration happens in the database over all the matches: the oldest, slowest come first
    page.goto(f"{live_server.url}{LIST}?q=pool&o=-8")
    first = _rows(page).first.locator("td.field-run_link a").get_attribute("title")
    assert first == many_pool_runs[-1].run_id


def test_a_count_past_the_cap_reads_more_than_not_a_smaller_number(live_server, many_pool_runs, browser_page,
                                                                    monkeypatch):
    import traces.admin

    monkeypatch.setattr(traces.admin, "TEXT_COUNT_CAP", 100)
    support_staff_create("sam")
    page = browser_page()
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}{LIST}?q=pool")
    assert "more than 100 diagnosis runs" in " ".join(page.locator("#changelist .paginator").inner_text().split())
    assert page.locator("#search-result-count").inner_text().startswith("more than 100 results")


def test_a_malformed_filter_or_search_is_named_beside_its_control_and_the_list_stays(live_server, roles,
                                                                                      browser_page):
    support_staff_create("sam")
    owner = UserFactory(username="oncall-bot")
    for n in range(4):
        DiagnosisRunFactory(session__owner=owner, question=f"Why is checkout slow? ({n})", duration_ms=1000 * n)
    page = browser_page()
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}{LIST}?latency=1000-5000")
    assert _rows(page).count() == 3
    before = [_rows(page).nth(i).inner_text() for i in range(3)]

    box = page.locator("#filter-latency input[name=latency]")
    box.fill("1000-5000ms")
    box.press("Enter")
    page.wait_for_load_state()
    error = page.locator("#filter-latency-error")
    assert error.is_visible() and "is not a range" in error.inner_text()
    assert page.locator("#filter-latency input[name=latency]").input_value() == "1000-5000ms"
    box_at, error_at = page.locator("#filter-latency input[name=latency]").bounding_box(), error.bounding_box()
    assert 0 <= error_at["y"] - (box_at["y"] + box_at["height"]) < 40  # right under the box
    assert _rows(page).count() == 4  # the list without the malformed value, not an error page
    _screenshot(page, "run_list_filter_error.png")

    page.goto(f"{live_server.url}{LIST}?latency=1000-5000")
    page.fill("#searchbar", '"()"')
    page.press("#searchbar", "Enter")
    page.wait_for_load_state()
    search_error = page.locator("#searchbar-error")
    assert search_error.is_visible() and "Nothing to search for" in search_error.inner_text()
    assert page.locator("#searchbar").input_value() == '"()"'
    assert [_rows(page).nth(i).inner_text() for i in range(_rows(page).count())] == before  # previous results


def test_the_search_finds_words_of_the_answer_and_of_the_root_cause_in_chinese_too(live_server, roles,
                                                                                   browser_page):
    support_staff_create("sam")
    owner = UserFactory(username="oncall-bot")
    session = ChatSession.objects.create(session_id="ticket-88-ledger", owner=owner)
    by_answer = DiagnosisRunFactory(session=session, question="Why do payments fail?",
                                    answer="ledger-db refused connections after the failover.")
    by_root = DiagnosisRunFactory(session=session, question="订单为什么失败？", answer="见根因。",
                                  diagnosis={"rootCause": {"service": "inventory-svc", "summary": "库存服务连接池耗尽"}})
    DiagnosisRunFactory(session=session, question="Is checkout slow?", answer="No: checkout is fine.")
    page = browser_page()
    _log_in(page, live_server, "sam")
    for term, run in (("ledger-db refused", by_answer), ("连接池耗尽", by_root), ("inventory-svc", by_root)):
        page.goto(f"{live_server.url}{LIST}?session__id__exact={session.pk}")
        page.fill("#searchbar", term)
        page.press("#searchbar", "Enter")
        page.wait_for_load_state()
        titles = [_rows(page).nth(i).locator("td.field-run_link a").get_attribute("title")
                  for i in range(_rows(page).count())]
        assert titles == [run.run_id], term
