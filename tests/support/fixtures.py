"""Pytest fixtures around the fake OpenAI server.

Use from any test package's conftest.py:

    from tests.support.fixtures import fake_openai  # noqa: F401  (re-export registers the fixture)

then ``def test_x(fake_openai): fake_openai.enqueue(Reply.text("hi")); ...``. To drive the app's
settings-based factory, pass ``openai_settings(fake_openai)`` as the LLM settings.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.support.fake_openai import FakeOpenAI

FAKE_API_KEY = "sk-fake-test-key-0123456789abcdef"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started FakeOpenAI server, closed (stalls cut short) when the test ends."""
    with FakeOpenAI() as server:
        yield server


def openai_settings(server: FakeOpenAI, **overrides: Any) -> dict[str, Any]:
    """Settings values for build_chat_model / Django settings pointing at `server`, with short timeouts."""
    settings: dict[str, Any] = {
        "LLM_PROVIDER": "openai",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": FAKE_API_KEY,
        "OPENAI_MODEL": "fake-default",
        "OPENAI_CONNECT_TIMEOUT": 1.0,
        "OPENAI_READ_TIMEOUT": 2.0,
        "OPENAI_MAX_RETRIES": 1,
    }
    settings.update(overrides)
    return settings
