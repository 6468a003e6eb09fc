"""The tokens-and-cost page in a real browser: per day, per model and per route, drawn as server-side
SVG, costed with the prices of settings.MODEL_PRICES; a model without a price is marked, not free."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from diagnosis.models import DiagnosisRun
from tests.console.conftest import support_staff_create
from tests.console.test_browser import _log_in, _screenshot, browser_page, roles  # noqa: F401 (fixtures)
from tests.factories import DiagnosisRunFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _run(owner, *, days_ago, model, prompt, completion, flow="CHAT", strategy="DIAGNOSIS"):
    run = DiagnosisRunFactory(session__owner=owner, model_name=model, prompt_tokens=prompt,
                              completion_tokens=completion, agent_flow=flow, strategy=strategy)
    DiagnosisRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    return run


def test_tokens_and_cost_per_day_model_and_route(live_server, roles, browser_page, settings):
    settings.MODEL_PRICES = {"gpt-4o-mini": (1.0, 4.0)}
    support_staff_create("sam")
    owner = UserFactory(username="oncall-bot")
    _run(owner, days_ago=0, model="gpt-4o-mini", prompt=1_000_000, completion=500_000)  # $1 + $2
    _run(owner, days_ago=2, model="gpt-4o-mini", prompt=500_000, completion=0, strategy="SIMPLE")  # $0.5
    _run(owner, days_ago=2, model="mystery-model", prompt=7_000, completion=3_000, flow="AI_OPS")
    _run(owner, days_ago=40, model="gpt-4o-mini", prompt=9_000_000, completion=0)  # outside 30 days

    page = browser_page()
    _log_in(page, live_server, "sam")
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/")
    page.click("#usage-link")
    page.wait_for_selector("#usage")
    total = page.locator("#usage-total").inner_text()
    assert "3 runs" in total and "2,010,000 tokens" in total and "$3.5000" in total
    assert "1 run without a price" in total
    models = page.locator("#usage-by-model tbody tr")
    assert models.count() == 2
    assert page.locator('#usage-by-model tr[data-key="gpt-4o-mini"] td[data-cost]').get_attribute("data-cost") == "3.500000"
    assert "no price" in page.locator('#usage-by-model tr[data-key="mystery-model"]').inner_text()
    routes = {page.locator("#usage-by-route tbody tr").nth(i).get_attribute("data-key")
              for i in range(page.locator("#usage-by-route tbody tr").count())}
    assert routes == {"CHAT · DIAGNOSIS", "CHAT · SIMPLE", "AI_OPS · DIAGNOSIS"}
    bars = page.locator('svg.rc-usage-chart[data-measure="tokens"] rect.bar')
    assert bars.count() == 3  # today (one model), two days ago (two models)
    assert page.locator('svg.rc-usage-chart[data-measure="cost"] rect.bar').count() == 2  # the unpriced model has no bar
    _screenshot(page, "usage.png", full_page=True)

    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/usage/?days=90")
    assert "4 runs" in page.locator("#usage-total").inner_text()
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/usage/?days=ninety")
    assert page.locator("#days-error").is_visible()
    assert "3 runs" in page.locator("#usage-total").inner_text()
