"""The console in a real browser: Playwright drives Debian's chromium against the live server.

A support engineer logs in, filters the run list to degraded runs, opens a run that went through an
evidence retry, sees its route, timeline and a highlighted verified excerpt, and rates it (not
useful: a degraded answer cannot be rated useful); then rates a verified run useful.
Screenshots land in artifacts/screenshots/ (git-ignored test artifacts).
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest

from diagnosis.models import CaseLibraryEntry, DiagnosisRun
from tests.console.conftest import PASSWORD
from tests.console.scenarios import evidence_retry_run, fallback_run, happy_run
from tests.factories import UserFactory

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def require_chromium() -> str:
    """Debian's chromium, named explicitly: a test tool's own browser download fails here."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `apt-get install chromium` (the browser tests need Debian's chromium).")
    return CHROMIUM


@pytest.fixture
def roles(transactional_db):
    """The roles of the data migration, made again: an earlier transactional test's flush removed them."""
    from django.apps import apps

    importlib.import_module("diagnosis.migrations.0002_roles").create_roles(apps, None)


@pytest.fixture
def browser_page():
    """Open a page on demand (inside the test, so a missing chromium fails the test, not its setup)."""
    from playwright.sync_api import sync_playwright

    opened = {}

    def open_page(width=1440, height=1000):
        executable = require_chromium()
        opened["playwright"] = sync_playwright().start()
        opened["browser"] = opened["playwright"].chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = opened["browser"].new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(15_000)
        return page

    yield open_page
    if "browser" in opened:
        opened["browser"].close()
    if "playwright" in opened:
        opened["playwright"].stop()


def _screenshot(page, name: str, **options) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), **options)
    return path


def _log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r".*/admin/$"))


def test_support_staff_filters_degraded_runs_opens_an_evidence_retry_run_and_rates_it(live_server, roles, browser_page):
    from django.contrib.auth.models import Group

    staff = UserFactory(username="sam", is_staff=True)
    staff.groups.add(Group.objects.get(name="support_staff"))
    owner = UserFactory(username="oncall-bot")
    healthy = [happy_run(owner=owner, question=f"Why is payment-service failing? (alert {n})") for n in range(3)]
    rejected = fallback_run(owner=owner)
    retried = evidence_retry_run(owner=owner)

    page = browser_page()
    _log_in(page, live_server, "sam")

    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/")
    assert page.locator("#result_list tbody tr").count() == 5
    _screenshot(page, "run_list.png", full_page=True)

    # 2. filter to degraded runs with the sidebar filter
    page.locator("#changelist-filter").get_by_role("link", name="Yes").first.click()
    page.wait_for_url(re.compile(r".*degraded__exact=1.*"))
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2
    listed = {rows.nth(i).locator("td.field-run_link a").get_attribute("title") for i in range(rows.count())}
    assert listed == {retried.run_id, rejected.run_id}
    assert not listed & {run.run_id for run in healthy}
    _screenshot(page, "run_list_degraded.png", full_page=True)

    # 3. open the run that went through an evidence retry
    page.locator(f'#result_list a[title="{retried.run_id}"]').click()
    page.wait_for_selector("#run-detail")
    assert page.locator("h1.rc-title").inner_text() == retried.run_id

    # 4. the route, the timeline and a highlighted verified excerpt are visible
    route = page.locator("#route svg.route-svg")
    assert route.is_visible()
    assert page.locator('#route g.node.visited[data-node="evidence_retry"]').count() == 1
    assert page.locator('#route g.edge.visited[data-source="verifier"][data-target="evidence_retry"]').count() == 1
    assert page.locator('#route g.node.fallback[data-node="fallback"]').count() == 1
    assert page.locator("#termination-reason").inner_text() == "fallback_completed"
    timeline = page.locator("#timeline .rc-step")
    assert timeline.count() == retried.step_count
    assert timeline.first.is_visible()
    assert page.locator("#timeline .rc-tl-phase").first.inner_text().startswith("↻ Evidence retry")
    audit_mark = page.locator("#gatekeeper .rc-evidence mark.evidence").first
    audit_mark.scroll_into_view_if_needed()
    assert audit_mark.is_visible()
    assert "Connection is not available" in audit_mark.inner_text()
    # … and inside the stored tool result the excerpt came from, opened in the timeline
    logs_id = retried.tool_invocations.get(tool_name="query_logs").invocation_id
    result_mark = page.locator(f'[id="{logs_id}"] pre.rc-result mark.evidence').first
    assert result_mark.is_visible()
    page.evaluate("window.scrollTo(0, 0)")
    _screenshot(page, "run_detail_top.png")
    _screenshot(page, "run_detail.png", full_page=True)
    page.locator("#route").scroll_into_view_if_needed()
    _screenshot(page, "run_detail_route.png")
    page.locator("#gatekeeper").screenshot(path=str(SCREENSHOTS / "run_detail_gatekeeper.png"))

    # the first step opens to its pretty-printed model input and output
    page.locator("#step-0 > summary").click()
    page.wait_for_selector("#step-0 .rc-msg-system")  # the step's model input loads when it opens
    assert page.locator("#step-0 .rc-msg-system").is_visible()
    page.locator("#timeline").screenshot(path=str(SCREENSHOTS / "run_detail_timeline.png"))

    # 5. submit feedback and see it stored: a degraded run has no verified answer, so "useful" is not offered
    page.locator("#feedback").scroll_into_view_if_needed()
    assert page.locator("#feedback-form input[value=useful]").count() == 0
    assert page.locator("#no-useful").is_visible()
    page.locator("#feedback-form input[value=not_useful]").check()
    page.fill("#feedback-form textarea[name=comment]", "Fell back: the verifier timed out, follow up on the model.")
    page.click("#feedback-form button[type=submit]")
    page.wait_for_selector(".messagelist .success")
    assert "Feedback saved: Not Useful" in page.locator(".messagelist").inner_text()
    assert page.locator("#current-feedback").inner_text() == "Not Useful"
    _screenshot(page, "run_detail_feedback.png")

    stored = DiagnosisRun.objects.get(pk=retried.pk)
    assert stored.feedback == "not_useful"
    assert stored.feedback_comment == "Fell back: the verifier timed out, follow up on the model."
    assert stored.feedback_by == staff
    assert stored.status == DiagnosisRun.Status.SUCCESS  # feedback never moves the status
    assert not CaseLibraryEntry.objects.filter(run=retried).exists()

    # a verified answer can be rated useful and enters the case library
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{healthy[0].pk}/change/#feedback")
    page.locator("#feedback-form input[value=useful]").check()
    page.click("#feedback-form button[type=submit]")
    page.wait_for_selector(".messagelist .success")
    assert page.locator("#current-feedback").inner_text() == "Useful"
    assert CaseLibraryEntry.objects.filter(run=healthy[0]).exists()
