"""Triage in a real browser (Playwright driving Debian's chromium): the review queue, the run diff, an
alert-analysis audit, a windowed large result with its cited line highlighted, and Chinese text drawn
with a CJK font (not as boxes). Screenshots at 1440x900 and 390x844 go to artifacts/screenshots/."""

from __future__ import annotations

import re
import struct
import zlib

import pytest

from diagnosis.models import DiagnosisRun, RunReview, ToolInvocation
from tests.aiops.conftest import scenario_alerts, sse_events
from tests.api.conftest import token_client
from tests.console.conftest import roles_create, support_staff_create
from tests.console.scenarios import evidence_retry_run, fallback_run, happy_run
from tests.console.test_browser import SCREENSHOTS, _log_in, _screenshot, browser_page  # noqa: F401  (fixture)
from tests.diagnosis.conftest import demo_knowledge  # noqa: F401  (fixture)
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DESKTOP, PHONE = (1440, 900), (390, 844)
CITED = "HikariPool-1 - Connection is not available, request timed out after 30000ms (total=20, active=20)"


@pytest.fixture
def staff(transactional_db):
    roles_create()
    return support_staff_create("sam")


def _both_sizes(page, live_server, path: str, name: str, ready: str) -> None:
    """Screenshots of one page at the desktop and the phone size; the phone page must not scroll sideways."""
    for (width, height), suffix in ((DESKTOP, "1440"), (PHONE, "390")):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}{path}")
        page.wait_for_selector(ready)
        _screenshot(page, f"{name}_{suffix}.png")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        wide = page.evaluate("""(w) => [...document.querySelectorAll('body *')]
            .filter(el => el.getBoundingClientRect().right > w + 1 && el.getClientRects().length)
            .slice(-6).map(el => el.tagName + '.' + el.className + '#' + el.id + ' ' + Math.round(el.getBoundingClientRect().right))""",
                             width)
        assert overflow <= 1, f"{name} at {width}px is {overflow}px wider than the screen: {wide}"
    page.set_viewport_size({"width": DESKTOP[0], "height": DESKTOP[1]})


def test_support_staff_works_the_review_queue(live_server, staff, browser_page):
    owner = UserFactory(username="oncall-bot")
    happy_run(owner=owner)
    degraded = fallback_run(owner=owner)
    low = evidence_retry_run(owner=owner)
    page = browser_page(*DESKTOP)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/")
    page.click("#review-queue-link")
    page.wait_for_selector("#queue-table")
    listed = page.locator("#queue-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
    assert set(listed) >= {degraded.run_id, low.run_id}
    _both_sizes(page, live_server, "/admin/diagnosis/diagnosisrun/review-queue/", "review_queue", "#queue-table")

    page.locator(f'#queue-table tr[data-run-id="{degraded.run_id}"] a').first.click()
    page.wait_for_selector("#review-form")
    page.select_option("#review-form select[name=assignee]", label="sam")
    page.check('#review-form input[value="missing_evidence"]')
    page.check('#review-form input[value="bad_citation"]')
    page.select_option("#review-form select[name=resolution]", "answer_wrong")
    page.fill("#review-form textarea[name=note]", "The fallback hid a real pool problem.")
    page.click("#review-form button[type=submit]")
    page.wait_for_selector(".messagelist .success")
    assert page.locator("#review-status").inner_text() == "resolved"
    assert page.locator("#review-history tbody tr").count() == 2  # opened, resolved
    assert "sam" in page.locator("#review-history").inner_text()
    page.locator("#review").screenshot(path=str(SCREENSHOTS / "run_detail_review.png"))
    review = RunReview.objects.get(run=degraded)
    assert review.status == "resolved" and review.reasons == ["missing_evidence", "bad_citation"]
    assert review.resolved_by.username == "sam"

    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/review-queue/?state=resolved")
    assert page.locator("#queue-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)") == [
        degraded.run_id]


def test_two_runs_side_by_side(live_server, staff, browser_page):
    owner = UserFactory(username="oncall-bot")
    before = happy_run(owner=owner)
    after = evidence_retry_run(owner=owner)
    page = browser_page(*DESKTOP)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{before.pk}/change/")
    page.click("#compare-link")
    page.fill('#diff-form input[name=b]', after.run_id[:12])
    page.click("#diff-form button[type=submit]")
    page.wait_for_selector("#diff-grid")
    changed = page.locator('#diff-grid [data-side="right"][data-field="tokens"]')
    assert "rc-changed" in changed.get_attribute("class")
    assert "rc-changed" not in page.locator('#diff-grid [data-side="right"][data-field="model"]').get_attribute("class")
    added = page.locator('#diff-grid [data-field="tools called"][data-side="right"] li.added')
    assert added.inner_text() == "query_metrics"
    background = added.evaluate("el => getComputedStyle(el).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")  # highlighted, not just marked up
    assert "differences" in page.locator("#diff-summary").inner_text()
    url = f"/admin/diagnosis/diagnosisrun/diff/?a={before.run_id}&b={after.run_id}"
    _both_sizes(page, live_server, url, "run_diff", "#diff-grid")


def test_an_alert_analysis_is_audited_like_a_chat_run(live_server, staff, browser_page, demo_knowledge,  # noqa: F811
                                                      eager_tasks):
    owner = UserFactory(username="alertmanager")
    response = token_client(owner).post("/api/ai_ops", {"alerts": scenario_alerts("payment-db-pool-exhaustion")},
                                        format="json")
    run = DiagnosisRun.objects.get(run_id=sse_events(response)[0]["data"]["runId"])
    page = browser_page(*DESKTOP)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{run.pk}/change/")
    page.wait_for_selector("#run-detail")
    assert "did not reach the Gatekeeper" not in page.content()
    route = page.locator("#route svg.route-svg")
    assert route.is_visible() and page.locator("#aiops-route").count() == 0
    transitions = run.orchestration_trace["transitions"]
    badges = route.locator("g.seq text").all_text_contents()
    numbers = sorted(int(n) for badge in badges for n in re.findall(r"#(\d+)", badge))
    assert numbers == list(range(1, len(transitions) + 1))  # every transition numbered once, in order
    box = route.locator('g.node[data-node="aiops_report_check"]').bounding_box()
    assert box and box["width"] > 40 and "final" in route.locator('g.node[data-node="aiops_report_check"]').get_attribute("class")
    assert route.locator('g.edge.visited[data-source="aiops_gatekeeper"][data-target="aiops_planner"]').count() == 1
    page.locator("#route").screenshot(path=str(SCREENSHOTS / "run_detail_aiops_route.png"))
    decisions = page.locator("#aiops-decisions tbody tr")
    assert decisions.count() == len(run.self_evaluation["aiops_audit"]["decisions"])
    report = page.locator("#report-check")
    report.scroll_into_view_if_needed()
    mark = report.locator(".rc-evidence mark.evidence").first
    assert mark.is_visible()
    cited = run.self_evaluation["aiops_audit"]["report_check"]["cited_invocation_ids"][0]
    result_mark = page.locator(f'[id="{cited}"] pre.rc-result mark.evidence').first
    result_mark.scroll_into_view_if_needed()
    assert result_mark.is_visible()
    page.locator("#gatekeeper").screenshot(path=str(SCREENSHOTS / "run_detail_aiops_audit.png"))
    _both_sizes(page, live_server, f"/admin/diagnosis/diagnosisrun/{run.pk}/change/", "run_detail_aiops",
                "#run-detail")


def test_a_large_result_shows_its_cited_line_and_show_all_loads_the_rest(live_server, staff, browser_page):
    run = happy_run(owner=UserFactory(username="oncall-bot"))
    logs = run.tool_invocations.get(tool_name="query_logs")
    records = [{"timestamp": "2026-11-29T09:00:00Z", "level": "INFO",
                "message": f"GET /v1/payments/{i} 200 in 12ms trace=" + "ab" * 40} for i in range(6000)]
    records[5871] = {"timestamp": "2026-11-29T10:02:13Z", "level": "ERROR", "message": CITED}
    ToolInvocation.objects.filter(pk=logs.pk).update(result={**logs.result, "records": records})
    evaluation = run.self_evaluation
    binding = evaluation["verifier_evaluation"]["gatekeeper_audit"]["audit"][0]["bindings"][0]
    binding.update(raw_path="$.records[5871].message", evidence_excerpt="Connection is not available, request timed out")
    DiagnosisRun.objects.filter(pk=run.pk).update(self_evaluation=evaluation)

    page = browser_page(*DESKTOP)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{run.pk}/change/")
    tool = page.locator(f'[id="{logs.invocation_id}"]')
    mark = tool.locator("pre.rc-result mark.evidence")
    mark.scroll_into_view_if_needed()
    assert mark.count() == 1 and mark.is_visible()
    assert mark.inner_text() == "Connection is not available, request timed out"
    assert "items not shown" in tool.locator("pre.rc-result").inner_text()
    tool.screenshot(path=str(SCREENSHOTS / "run_detail_large_result_window.png"))
    tool.locator(".rc-show-all").click()
    page.wait_for_selector(f'[id="{logs.invocation_id}"] pre.rc-result-full')
    full = tool.locator("pre.rc-result")
    assert "items not shown" not in full.inner_text() and "/v1/payments/17 " in full.inner_text()
    mark = full.locator("mark.evidence")
    assert mark.count() == 1
    assert mark.is_visible()  # the full result opens scrolled to the cited line
    tool.screenshot(path=str(SCREENSHOTS / "run_detail_large_result_full.png"))
    # the lazily loaded step bodies arrive when a step opens
    page.locator("#step-0 > summary").click()
    page.wait_for_selector("#step-0 .rc-msg-system")


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Rows of an 8-bit RGB/RGBA PNG (what chromium writes), unfiltered: enough to compare glyphs."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line[i] for i in range(0, stride, channels)))  # the red channel is enough
        previous = line
    return width, height, rows


def _ink(rows: list[bytes]) -> int:
    return sum(1 for row in rows for value in row if value < 128)


def test_chinese_is_drawn_with_a_cjk_font_not_as_boxes(live_server, staff, browser_page):
    question = "为什么支付服务的数据库连接池耗尽了？"
    run = happy_run(owner=UserFactory(username="oncall-bot"), question=question)
    page = browser_page(*DESKTOP)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{run.pk}/change/")
    node = page.locator(".rc-question p")
    assert node.inner_text() == question
    # The font chromium really used for the question (not just the one the CSS names).
    session = page.context.new_cdp_session(page)
    session.send("DOM.enable")
    session.send("CSS.enable")
    root = session.send("DOM.getDocument")["root"]["nodeId"]
    node_id = session.send("DOM.querySelector", {"nodeId": root, "selector": ".rc-question p"})["nodeId"]
    fonts = [f["familyName"] for f in session.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]]
    assert any("CJK" in name or "Han" in name for name in fonts), fonts

    def glyph(text: str) -> tuple[bytes, list[bytes]]:
        """One character drawn alone in the question's font, cut out of a screenshot."""
        page.evaluate("""(text) => {
            const p = document.querySelector('.rc-question p');
            let probe = document.getElementById('glyph-probe');
            if (!probe) { probe = document.createElement('span'); probe.id = 'glyph-probe';
                          probe.style.cssText = 'display:inline-block;padding:4px;background:#fff;color:#000;font-size:40px';
                          p.appendChild(probe); }
            probe.textContent = text; }""", text)
        png = page.locator("#glyph-probe").screenshot()
        return png, _png_pixels(png)[2]

    tofu_png, tofu = glyph("\U0010fffd")  # a private-use code point: no font has it, so it is the box
    shapes = [glyph(ch) for ch in "数据库"]
    _screenshot(page, "run_detail_chinese_1440.png")
    for png, rows in shapes:
        assert _ink(rows) > 0
        assert rows != tofu, "a Chinese character was drawn as the missing-glyph box"
    assert len({png for png, _ in shapes}) == 3  # three characters, three different shapes (boxes are all alike)
    page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{run.pk}/change/")
    _screenshot(page, "run_detail_chinese_390.png")


def test_the_run_list_and_run_page_fit_the_desktop_and_the_phone(live_server, staff, browser_page):
    owner = UserFactory(username="oncall-bot")
    for n in range(3):
        happy_run(owner=owner, question=f"Why is payment-service failing? (alert {n})")
    retried = evidence_retry_run(owner=owner)
    page = browser_page(*DESKTOP)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/")
    # at 1440 px every column of the list is inside the window
    right = page.locator("#result_list thead th").last.evaluate("el => el.getBoundingClientRect().right")
    assert right <= DESKTOP[0]
    _both_sizes(page, live_server, "/admin/diagnosis/diagnosisrun/", "run_list", "#result_list")
    _both_sizes(page, live_server, f"/admin/diagnosis/diagnosisrun/{retried.pk}/change/", "run_detail", "#run-detail")
    # the dark theme reaches the run page
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{retried.pk}/change/")
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    background = page.locator("#content").evaluate("el => getComputedStyle(el).backgroundColor")
    assert background == "rgb(15, 23, 42)", background
    _screenshot(page, "run_detail_dark_1440.png")
    assert re.search(r"favicon|icon", page.locator("link[rel=icon]").get_attribute("rel"))
