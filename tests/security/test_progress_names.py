"""The progress stream carries only names from closed sets: a tool name a model invents never reaches it,
and the rejection is recorded as a violation in the run's event log."""

from __future__ import annotations

import pytest

from diagnosis.models import RunEvent, ToolInvocation
from diagnosis.progress_names import checked_event
from diagnosis.selectors import run_events_after
from diagnosis.services.execution import run_execute
from tests.security.test_lying_model import PLAN, QUESTION
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db

INVENTED = '<img src=x onerror="alert(1)">rm_rf_everything'


def test_a_tool_name_the_model_invents_never_reaches_the_stream(openai_llm, demo_knowledge, make_run):
    openai_llm.always(Reply.json(PLAN), role="planner")
    openai_llm.always(Reply.tool_calls((INVENTED, {"service": "payment-service"}, "call_1")), role="executor")
    run = run_execute(run_id=make_run(QUESTION).run_id)
    blocked = ToolInvocation.objects.get(run=run, status="BLOCKED")
    assert blocked.tool_name == INVENTED[:64]  # the audit row keeps what the model tried
    events = run_events_after(run_pk=run.pk, after=0, limit=1000)
    tools = [e.data for e in events if e.kind == "tool"]
    assert tools and all(t["toolName"] in (None, "query_logs", "query_metrics", "query_alerts", "query_kubernetes",
                                           "lookup_knowledge") for t in tools)
    assert not any(INVENTED[:20] in str(e.data) for e in events)
    violations = list(RunEvent.objects.filter(run=run, kind="violation").values_list("data", flat=True))
    assert {"kind": "tool", "field": "toolName", "reason": "not_in_closed_set"} in violations


@pytest.mark.parametrize("kind,data,field", [
    ("node", {"node": "planner<script>", "outcome": "COMPLETED"}, "node"),
    ("node", {"node": "aiops_executor", "task_id": "t1 <b>x</b>"}, "task_id"),
    ("status", {"status": "SUCCESS ", "verdict": "PASS"}, "status"),
    ("tool", {"toolName": "query_logs\u200b", "status": "SUCCESS"}, "toolName"),
    ("step", {"node": "executor", "status": "RUNNING", "error": "boom: see http://evil"}, "error"),
])
def test_every_name_outside_its_closed_set_is_rejected(kind, data, field):
    clean, violations = checked_event(kind, data)
    assert clean[field] is None and violations == [{"kind": kind, "field": field, "reason": violations[0]["reason"]}]
    assert all(v for k, v in clean.items() if k != field)


def test_an_unknown_event_kind_carries_nothing():
    assert checked_event("html", {"x": "<img>"}) == ({}, [{"kind": "unknown", "field": "event",
                                                          "reason": "kind_not_in_closed_set"}])
