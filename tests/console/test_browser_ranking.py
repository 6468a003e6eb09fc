"""Opening a record of a ranked candidate brings it into view like a citation: the record is marked as a
hint in its tool result (a large one shows a window around it), highlighted and below the sticky menu."""

from __future__ import annotations

import pytest

from tests.console.scenarios import ranked
from tests.console.test_browser import _log_in, _screenshot, browser_page  # noqa: F401 (fixture)
from tests.console.test_browser_citations import _in_view_below_the_menu, _run_citing
from tests.console.test_browser_triage import DESKTOP, PHONE, staff  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_a_candidate_record_link_brings_the_record_into_view(live_server, staff, browser_page, viewport):
    run, invocation_id = _run_citing(6000, 5871)  # the verified excerpt sits far from the ranked records
    ranked(run)
    page = browser_page(*viewport)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{run.pk}/change/")
    agreement = page.locator("#ranking-agreement")
    assert "differs" in agreement.inner_text() and agreement.is_visible()
    link = page.locator('#ranking a.rc-hint-link[data-mark="ranking: the record at $.records[3].message"]')
    assert link.get_attribute("data-invocation") == invocation_id
    link.click()
    page.wait_for_function("() => document.querySelector('mark.rc-hint.rc-mark-focus') !== null")
    page.wait_for_timeout(200)
    mark = page.locator("mark.rc-hint.rc-mark-focus")
    assert mark.get_attribute("title") == "ranking: the record at $.records[3].message"
    assert "GET /v1/payments/3 " in mark.inner_text()
    assert _in_view_below_the_menu(page, mark), (mark.bounding_box(), page.locator(".rc-nav").bounding_box())
    assert page.locator(f'[id="{invocation_id}"] mark.evidence').count() >= 1  # the verified excerpt is still marked
    _screenshot(page, f"run_detail_ranking_{viewport[0]}.png")
