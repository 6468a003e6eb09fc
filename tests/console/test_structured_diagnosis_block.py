"""The run page shows the run's structured diagnosis in a small block, escaped like every run field."""

from __future__ import annotations

import pytest
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from tests.console.scenarios import happy_run

pytestmark = pytest.mark.django_db


def _page(client, run) -> str:
    return client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk])).content.decode()


def test_the_root_cause_block_names_service_cause_and_summary(auditor_client, alice):
    run = happy_run(owner=alice)
    DiagnosisRun.objects.filter(pk=run.pk).update(diagnosis={
        "rootCause": {"service": "payment-service", "cause": "db_connection_pool_exhausted",
                      "summary": "Root cause: pool <b>exhausted</b>", "startedAt": "2026-11-30T10:00:00Z",
                      "claimIds": ["c1"]},
        "nothingWrong": False, "undetermined": False,
        "symptoms": [{"service": "checkout-service", "summary": "5xx up", "claimIds": ["c2"]}]})
    page = _page(auditor_client, run)
    block = page[page.index('id="structured-diagnosis"'):][:1500]
    assert "payment-service" in block and "db_connection_pool_exhausted" in block and "since 2026-11-30T10:00:00Z" in block
    assert "pool &lt;b&gt;exhausted&lt;/b&gt;" in block and "<b>exhausted</b>" not in block
    assert "checkout-service" in block


def test_an_undetermined_run_says_so_and_a_run_without_diagnosis_has_no_block(auditor_client, alice):
    run = happy_run(owner=alice)
    assert 'id="structured-diagnosis"' not in _page(auditor_client, run)
    DiagnosisRun.objects.filter(pk=run.pk).update(diagnosis={"rootCause": None, "nothingWrong": False,
                                                             "undetermined": True, "symptoms": []})
    page = _page(auditor_client, run)
    assert "undetermined" in page[page.index('id="structured-diagnosis"'):][:800]


def test_a_root_cause_resting_only_on_knowledge_is_labelled_and_capped(staff_client, alice):
    from diagnosis.models import DiagnosisRun
    from tests.console.scenarios import happy_run

    run = happy_run(owner=alice)
    DiagnosisRun.objects.filter(pk=run.pk).update(effective_verdict="LOW_CONFID", diagnosis={
        "rootCause": {"service": None, "cause": "resource.pool", "summary": "A runbook says the pool runs dry.",
                      "startedAt": None, "claimIds": ["c1"], "basis": "knowledge_only"},
        "nothingWrong": False, "undetermined": False, "symptoms": []})
    page = staff_client.get(f"/admin/diagnosis/diagnosisrun/{run.pk}/change/").content.decode()
    block = page[page.index('id="structured-diagnosis"'):]
    block = block[:block.index("</section>")]
    assert "runbook or case only" in block and "capped at LOW_CONFID" in block
