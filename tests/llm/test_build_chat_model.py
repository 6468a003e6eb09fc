"""The settings-driven model factory."""
from __future__ import annotations

import sys
import types

import pytest

from diagnosis.llm import ChatRequest, ModelNonRetryableError, build_chat_model
from diagnosis.llm.openai_model import OpenAIChatModel
from tests.support.fake_openai import Reply
from tests.support.fixtures import openai_settings


def test_it_builds_an_openai_model_from_plain_settings(fake_openai):
    settings = openai_settings(fake_openai, OPENAI_MODEL_PLANNER="big-planner",
                               OPENAI_MODELS={"composer": "writer"}, OPENAI_READ_TIMEOUT="3.5",
                               OPENAI_MAX_RETRIES="0")

    model = build_chat_model(settings)

    assert isinstance(model, OpenAIChatModel)
    assert model.models["planner"] == "big-planner"
    assert model.models["composer"] == "writer"
    assert model.models["executor"] == "fake-default"
    assert (model.read_timeout, model.connect_timeout, model.max_retries) == (3.5, 1.0, 0)
    model.close()


def test_the_built_model_answers_through_the_configured_server(fake_openai):
    fake_openai.enqueue(Reply.text("hello"))
    model = build_chat_model(openai_settings(fake_openai))

    reply = model.complete(ChatRequest(role="simple", messages=[{"role": "user", "content": "hi"}]))

    assert reply.content == "hello"
    model.close()


def test_it_requires_an_api_key_for_openai(fake_openai):
    with pytest.raises(ModelNonRetryableError, match="OPENAI_API_KEY") as caught:
        build_chat_model(openai_settings(fake_openai, OPENAI_API_KEY=""))

    assert caught.value.code == "model_config_error"


def test_it_rejects_a_timeout_that_is_not_a_number(fake_openai):
    with pytest.raises(ModelNonRetryableError, match="OPENAI_READ_TIMEOUT must be a number"):
        build_chat_model(openai_settings(fake_openai, OPENAI_READ_TIMEOUT="soon"))


def test_it_rejects_an_unknown_provider():
    with pytest.raises(ModelNonRetryableError, match="Unknown LLM_PROVIDER 'claude'") as caught:
        build_chat_model({"LLM_PROVIDER": "claude"})

    assert caught.value.code == "model_config_error"


def test_it_builds_the_offline_analyser_by_default(monkeypatch):
    offline = types.ModuleType("diagnosis.llm.offline")

    class OfflineAnalyser:
        def complete(self, request):
            raise NotImplementedError

    offline.OfflineAnalyser = OfflineAnalyser
    monkeypatch.setitem(sys.modules, "diagnosis.llm.offline", offline)

    assert isinstance(build_chat_model({}), OfflineAnalyser)


def test_it_passes_the_settings_to_an_offline_analyser_that_wants_them(monkeypatch):
    offline = types.ModuleType("diagnosis.llm.offline")

    class OfflineAnalyser:
        def __init__(self, config=None):
            self.config = config

        @classmethod
        def from_config(cls, config):
            return cls(config)

    offline.OfflineAnalyser = OfflineAnalyser
    monkeypatch.setitem(sys.modules, "diagnosis.llm.offline", offline)

    assert build_chat_model({"LLM_PROVIDER": "offline", "X": 1}).config == {"LLM_PROVIDER": "offline", "X": 1}


def test_it_explains_when_the_offline_analyser_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "diagnosis.llm.offline", None)  # makes the import fail

    with pytest.raises(ModelNonRetryableError, match="diagnosis.llm.offline.OfflineAnalyser") as caught:
        build_chat_model({"LLM_PROVIDER": "offline"})

    assert caught.value.code == "model_config_error"
