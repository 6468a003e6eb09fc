"""The trust line in a real browser, on a run's page and its row in the list: a PASS whose root cause is
on another service than the one asked about is flagged, an alert analysis whose citations were all
verified shows its verdict, and one that analysed 3 of 22 alerts says so."""

from __future__ import annotations

import pytest

from tests.console.conftest import support_staff_create
from tests.console.test_browser import _log_in, _screenshot, browser_page, roles  # noqa: F401 (fixtures)
from tests.factories import DiagnosisRunFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
LIST = "/admin/diagnosis/diagnosisrun/"


@pytest.fixture
def trust_runs(roles):
    owner = UserFactory(username="oncall-bot")
    rules = {"claims_verified": 5, "claims_total": 5, "alerts_analysed": 4, "alerts_total": 4, "degraded": False}
    return {
        "elsewhere": DiagnosisRunFactory(
            session__owner=owner, question="Why is payment-service failing?", status="SUCCESS",
            effective_verdict="PASS", answer="The ledger database refused connections.",
            diagnosis={"rootCause": {"service": "ledger-db", "summary": "refused connections"}, "nothingWrong": False}),
        "no_data": DiagnosisRunFactory(
            session__owner=owner, question="Is checkout slow?", status="SUCCESS", effective_verdict="LOW_CONFID",
            diagnosis={"subject": {"services": ["checkout-service"], "withoutData": ["checkout-service"]},
                       "rootCause": None, "undetermined": True}),
        "calm": DiagnosisRunFactory(
            session__owner=owner, question="Is search-service healthy?", status="SUCCESS", effective_verdict="PASS",
            diagnosis={"rootCause": None, "nothingWrong": True, "undetermined": False}),
        "alerts_all": DiagnosisRunFactory(
            session__owner=owner, agent_flow="AI_OPS", status="SUCCESS", effective_verdict="",
            question="Analyse 4 active alert(s): A (svc-a), B (svc-b), C (svc-c), D (svc-d).",
            diagnosis={"rootCause": None, "undetermined": True, "coverage": {"alertsAnalysed": 4, "alertsReceived": 4}},
            self_evaluation={"aiops_rule_evaluation": rules}),
        "alerts_few": DiagnosisRunFactory(
            session__owner=owner, agent_flow="AI_OPS", status="SUCCESS", effective_verdict="LOW_CONFID",
            question="Analyse 22 active alert(s): HighLatency (checkout) and 21 more.",
            diagnosis={"rootCause": None, "undetermined": True, "coverage": {"alertsAnalysed": 3, "alertsReceived": 22}}),
    }


def _row(page, run):
    return page.locator("#result_list tbody tr", has=page.locator(f'a[title="{run.run_id}"]'))


def test_the_trust_line_flags_what_a_reviewer_must_see_on_the_page_and_in_the_list(live_server, trust_runs,
                                                                                    browser_page):
    support_staff_create("sam")
    page = browser_page()
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}{LIST}")

    elsewhere = _row(page, trust_runs["elsewhere"]).locator(".rc-trust")
    assert elsewhere.locator("[data-part=asked]").inner_text() == "payment-service"
    assert elsewhere.locator("[data-part=root]").inner_text() == "ledger-db"
    assert "root cause on another service" in elsewhere.locator("[data-part=flag]").inner_text()
    assert elsewhere.is_visible()
    assert "no data for checkout-service" in _row(page, trust_runs["no_data"]).locator(".rc-trust").inner_text()
    assert "nothing wrong" in _row(page, trust_runs["calm"]).locator(".rc-trust").inner_text()
    few = _row(page, trust_runs["alerts_few"]).locator(".rc-trust")
    assert few.locator("[data-part=coverage]").inner_text() == "analysed 3 of 22 alerts"
    assert "not every alert analysed" in few.inner_text()
    _screenshot(page, "run_list_trust.png", full_page=True)

    page.goto(f"{live_server.url}{LIST}{trust_runs['elsewhere'].pk}/change/")
    line = page.locator("#trust-line")
    assert line.is_visible() and "root cause on another service" in line.inner_text()
    assert "verdict PASS" in line.inner_text()

    page.goto(f"{live_server.url}{LIST}{trust_runs['alerts_all'].pk}/change/")
    assert page.locator("#run-verdict").inner_text() == "verdict PASS"  # not "no verdict"
    assert "analysed 4 of 4 alerts" in page.locator("#trust-line").inner_text()
    page.goto(f"{live_server.url}{LIST}{trust_runs['alerts_few'].pk}/change/")
    assert "analysed 3 of 22 alerts" in page.locator("#trust-line").inner_text()
    assert "undetermined" not in page.locator("#trust-line").inner_text()  # an alert analysis has no single root
    _screenshot(page, "run_detail_trust_aiops.png")
