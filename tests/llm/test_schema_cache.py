"""The wire schemas are generated once per (model, tools) and handed out as fresh copies: the same
schema a fresh generation gives, that no caller can change for the next one."""
from __future__ import annotations

import pytest

from diagnosis.agents.runtime import TOOL_PARAMETERS
from diagnosis.llm import schemas

TOOLS = [None, {"tool_parameters": TOOL_PARAMETERS}, {"tool_names": ["query_logs", "query_alerts"]},
         {"tool_names": ["query_logs"], "tool_parameters": TOOL_PARAMETERS}]


@pytest.mark.parametrize("model", sorted(set(schemas.OUTPUTS.values()), key=lambda m: m.__name__))
@pytest.mark.parametrize("tools", TOOLS)
def test_a_cached_schema_is_the_schema_a_fresh_generation_gives(model, tools):
    options = tools or {}
    schemas.json_schema(model, **options)  # fills the cache
    assert schemas.json_schema(model, **options) == schemas._generate(
        model, tool_names=options.get("tool_names"), tool_parameters=options.get("tool_parameters"))


def test_changing_a_returned_schema_does_not_change_the_next_one():
    first = schemas.response_format(schemas.PlannerPlan, tool_parameters=TOOL_PARAMETERS)
    expected = schemas.response_format(schemas.PlannerPlan, tool_parameters=TOOL_PARAMETERS)
    first["json_schema"]["schema"]["properties"]["goal"]["maxLength"] = 1
    first["json_schema"]["schema"]["$defs"].clear()
    first["json_schema"]["schema"]["required"].append("extra")
    assert schemas.response_format(schemas.PlannerPlan, tool_parameters=TOOL_PARAMETERS) == expected


def test_other_tool_parameters_give_another_schema_and_leave_the_callers_untouched():
    params = {"query_logs": {"type": "object", "properties": {"service": {"type": "string"}}}}
    narrower = {"query_logs": {"type": "object", "properties": {"service": {"type": "string", "enum": ["a"]}}}}
    wide = schemas.json_schema(schemas.PlannerPlan, tool_parameters=params)
    narrow = schemas.json_schema(schemas.PlannerPlan, tool_parameters=narrower)
    assert wide != narrow
    assert narrow["$defs"]["PlanStep"]["anyOf"][0]["properties"]["arguments"]["properties"]["service"]["enum"] == ["a"]
    assert params == {"query_logs": {"type": "object", "properties": {"service": {"type": "string"}}}}
    # The same parameters in another key order are the same tools.
    reordered = {"query_logs": {"properties": {"service": {"type": "string"}}, "type": "object"}}
    assert schemas.json_schema(schemas.PlannerPlan, tool_parameters=reordered) == wide
