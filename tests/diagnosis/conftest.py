"""Fixtures for running real diagnoses against database rows: demo knowledge, runs, a scripted model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings

from diagnosis.services import wiring
from diagnosis.services.knowledge import knowledge_load_folder
from tests.factories import ChatSessionFactory, DiagnosisRunFactory
from tests.support.fixtures import FAKE_API_KEY, fake_openai  # noqa: F401  (registers the fixture)

CUT_MARKER = " …[cut for the model; the full result is stored]"
TOOL_OUTPUT_RE = re.compile(r'<tool_output invocation_id="(?P<id>inv-[0-9a-f]{8})" tool="(?P<tool>[a-z_]+)" status="(?P<status>[A-Z]+)">\n[^\n]*\n(?P<body>.*)\n</tool_output>', re.S)


@pytest.fixture
def demo_knowledge(db):
    root = Path(settings.DEMO_SCENARIOS_DIR)
    for folder in sorted(p / "runbooks" for p in root.iterdir() if (p / "runbooks").is_dir()):
        knowledge_load_folder(folder=folder, prefix="runbooks/")
    wiring.reset_demo_backend()
    yield
    wiring.reset_demo_backend()


@pytest.fixture
def make_run(db, alice):
    def make(question: str, *, owner=None, **fields):
        session = ChatSessionFactory(owner=owner or alice)
        return DiagnosisRunFactory(session=session, question=question, **fields)

    return make


@pytest.fixture
def openai_llm(settings, fake_openai):  # noqa: F811
    settings.LLM_PROVIDER = "openai"
    settings.OPENAI_BASE_URL = fake_openai.base_url
    settings.OPENAI_API_KEY = FAKE_API_KEY
    settings.OPENAI_MODELS = {r: f"fake-{r}" for r in ("planner", "executor", "verifier", "composer", "simple", "aiops")}
    settings.LLM_READ_TIMEOUT = 1.0
    settings.LLM_CONNECT_TIMEOUT = 1.0
    settings.LLM_MAX_RETRIES = 1
    return fake_openai


def tool_outputs(request) -> list[dict]:
    """The fenced tool results the executor sent back to the model, parsed. A result longer than the
    model's share (``MODEL_TOOL_OUTPUT_CHARS``, e.g. every histogram bucket of a service) reaches the model
    cut, so it is no JSON any more: its ``result`` is None and ``cut`` says why."""
    outputs = []
    for message in request.tool_results:
        match = TOOL_OUTPUT_RE.search(message.get("content") or "")
        if match:
            cut = match["body"].endswith(CUT_MARKER)
            parsed = json.loads(match["body"]) if match["status"] == "SUCCESS" and not cut else None
            outputs.append({"invocation_id": match["id"], "tool": match["tool"], "status": match["status"],
                            "result": parsed, "cut": cut})
    return outputs


def user_payload(request) -> dict:
    return json.loads(request.messages[1]["content"])
