"""POST /api/ai_ops on the embedded default (offline analyser, demo telemetry) and with a real worker."""

from __future__ import annotations

import re

import pytest

from diagnosis.contracts import SelfEvaluation
from diagnosis.models import AgentStep, ChatSession, DiagnosisRun, RunEvent, ToolInvocation
from tests.aiops.conftest import scenario_alerts, sse_events, webhook

# Transactional: the run is enqueued on commit, as it is outside a test transaction.
pytestmark = pytest.mark.django_db(transaction=True)

INVOCATION_RE = re.compile(r"\binv-[0-9a-f]{8}\b")
PAYMENT = scenario_alerts("payment-db-pool-exhaustion")
ORDER = scenario_alerts("order-memory-leak-oom")


def analyse(api, body, **extra):
    response = api.post("/api/ai_ops", body, format="json", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    events = sse_events(response)
    return DiagnosisRun.objects.get(run_id=events[0]["data"]["runId"]), events


def report_of(events) -> str:
    return next(e for e in events if e["event"] == "report")["data"]["reportMarkdown"]


@pytest.mark.production_server
def test_an_alertmanager_webhook_is_analysed_and_its_resolved_alerts_are_ignored(alice_api, demo_knowledge):
    run, events = analyse(alice_api, webhook(PAYMENT, resolved=ORDER[:1]))
    assert run.status == "SUCCESS" and run.agent_flow == "AI_OPS" and run.strategy == "DIAGNOSIS"
    submitted = run.input
    assert submitted["source"] == "alertmanager" and submitted["alertsIgnored"] == 1
    assert [a["alertname"] for a in submitted["alerts"]] == [a["labels"]["alertname"] for a in PAYMENT]
    report = report_of(events)
    assert "OrderServiceOOMKilled" not in report  # the resolved alert is not analysed
    # The server renders the report from the verified task evidence: the root-cause claim with its quotes.
    assert "Root cause (" in report and "payment-service —" in report and "connection pool" in report
    # Alertmanager's fields arrive intact: fingerprints dedupe, startsAt becomes "since"
    assert "2026-11-29T10:00:00.828Z" in report


def test_plain_alerts_are_accepted(alice_api, demo_knowledge):
    run, events = analyse(alice_api, {"alerts": ORDER, "sessionId": "ops-1"})
    assert run.session.session_id == "ops-1" and run.session.owner.username == "alice"
    assert run.status == "SUCCESS" and not run.degraded
    assert "Root cause (resource.memory): order-service —" in run.answer
    assert not ToolInvocation.objects.filter(run=run, tool_name="query_alerts").exists()
    assert "order-service" in run.question and "OrderServiceOOMKilled" in run.question


def test_without_alerts_the_run_reads_them_with_query_alerts(alice_api, demo_knowledge):
    run, events = analyse(alice_api, {})
    first = ToolInvocation.objects.filter(run=run).order_by("id").first()
    assert first.tool_name == "query_alerts" and first.status == "SUCCESS"
    evaluation = run.self_evaluation["aiops_rule_evaluation"]
    assert evaluation["alerts_source"] == "query_alerts"
    assert evaluation["alerts_total"] == len(first.result["alerts"]) > 0
    assert events[0]["data"]["alertsSource"] == "query_alerts"
    # every active alert is in the table, the analysed ones marked as such
    report = report_of(events)
    for alert in first.result["alerts"]:
        assert f"| {alert['labels']['alertname']} |" in report
    assert evaluation["alerts_analysed"] > 0


def test_a_webhook_of_only_resolved_alerts_falls_back_to_query_alerts(alice_api, demo_knowledge):
    run, _events = analyse(alice_api, {**webhook([], resolved=PAYMENT), "status": "resolved"})
    submitted = run.input
    assert submitted["alertsTotal"] == 0 and submitted["alertsIgnored"] == len(PAYMENT)
    assert ToolInvocation.objects.filter(run=run, tool_name="query_alerts").count() == 1


@pytest.mark.production_server
def test_the_first_event_carries_the_session_and_run_ids(alice_api, demo_knowledge):
    response = alice_api.post("/api/ai_ops", {"alerts": PAYMENT}, format="json")
    events = sse_events(response)
    first = events[0]
    assert first["event"] == "metadata" and first["id"] is None  # not a RunEvent: Last-Event-ID stays the run's
    run = DiagnosisRun.objects.get()
    assert first["data"]["sessionId"] == run.session.session_id and first["data"]["runId"] == run.run_id
    assert first["data"]["links"]["events"].endswith(f"/api/runs/{run.run_id}/events")
    kinds = [e["event"] for e in events]
    assert kinds[1] == "status" and events[1]["data"]["status"] == "RUNNING"
    assert not RunEvent.objects.filter(run=run, kind="input").exists()  # the alerts are the run's input
    assert kinds[-2:] == ["report", "status"] and events[-1]["data"]["status"] == "SUCCESS"
    assert {"node", "step", "tool"} <= set(kinds)
    nodes = [e["data"]["node"] for e in events if e["event"] == "node"]
    assert {"aiops_planner", "aiops_executor", "aiops_gatekeeper", "aiops_reporter", "aiops_report_check"} <= set(nodes)
    ids = [int(e["id"]) for e in events[1:]]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


@pytest.mark.production_server
def test_the_run_event_stream_replays_what_the_post_streamed(alice_api, demo_knowledge):
    run, events = analyse(alice_api, {"alerts": PAYMENT})
    replay = sse_events(alice_api.get(f"/api/runs/{run.run_id}/events"))
    assert [(e["id"], e["event"]) for e in replay] == [(e["id"], e["event"]) for e in events[1:]]


def test_the_report_has_an_alert_table_and_only_verified_citations_of_this_run(alice_api, demo_knowledge):
    run, events = analyse(alice_api, webhook(PAYMENT))
    report = report_of(events)
    assert report == run.answer
    assert "| alert | service | severity | state | since | analysed |" in report
    assert "| PaymentServiceHighErrorRate | payment-service | critical | firing |" in report
    for section in ("**Per alert**", "**Suggestions (not checked against evidence)**"):
        assert section in report
    cited = set(INVOCATION_RE.findall(report))
    stored = set(ToolInvocation.objects.filter(run=run).values_list("invocation_id", flat=True))
    assert cited and cited <= stored
    audit = run.self_evaluation["aiops_audit"]
    verified = {b["source_invocation_id"] for task in audit["tasks"] for claim in task["gatekeeper"]["audit"]
                for b in claim["bindings"] if b["verified"]}
    assert cited <= verified
    check = audit["report_check"]
    assert check["removed"] == [] and check["gatekeeper"]["verdict"] == "PASS"
    assert set(check["cited_invocation_ids"]) == cited == set(events[-2]["data"]["citedInvocationIds"])


def test_the_aiops_rule_evaluation_is_stored(alice_api, demo_knowledge):
    run, _events = analyse(alice_api, webhook(PAYMENT, resolved=ORDER[:1]))
    evaluation = run.self_evaluation["aiops_rule_evaluation"]
    assert evaluation["alerts_total"] == 3 and evaluation["alerts_ignored"] == 1 and evaluation["alerts_analysed"] == 3
    assert 1 <= evaluation["rounds"] <= evaluation["max_rounds"] == 4
    assert evaluation["decisions"][0] == "PLAN" and "EXECUTE" in evaluation["decisions"]
    assert evaluation["citation_validity"] == 1.0 and evaluation["claims_verified"] == evaluation["claims_total"] > 0
    assert evaluation["tool_calls"] == ToolInvocation.objects.filter(run=run).count() == run.tool_count
    assert evaluation["fallback_used"] is False and evaluation["degraded"] is False
    assert evaluation["budget"]["max_tool_calls"] == 12 and evaluation["budget"]["model_calls"] == run.step_count
    assert run.self_evaluation["prompt_audit"]["prompts"]["aiops"] == "v2"
    # The verdict is the Gatekeeper's over the report's citations (every claim verified, every alert analysed).
    assert run.effective_verdict == "PASS"
    # Computed once: the column and the stored rule evaluation hold the same verdict, read back by its owner.
    assert evaluation["verdict"] == run.effective_verdict
    assert SelfEvaluation.read(run.self_evaluation).stored_verdict == run.effective_verdict
    assert run.diagnosis["coverage"] == {"alertsAnalysed": 3, "alertsReceived": 3}
    assert run.answer.startswith("Coverage: 3 of 3 alert(s) analysed.")


def test_the_run_is_recorded_as_aiops_steps_and_invocations_with_an_orchestration_trace(alice_api, demo_knowledge):
    run, events = analyse(alice_api, {"alerts": PAYMENT})
    trace = run.orchestration_trace
    assert trace["version"] == "stategraph-v1" and trace["degraded"] is False
    assert trace["final_node"] == "aiops_report_check" and trace["termination_reason"] == "aiops_report_check_completed"
    hops = [(t["from"], t["to"]) for t in trace["transitions"]]
    assert hops[0] == ("aiops_intake", "aiops_planner") and hops[-1] == ("aiops_report_check", "END")
    assert ("aiops_executor", "aiops_gatekeeper") in hops and ("aiops_gatekeeper", "aiops_planner") in hops
    # the trace is the streamed node events, one transition each
    assert [t["from"] for t in trace["transitions"]] == [e["data"]["node"] for e in events if e["event"] == "node"]
    steps = list(AgentStep.objects.filter(run=run).order_by("step_index"))
    assert {s.agent for s in steps} == {"aiops"}
    assert steps[0].node == "aiops_planner" and steps[-1].node == "aiops_reporter"
    assert "aiops_executor" in {s.node for s in steps}
    assert all(s.status == "COMPLETED" and s.session_id == run.session.session_id for s in steps)
    invocations = ToolInvocation.objects.filter(run=run)
    assert invocations and all(i.session_id == run.session.session_id and i.step_id for i in invocations)
    assert run.step_count == len(steps) and run.prompt_version.startswith("catalog-")


def test_chinese_alerts_get_a_chinese_report(alice_api, demo_knowledge):
    alert = {"labels": {"alertname": "SettlementReconcileFailures", "service": "settlement-service", "severity": "critical"},
             "annotations": {"summary": "settlement-service 对账失败次数超过每分钟 10 次", "description": "对账失败持续增加"}}
    run, _events = analyse(alice_api, {"alerts": [alert]})
    assert "**活跃告警**" in run.answer and "**逐条分析**" in run.answer and "**建议（未经证据校验）**" in run.answer
    # The settlement service's own records do not name its database (the localiser says undetermined): the
    # report names the right root or none, never another.
    named = re.findall(r"Root cause \([a-z_.]+\): (\S+) —", run.answer)
    assert set(named) <= {"settlement-db"}, named


def test_a_session_of_another_client_is_404_and_nothing_is_created(alice_api, bob_api, demo_knowledge):
    analyse(alice_api, {"alerts": PAYMENT[:1], "sessionId": "alice-ops"})
    before = DiagnosisRun.objects.count()
    response = bob_api.post("/api/ai_ops", {"alerts": PAYMENT[:1], "sessionId": "alice-ops"}, format="json")
    assert response.status_code == 404 and response.json()["error"] == {
        "code": "not_found", "message": "session not found", "field": "sessionId"}
    assert DiagnosisRun.objects.count() == before
    # the session id may also come in the query string (an Alertmanager receiver cannot add body fields)
    response = bob_api.post("/api/ai_ops?sessionId=alice-ops", webhook(PAYMENT[:1]), format="json")
    assert response.status_code == 404 and DiagnosisRun.objects.count() == before


@pytest.mark.production_server
def test_another_client_cannot_stream_the_run(alice_api, bob_api, demo_knowledge):
    run, _events = analyse(alice_api, {"alerts": PAYMENT[:1]})
    response = bob_api.get(f"/api/runs/{run.run_id}/events")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "not_found" and run.run_id not in response.content.decode()


def test_unauthenticated_requests_get_401():
    from rest_framework.test import APIClient

    response = APIClient().post("/api/ai_ops", {"alerts": PAYMENT}, format="json")
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    assert DiagnosisRun.objects.count() == 0


LONG = "x" * 3000


@pytest.mark.parametrize("payload, field", [
    ([{"labels": {"alertname": "A"}}], "body"),
    ({"alerts": "PaymentServiceHighErrorRate"}, "alerts"),
    ({"alerts": [1]}, "alerts[0]"),
    ({"alerts": [{"annotations": {"summary": "no labels"}}]}, "alerts[0].labels"),
    ({"alerts": [{"labels": ["alertname", "A"]}]}, "alerts[0].labels"),
    ({"alerts": [{"labels": {"service": "payment-service"}}]}, "alerts[0].labels.alertname"),
    ({"alerts": [{"labels": {"alertname": "A", "severity": 3}}]}, "alerts[0].labels.severity"),
    ({"alerts": [{"labels": {"alertname": "A", "bad-name": "x"}}]}, "alerts[0].labels"),
    ({"alerts": [{"labels": {"alertname": "A"}, "annotations": {"summary": ["x"]}}]}, "alerts[0].annotations.summary"),
    ({"alerts": [{"labels": {"alertname": "A"}, "annotations": {"description": "x" * 5000}}]}, "alerts[0].annotations.description"),
    ({"alerts": [{"labels": {"alertname": "A"}, "state": "burning"}]}, "alerts[0].state"),
    ({"alerts": [{"labels": {"alertname": "A"}, "startsAt": "yesterday"}]}, "alerts[0].startsAt"),
    ({"alerts": [{"labels": {"alertname": "A"}, "activeAt": "2026-11-29"}]}, "alerts[0].activeAt"),
    ({"alerts": [{"labels": {"alertname": "A"}, "generatorURL": 5}]}, "alerts[0].generatorURL"),
    ({"alerts": [{"labels": {"alertname": "A"}, "status": "pending"}]}, "alerts[0].status"),
    ({"alerts": [{"labels": {"alertname": "A"}, "fingerprint": 7}]}, "alerts[0].fingerprint"),
    ({"alerts": [{"labels": {"alertname": f"A{i}"}} for i in range(51)]}, "alerts"),
    ({"alerts": [{"labels": {"alertname": f"A{i}"}, "annotations": {"description": LONG}} for i in range(50)]}, "alerts"),
    ({"version": "3", "alerts": []}, "version"),
    ({"version": "4", "status": "odd", "alerts": []}, "status"),
    ({"version": "4"}, "alerts"),
    ({"version": "4", "alerts": [], "commonLabels": {"alertname": 1}}, "commonLabels.alertname"),
    ({"version": 4, "alerts": []}, "version"),
    ({"alerts": [], "commonAnnotations": {"summary": 1}}, "commonAnnotations.summary"),
    ({"alerts": [], "truncatedAlerts": -1}, "version"),
    ({"alerts": [], "language": "fr"}, "language"),
    ({"alerts": [], "sessionId": "bad id!"}, "sessionId"),
    ({"alerts": [], "sessionId": 5}, "sessionId"),
    ({"alerts": [], "requestId": "a b"}, "requestId"),
    ({"alerts": [], "stream": "maybe"}, "stream"),
    ({"alerts": [], "stream": "false"}, "stream"),  # the body takes JSON booleans; the query string takes words
])
def test_bad_input_gets_400_naming_the_field_and_creates_nothing(alice_api, payload, field):
    response = alice_api.post("/api/ai_ops", payload, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == field and response.json()["error"]["code"] == "invalid_input"
    assert DiagnosisRun.objects.count() == 0 and ChatSession.objects.count() == 0


def test_stream_false_answers_202_with_the_links(alice_api, demo_knowledge):
    response = alice_api.post("/api/ai_ops?stream=false", webhook(PAYMENT), format="json", HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 202 and response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["agentFlow"] == "AI_OPS" and set(body["links"]) == {"run", "events", "trace"}
    run = DiagnosisRun.objects.get(run_id=body["runId"])
    events = sse_events(alice_api.get(f"/api/runs/{run.run_id}/events"))
    assert events[-1]["data"]["status"] == "SUCCESS" and any(e["event"] == "report" for e in events)


def test_the_same_request_id_twice_streams_the_same_run(alice_api, demo_knowledge):
    body = {"alerts": PAYMENT[:1], "sessionId": "ops-2", "requestId": "alert-group-1"}
    first, _ = analyse(alice_api, body)
    second, events = analyse(alice_api, body)
    assert first.run_id == second.run_id and DiagnosisRun.objects.count() == 1
    assert second.input == first.input and len(first.input["alerts"]) == 1
    assert events[-1]["data"]["status"] == "SUCCESS"


def test_the_trace_api_shows_the_aiops_run(alice_api, demo_knowledge):
    run, _events = analyse(alice_api, {"alerts": PAYMENT[:1], "sessionId": "ops-3"})
    body = alice_api.get(f"/api/diagnosis/ops-3/trace?runId={run.run_id}").json()
    assert body["run"]["orchestrationTrace"]["version"] == "stategraph-v1"
    assert body["run"]["selfEvaluation"]["aiops_rule_evaluation"]["alerts_total"] == 1
    assert [s["node"] for s in body["steps"]][0] == "aiops_planner"


def test_the_openapi_schema_describes_the_endpoint():
    from rest_framework.test import APIClient

    operation = APIClient().get("/api/schema", HTTP_ACCEPT="application/json").json()["paths"]["/api/ai_ops"]["post"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]
    assert "application/json" in operation["responses"]["202"]["content"]
    assert {p["name"] for p in operation["parameters"]} >= {"sessionId", "requestId", "stream"}


def test_null_optional_fields_count_as_absent(alice_api, demo_knowledge):
    alert = {**PAYMENT[0], "annotations": None, "state": None, "startsAt": None, "fingerprint": None}
    run, _events = analyse(alice_api, {"alerts": [alert], "sessionId": None, "requestId": None, "stream": None,
                                       "language": None})
    assert run.status == "SUCCESS" and "| PaymentServiceHighErrorRate | payment-service |" in run.answer


def test_text_that_is_not_valid_utf8_is_400_not_a_server_error(alice_api):
    body = b'{"alerts": [{"labels": {"alertname": "A", "service": "\\ud800"}}]}'  # a lone surrogate, JSON-escaped
    response = alice_api.post("/api/ai_ops", body, content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["field"] == "alerts[0].labels.service"


def test_a_request_id_of_a_chat_run_is_not_reused_for_an_alert_analysis(alice_api, demo_knowledge):
    alice_api.post("/api/chat", {"question": "hello", "sessionId": "ops-4", "requestId": "r-1"}, format="json")
    response = alice_api.post("/api/ai_ops", {"alerts": PAYMENT, "sessionId": "ops-4", "requestId": "r-1"}, format="json")
    assert response.status_code == 400 and response.json()["error"]["field"] == "requestId"
    assert DiagnosisRun.objects.filter(agent_flow="AI_OPS").count() == 0


def test_a_partial_analysis_states_its_coverage_and_is_never_a_pass(alice_api, demo_knowledge, settings, eager_tasks):
    settings.AIOPS_MAX_ROUNDS = 1  # one round: the supervisor plans, so no task runs (in-process: a setting)
    run, _events = analyse(alice_api, {"alerts": PAYMENT + ORDER})
    coverage = run.diagnosis["coverage"]
    assert coverage["alertsReceived"] == len(PAYMENT + ORDER) and coverage["alertsAnalysed"] < coverage["alertsReceived"]
    assert f"{coverage['alertsAnalysed']} of {coverage['alertsReceived']} alert(s) analysed" in run.answer
    assert run.effective_verdict != "PASS"


def test_the_report_fills_its_suggestions(alice_api, demo_knowledge):
    run, _events = analyse(alice_api, {"alerts": PAYMENT})
    body = alice_api.get(f"/api/runs/{run.run_id}").json()
    assert body["suggestions"] and all(isinstance(s, str) and s for s in body["suggestions"])
    assert [a["text"] for a in body["advice"] if not a["verified"]] == body["suggestions"]
