"""Fixtures for the model-client tests: the fake OpenAI server and a model pointed at it."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from diagnosis.llm.openai_model import OpenAIChatModel
from tests.support.fake_openai import FakeOpenAI
from tests.support.fixtures import FAKE_API_KEY, fake_openai  # noqa: F401  (registers the fixture)


@pytest.fixture
def make_model(fake_openai: FakeOpenAI) -> Iterator[Callable[..., OpenAIChatModel]]:  # noqa: F811
    """Build an OpenAIChatModel against the fake server; retries back off in milliseconds."""
    models: list[OpenAIChatModel] = []

    def build(**overrides: Any) -> OpenAIChatModel:
        options: dict[str, Any] = {
            "base_url": fake_openai.base_url,
            "api_key": FAKE_API_KEY,
            "default_model": "fake-default",
            "connect_timeout": 1.0,
            "read_timeout": 2.0,
            "max_retries": 2,
            "backoff_base": 0.01,
        }
        options.update(overrides)
        model = OpenAIChatModel(**options)
        models.append(model)
        return model

    yield build
    for model in models:
        model.close()


@pytest.fixture(autouse=True)
def _forget_learned_structured_output_levels():
    """A downgrade learned from one scripted server must not reach a later test's server on the same port."""
    from diagnosis.llm import openai_model

    yield
    openai_model._LEARNED_LEVELS.clear()
