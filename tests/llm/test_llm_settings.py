"""The model settings added for interoperability: strict parsing at start-up, with the variable named."""
from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.foundation.test_settings import load


def test_the_defaults_bound_every_role_and_ask_for_the_schema(monkeypatch):
    s = load(monkeypatch)
    assert s["LLM_STRUCTURED_OUTPUT"] == "json_schema" and s["LLM_TOOL_CALL_CONTENT"] == "empty"
    assert s["LLM_MAX_TOKENS_PARAM"] == "max_tokens"
    assert set(s["LLM_MAX_TOKENS"]) == {"planner", "executor", "verifier", "composer", "simple", "aiops"}
    assert all(16 <= n <= 32_768 for n in s["LLM_MAX_TOKENS"].values())


def test_the_settings_are_read_from_the_environment(monkeypatch):
    s = load(monkeypatch, LLM_STRUCTURED_OUTPUT="json_object_schema", LLM_TOOL_CALL_CONTENT="null",
             LLM_MAX_TOKENS_PLANNER="256", LLM_MAX_TOKENS_AIOPS="4096", LLM_MAX_TOKENS_PARAM="max_completion_tokens")
    assert s["LLM_STRUCTURED_OUTPUT"] == "json_object_schema" and s["LLM_TOOL_CALL_CONTENT"] == "null"
    assert s["LLM_MAX_TOKENS"]["planner"] == 256 and s["LLM_MAX_TOKENS"]["aiops"] == 4096
    assert s["LLM_MAX_TOKENS_PARAM"] == "max_completion_tokens"


@pytest.mark.parametrize("values, fragment", [
    ({"LLM_STRUCTURED_OUTPUT": "grammar"}, "LLM_STRUCTURED_OUTPUT='grammar' is not supported"),
    ({"LLM_TOOL_CALL_CONTENT": "none"}, "LLM_TOOL_CALL_CONTENT='none' is not supported"),
    ({"LLM_MAX_TOKENS_PLANNER": "lots"}, "LLM_MAX_TOKENS_PLANNER='lots' is not an integer"),
    ({"LLM_MAX_TOKENS_VERIFIER": "1.5"}, "LLM_MAX_TOKENS_VERIFIER='1.5' is not an integer"),
    ({"LLM_MAX_TOKENS_COMPOSER": "0"}, "LLM_MAX_TOKENS_COMPOSER=0 is below the minimum 16"),
    ({"LLM_MAX_TOKENS_EXECUTOR": "100000"}, "LLM_MAX_TOKENS_EXECUTOR=100000 is above the maximum 32768"),
    ({"LLM_MAX_TOKENS_PARAM": "max_new_tokens"}, "LLM_MAX_TOKENS_PARAM='max_new_tokens' is not supported"),
])
def test_bad_values_stop_start_up_naming_the_variable(monkeypatch, values, fragment):
    with pytest.raises(ImproperlyConfigured) as info:
        load(monkeypatch, **values)
    assert fragment in str(info.value)
