"""Fixtures for replay tests: a recorded run of a demo scenario, executed on the normal path."""

from __future__ import annotations

import pytest

from diagnosis.demo.loader import load_scenario_meta, scenario_dir
from diagnosis.ids import new_session_id
from diagnosis.models import ChatSession, DiagnosisRun
from diagnosis.services import wiring
from diagnosis.services.execution import run_execute
from diagnosis.tools.backends.demo import DemoBackend
from tests.api.conftest import alice_api, bob_api, support_api, token_client  # noqa: F401
from tests.diagnosis.conftest import demo_knowledge, fake_openai, openai_llm  # noqa: F401


def record_scenario(user, name: str, language: str = "en") -> DiagnosisRun:
    """Diagnose a scenario's default question against a world holding only that scenario."""
    folder = scenario_dir(name)
    question = load_scenario_meta(folder)["default_question"][language]
    session = ChatSession.objects.create(session_id=new_session_id(), owner=user)
    run = DiagnosisRun.objects.create(session=session, question=question)
    with wiring.telemetry_override(DemoBackend([folder])):
        run_execute(run_id=run.run_id)
    run.refresh_from_db()
    return run


@pytest.fixture
def recorded(alice, demo_knowledge):  # noqa: F811
    return lambda name, language="en", user=None: record_scenario(user or alice, name, language)
