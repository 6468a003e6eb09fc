"""Opening a citation of the Gatekeeper audit brings its excerpt into view, below the sticky menu, and
highlights it, in a tool output of any length: one that scrolls inside its box, and a large one that the
page shows as a window around each excerpt."""

from __future__ import annotations

import pytest

from diagnosis.models import DiagnosisRun, ToolInvocation
from tests.console.test_browser_triage import CITED, DESKTOP, PHONE, staff  # noqa: F401 (fixture)
from tests.console.test_browser import _log_in, _screenshot, browser_page  # noqa: F401 (fixture)
from tests.console.scenarios import happy_run
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _run_citing(record_count: int, cited_index: int) -> tuple[DiagnosisRun, str]:
    run = happy_run(owner=UserFactory(username=f"oncall-{record_count}"))
    logs = run.tool_invocations.get(tool_name="query_logs")
    records = [{"timestamp": "2026-11-29T09:00:00Z", "level": "INFO",
                "message": f"GET /v1/payments/{i} 200 in 12ms trace=" + "ab" * 20} for i in range(record_count)]
    records[cited_index] = {"timestamp": "2026-11-29T10:02:13Z", "level": "ERROR", "message": CITED}
    ToolInvocation.objects.filter(pk=logs.pk).update(result={**logs.result, "records": records})
    evaluation = run.self_evaluation
    binding = evaluation["verifier_evaluation"]["gatekeeper_audit"]["audit"][0]["bindings"][0]
    binding.update(raw_path=f"$.records[{cited_index}].message",
                   evidence_excerpt="Connection is not available, request timed out")
    DiagnosisRun.objects.filter(pk=run.pk).update(self_evaluation=evaluation)
    return run, logs.invocation_id


def _in_view_below_the_menu(page, mark) -> bool:
    box = mark.bounding_box()
    nav = page.locator(".rc-nav").bounding_box()
    pre = mark.locator("xpath=ancestor::pre[1]").bounding_box()
    viewport = page.viewport_size
    return (box is not None and box["y"] >= nav["y"] + nav["height"] and box["y"] + box["height"] <= viewport["height"]
            and pre["y"] <= box["y"] and box["y"] + box["height"] <= pre["y"] + pre["height"])


@pytest.mark.parametrize("size", [(45, 41), (6000, 5871)], ids=["scrolling-box", "large-windowed"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_opening_a_citation_brings_its_excerpt_into_view_below_the_sticky_menu(live_server, staff, browser_page,
                                                                                  size, viewport):
    run, invocation_id = _run_citing(*size)
    page = browser_page(*viewport)
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/{run.pk}/change/")
    # read the audit first, as a reviewer does: the page is scrolled to the citation, far from the result
    link = page.locator(f'#gatekeeper .rc-binding a[href="#{invocation_id}"]').first
    link.scroll_into_view_if_needed()
    link.click()
    mark = page.locator(f'[id="{invocation_id}"] pre.rc-result mark.evidence').first
    mark.wait_for(state="attached")
    page.wait_for_function("() => document.querySelector('mark.rc-mark-focus') !== null")
    page.wait_for_timeout(200)
    assert "Connection is not available" in mark.inner_text()
    assert "rc-mark-focus" in (mark.get_attribute("class") or "")
    assert _in_view_below_the_menu(page, mark), (mark.bounding_box(), page.locator(".rc-nav").bounding_box(),
                                                 mark.locator("xpath=ancestor::pre[1]").bounding_box())
    _screenshot(page, f"run_detail_citation_{size[0]}_{viewport[0]}.png")
