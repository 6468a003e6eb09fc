"""The events endpoint's refusals: bounded Last-Event-ID and the per-user stream cap, as JSON errors."""

from __future__ import annotations

import pytest

from diagnosis.services.live_progress import stream_slots
from tests.api.conftest import alice_api  # noqa: F401
from tests.factories import ChatSessionFactory, DiagnosisRunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(alice):
    return DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), question="q")


@pytest.mark.parametrize("value", ["9" * 5000, "9" * 33, "-1", "1.5", "²", "abc"])
def test_a_bad_or_huge_last_event_id_is_400_json(alice_api, run, value):  # noqa: F811
    response = alice_api.get(f"/api/runs/{run.run_id}/events", HTTP_LAST_EVENT_ID=value, HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["field"] == "Last-Event-ID"


def test_the_stream_cap_answers_429_json_and_leaves_the_open_streams_alone(alice_api, alice, run, settings):  # noqa: F811
    settings.SSE_MAX_STREAMS_PER_USER = 1
    held = stream_slots.acquire(alice.pk)
    try:
        response = alice_api.get(f"/api/runs/{run.run_id}/events", HTTP_ACCEPT="text/event-stream")
        assert response.status_code == 429 and response["Content-Type"] == "application/json"
        assert response.json()["error"]["code"] == "too_many_streams"
        assert stream_slots.open_count(alice.pk) == 1
    finally:
        stream_slots.release(alice.pk, held)
