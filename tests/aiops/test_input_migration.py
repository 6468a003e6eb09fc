"""diagnosis/migrations/0008_run_input.py: alerts submitted before the `input` column keep them."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps

from diagnosis.models import DiagnosisRun, RunEvent
from diagnosis.services.aiops import aiops_input
from tests.factories import DiagnosisRunFactory

migration = import_module("diagnosis.migrations.0008_run_input")
pytestmark = pytest.mark.django_db

SUBMITTED = {"alerts": [{"alert_id": "a1", "alertname": "PaymentServiceHighErrorRate"}], "alertsTotal": 1,
             "alertsIgnored": 0, "source": "request"}


def test_the_first_input_event_of_a_run_becomes_its_input():
    old = DiagnosisRunFactory(agent_flow="AI_OPS")
    RunEvent.objects.create(run=old, kind="input", data=SUBMITTED)
    RunEvent.objects.create(run=old, kind="input", data={"alerts": [], "source": "later"})
    chat = DiagnosisRunFactory()
    RunEvent.objects.create(run=chat, kind="status", data={"status": "RUNNING"})
    kept = DiagnosisRunFactory(agent_flow="AI_OPS", input={"alerts": [], "source": "column"})
    RunEvent.objects.create(run=kept, kind="input", data=SUBMITTED)

    migration.copy_input_events(apps, None)

    assert aiops_input(DiagnosisRun.objects.get(pk=old.pk)) == SUBMITTED
    assert DiagnosisRun.objects.get(pk=chat.pk).input is None
    assert DiagnosisRun.objects.get(pk=kept.pk).input["source"] == "column"  # a stored input is never replaced
