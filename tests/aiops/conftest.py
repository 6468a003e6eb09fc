"""Fixtures for the alert-analysis tests: API clients, demo knowledge, the scripted model, payloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from tests.api.conftest import alice_api, bob_api, sse_events, token_client  # noqa: F401  (re-exported fixtures)
from tests.diagnosis.conftest import demo_knowledge, fake_openai, openai_llm  # noqa: F401

SCENARIOS = Path(settings.DEMO_SCENARIOS_DIR)


@pytest.fixture(autouse=True)
def run_executor(request):
    """Database tests: tasks run eagerly in the embedded pass, on a real worker in the services pass."""
    from tests.conftest import services_available

    if (services_available() and request.node.get_closest_marker("django_db")
            and "eager_tasks" not in request.fixturenames):
        request.getfixturevalue("live_worker")


def scenario_alerts(name: str) -> list[dict]:
    """A demo scenario's alerts as a client sends them: labels, annotations, state."""
    raw = json.loads((SCENARIOS / name / "alerts.json").read_text())["alerts"]
    return [{"labels": a["labels"], "annotations": a["annotations"], "state": a["state"]} for a in raw]


def webhook(alerts: list[dict], *, resolved: list[dict] = ()) -> dict:
    """An Alertmanager webhook payload (version "4") with these firing and resolved alerts."""
    def one(alert: dict, status: str, n: int) -> dict:
        return {"status": status, "labels": alert["labels"], "annotations": alert["annotations"],
                "startsAt": "2026-11-29T10:00:00.828Z",
                "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-11-29T10:20:00Z",
                "generatorURL": "http://prometheus.example.org:9090/graph?g0.expr=up\u0026g0.tab=1",
                "fingerprint": f"1a30ba71cca2{n:04x}"}

    items = [one(a, "firing", i) for i, a in enumerate(alerts)] + [one(a, "resolved", 100 + i) for i, a in enumerate(resolved)]
    return {"receiver": "web\\.hook", "status": "firing", "alerts": items,
            "groupLabels": {"alertname": items[0]["labels"]["alertname"]} if items else {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://alertmanager.example.org:9093", "version": "4",
            "groupKey": '{}/{severity="critical"}:{alertname="PaymentServiceHighErrorRate"}', "truncatedAlerts": 0}
