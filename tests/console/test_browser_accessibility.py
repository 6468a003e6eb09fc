"""Every console page in a real browser, light and dark (the system setting and the page's toggle), at
1440 px and 390 px: axe-core (bundled by axe-playwright-python: nothing fetched) finds no serious or
critical violation (colour contrast of at least 4.5:1 included), nothing scrolls sideways at 390 px,
every column of the run list is visible at 1440 px, and route labels are legible on a phone."""

from __future__ import annotations

import re

import pytest

from diagnosis.models import CaseLibraryEntry
from tests.console.conftest import roles_create, support_staff_create
from tests.console.scenarios import evidence_retry_run, fallback_run, happy_run, ranked
from tests.console.test_browser import CHROMIUM_ARGS, SCREENSHOTS, _log_in, require_chromium
from tests.factories import DiagnosisRunFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DESKTOP, PHONE = (1440, 900), (390, 844)
BLOCKING = {"serious", "critical"}


@pytest.fixture
def console(transactional_db):
    """Runs of every kind and the staff account that reads them; the console's pages to visit."""
    roles_create()
    support_staff_create("sam")
    owner = UserFactory(username="oncall-bot")
    happy = ranked(happy_run(owner=owner))  # with the ranking section
    retried = evidence_retry_run(owner=owner)
    fallback_run(owner=owner)
    DiagnosisRunFactory(session__owner=owner, agent_flow="AI_OPS", status="SUCCESS", effective_verdict="LOW_CONFID",
                        question="Analyse 22 active alert(s): HighLatency (checkout) and 21 more.",
                        answer="Coverage: 3 of 22 alert(s) analysed. " + "unbroken" * 60,
                        diagnosis={"rootCause": None, "coverage": {"alertsAnalysed": 3, "alertsReceived": 22}})
    DiagnosisRunFactory(session__owner=owner, question="为什么支付服务的数据库连接池耗尽了？",
                        diagnosis={"rootCause": {"service": "ledger-db", "summary": "连接被拒绝"}})
    CaseLibraryEntry.objects.create(run=happy, session_id=happy.session.session_id, root_cause_summary="pool")
    base = "/admin/diagnosis/"
    return {
        "index": "/admin/",
        "run_list": f"{base}diagnosisrun/",
        "run_list_filtered": f"{base}diagnosisrun/?degraded__exact=1&latency=abc",
        "run_page": f"{base}diagnosisrun/{retried.pk}/change/",
        "run_page_happy": f"{base}diagnosisrun/{happy.pk}/change/",
        "review_queue": f"{base}diagnosisrun/review-queue/",
        "run_diff": f"{base}diagnosisrun/diff/?a={happy.run_id}&b={retried.run_id}",
        "sessions": f"{base}chatsession/",
        "session_page": f"{base}chatsession/{happy.session_id}/change/",
        "steps": f"{base}agentstep/?q={retried.run_id}",
        "tool_invocations": f"{base}toolinvocation/?q={retried.run_id}",
        "cases": f"{base}caselibraryentry/",
        "reviews": f"{base}runreview/",
        "usage": f"{base}diagnosisrun/usage/",
    }


@pytest.fixture
def open_browser():
    from playwright.sync_api import sync_playwright

    opened = {}

    def open_page(size, scheme: str = "light"):
        executable = require_chromium()
        if "playwright" not in opened:
            opened["playwright"] = sync_playwright().start()
            opened["browser"] = opened["playwright"].chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = opened["browser"].new_page(viewport={"width": size[0], "height": size[1]}, color_scheme=scheme)
        page.set_default_timeout(15_000)
        return page

    yield open_page
    if "browser" in opened:
        opened["browser"].close()
        opened["playwright"].stop()


def _blocking_violations(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    found = []
    for violation in results.response["violations"]:
        if violation.get("impact") in BLOCKING:
            for node in violation["nodes"][:8]:
                summary = " ".join(node.get("failureSummary", "").split())[:260]
                found.append(f"{violation['id']} ({violation['impact']}): {node['target']} {summary}")
    return found


def _is_dark(page) -> bool:
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    red, green, blue = (float(part) for part in re.findall(r"[\d.]+", background)[:3])
    return red + green + blue < 3 * 90


@pytest.mark.parametrize("mode", ["light", "dark-system", "dark-toggle"])
def test_every_console_page_passes_axe_light_and_dark(live_server, console, open_browser, mode):
    page = open_browser(DESKTOP, "dark" if mode == "dark-system" else "light")
    _log_in(page, live_server, "sam")
    if mode == "dark-toggle":
        page.evaluate("localStorage.setItem('theme', 'dark')")
    problems = {}
    for name, url in console.items():
        page.goto(f"{live_server.url}{url}")
        page.wait_for_load_state("networkidle")
        assert _is_dark(page) == (mode != "light"), f"{name}: the page does not follow the {mode} setting"
        found = _blocking_violations(page)
        if found:
            problems[name] = found
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"axe_{name}_{mode}.png"), full_page=True)
    if problems:
        (SCREENSHOTS / f"axe_{mode}.txt").write_text("\n".join(f"{n}: {p}" for n, ps in problems.items() for p in ps))
    assert not problems, problems


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_nothing_scrolls_sideways_at_390_px_and_route_labels_are_legible(live_server, console, open_browser, mode):
    page = open_browser(PHONE, mode)
    _log_in(page, live_server, "sam")
    wide = {}
    for name, url in console.items():
        page.goto(f"{live_server.url}{url}")
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE[0]:
            wide[name] = width
        if name == "run_page":
            sizes = page.evaluate("""() => Array.from(document.querySelectorAll('#route svg text')).map(t => {
                const box = t.getBoundingClientRect(); const font = parseFloat(getComputedStyle(t).fontSize);
                const svg = t.ownerSVGElement; const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
                return font * scale; })""")
            assert sizes and min(sizes) >= 10, f"route labels drawn at {min(sizes):.1f} px on a phone"
            figure = page.evaluate("(() => { const f = document.querySelector('.rc-route-figure'); "
                                   "return f.getBoundingClientRect().right; })()")
            assert figure <= PHONE[0]  # the drawing scrolls inside its box, not the page
    assert not wide, f"pages wider than {PHONE[0]} px: {wide}"


def test_every_run_list_column_is_visible_at_1440_px(live_server, console, open_browser):
    page = open_browser(DESKTOP)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}{console['run_list']}")
    headers = page.locator("#result_list thead th")
    assert headers.count() >= 12
    for i in range(headers.count()):
        box = headers.nth(i).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= DESKTOP[0], headers.nth(i).inner_text()
    created = page.locator("#result_list td.field-created").first.bounding_box()
    assert created["x"] + created["width"] <= DESKTOP[0]
    assert page.evaluate("document.documentElement.scrollWidth") <= DESKTOP[0]
    scroller = page.evaluate("""() => { const r = document.querySelector('#changelist .results');
        return r ? r.scrollWidth - r.clientWidth : 0; }""")
    widths = page.evaluate("Array.from(document.querySelectorAll('#result_list thead th')).map(t => "
                           "t.innerText.trim() + ':' + Math.round(t.getBoundingClientRect().width))")
    assert scroller <= 0, f"the run list scrolls inside its box: a column is cut ({widths})"
