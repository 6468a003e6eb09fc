"""The structured diagnosis of a run: stored, and returned by the run, chat and trace APIs and the schema."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from diagnosis.models import DiagnosisRun


@pytest.mark.django_db(transaction=True)
def test_a_diagnosis_run_returns_its_structured_root_cause_everywhere(alice_api, demo_knowledge):
    body = alice_api.post("/api/chat", {"question": "Why is payment-service failing?"}, format="json").json()
    assert body["status"] == "SUCCESS", body
    diagnosis = body["diagnosis"]
    root = diagnosis["rootCause"]
    assert root["service"] == "payment-service" and root["cause"] == "resource.pool", diagnosis
    assert root["startedAt"] and root["basis"] == "observed"  # the onset of the cited records
    assert root["claimIds"] and root["summary"].startswith("Root cause")
    assert diagnosis["nothingWrong"] is False and diagnosis["undetermined"] is False
    run = DiagnosisRun.objects.get(run_id=body["runId"])
    assert run.diagnosis == diagnosis
    assert run.root_service == "payment-service"  # the console's service filter reads this column
    # Every claim id of the root cause is a claim the Gatekeeper verified in this run.
    verified = run.self_evaluation["verifier_evaluation"]["verified_executor_output"]["claims"]
    assert set(root["claimIds"]) <= {c["claim_id"] for c in verified}
    assert alice_api.get(f"/api/runs/{body['runId']}").json()["diagnosis"] == diagnosis
    trace = alice_api.get(body["links"]["trace"]).json()
    assert trace["run"]["diagnosis"] == diagnosis


@pytest.mark.django_db(transaction=True)
def test_a_healthy_service_is_nothing_wrong(alice_api, demo_knowledge):
    body = alice_api.post("/api/chat", {"question": "Is catalog-service healthy?"}, format="json").json()
    assert body["status"] == "SUCCESS", body
    assert body["diagnosis"]["rootCause"] is None and body["diagnosis"]["nothingWrong"] is True
    assert body["diagnosis"]["undetermined"] is False
    assert DiagnosisRun.objects.get(run_id=body["runId"]).root_service is None


@pytest.mark.django_db
def test_the_schema_describes_the_structured_diagnosis():
    schema = APIClient().get("/api/schema", HTTP_ACCEPT="application/json").json()["components"]["schemas"]
    run = schema["RunOutput"]["properties"]
    assert "diagnosis" in run
    structured = schema["StructuredDiagnosisOutput"]["properties"]
    assert set(structured) == {"rootCause", "nothingWrong", "undetermined", "symptoms", "coverage", "candidates",
                               "localisation", "agreement"}
    assert set(schema["RootCauseOutput"]["properties"]) == {"service", "cause", "summary", "startedAt", "claimIds", "basis"}
    assert set(schema["CandidateOutput"]["properties"]) == {"rank", "service", "kind", "onset", "strength", "explainedBy",
                                                            "explains", "evidence"}
    assert set(schema["CandidateEvidenceOutput"]["properties"]) == {"invocationId", "tool", "rawPath"}
    assert set(schema["LocalisationOutput"]["properties"]) == {"outcome", "reason", "subject", "withoutData"}
    agreement = schema[structured["agreement"]["allOf"][0]["$ref"].rsplit("/", 1)[1]]
    assert set(agreement["enum"]) == {"agrees", "differs", "no_root_cause", "no_ranking"}


# --------------------------------------------------------------------------- the localiser's ranking, a hint


@pytest.mark.django_db(transaction=True)
def test_an_offline_run_keeps_the_ranking_and_whether_its_diagnosis_agreed(alice_api, demo_knowledge):
    body = alice_api.post("/api/chat", {"question": "Why is payment-service failing?"}, format="json").json()
    diagnosis = body["diagnosis"]
    assert diagnosis["candidates"][0]["service"] == "payment-service" == diagnosis["rootCause"]["service"]
    assert diagnosis["agreement"] == "agrees"
    assert diagnosis["localisation"]["subject"] == ["payment-service"]
    assert diagnosis["localisation"]["outcome"] in ("root_cause", "undetermined", "nothing_wrong", "no_data")
    run = DiagnosisRun.objects.get(run_id=body["runId"])
    recorded = {i.invocation_id: i.tool_name for i in run.tool_invocations.all()}
    evidence = [e for c in diagnosis["candidates"] for e in c["evidence"]]
    assert evidence and all(recorded[e["invocationId"]] == e["tool"] for e in evidence)  # records of this run
    assert run.diagnosis["candidates"] == diagnosis["candidates"]  # stored with the run, served as stored
    assert alice_api.get(body["links"]["trace"]).json()["run"]["diagnosis"]["agreement"] == "agrees"


@pytest.mark.django_db
def test_a_real_model_run_keeps_the_ranking_too(openai_llm, make_run, demo_knowledge):
    run = _lying_run(openai_llm, make_run, statement="payment-service ran out of database connections.",
                     choice={"outcome": "root_cause", "cause": "resource.pool"})
    assert run.model_name != "offline"
    assert run.diagnosis["rootCause"]["service"] == "payment-service"
    assert run.diagnosis["localisation"]["subject"] == ["payment-service"]
    top = run.diagnosis["candidates"][0]["service"] if run.diagnosis["candidates"] else None
    assert run.diagnosis["agreement"] == ("no_ranking" if top is None else "agrees" if top == "payment-service" else "differs")


@pytest.mark.django_db
def test_a_simple_answer_keeps_no_ranking_and_a_localiser_fault_never_fails_the_run(monkeypatch):
    from diagnosis.contracts import RunResult
    from diagnosis.services import run_context
    from diagnosis.tools.registry import ToolOutcome

    outcome = ToolOutcome("inv-0000000a", "query_logs", {"service": "a-svc"}, "SUCCESS", {"records": []})
    simple = RunResult(answer="x")
    assert run_context.run_result_ranked(simple, question="q", outcomes=[outcome]) is simple
    derived = RunResult(answer="x", diagnosis={"rootCause": None, "symptoms": []})
    ranked = run_context.run_result_ranked(derived, question="Is a-svc up?", outcomes=[outcome])
    assert ranked.diagnosis["agreement"] == "no_root_cause" and ranked.diagnosis["candidates"] == []

    def broken(*args, **kwargs):
        raise ValueError("a localiser bug")

    monkeypatch.setattr(run_context, "ranking_view", broken)
    assert run_context.run_result_ranked(derived, question="q", outcomes=[outcome]).diagnosis == derived.diagnosis


# --------------------------------------------------------------------------- a lying composer cannot shape it

LIAR_SERVICE = "ledger-api"


def _lying_run(openai_llm, make_run, *, statement: str, choice: dict, level_error: bool = True, extra_plan=None):
    """A run whose executor makes one honest claim (a genuine payment-service log line) and whose composer
    tries to dictate the structured diagnosis."""
    from diagnosis.services.execution import run_execute
    from tests.diagnosis.conftest import tool_outputs, user_payload
    from tests.support.fake_openai import Reply, answer_plan

    plan = {"version": "planner_plan_v1", "goal": "x", "services": ["payment-service"],
            "steps": [{"tool": "query_logs", "arguments": {"service": "payment-service", "query": "level:ERROR"}}]}
    openai_llm.always(Reply.json(plan), role="planner")
    arguments = {"service": "payment-service", **({"query": "level:ERROR"} if level_error else {})}
    openai_llm.enqueue(Reply.tool_calls(("query_logs", arguments, "c1")), role="executor")

    def executor(request):
        logs = next(o for o in tool_outputs(request) if o["tool"] == "query_logs")
        index, record = next((i, r) for i, r in enumerate(logs["result"]["records"])
                             if (r["level"] == "ERROR") == level_error and len(r["message"]) > 20)
        binding = {"source_invocation_id": logs["invocation_id"], "tool_name": "query_logs",
                   "raw_path": f"$.records[{index}].message", "evidence_excerpt": record["message"]}
        return Reply.json({"version": "executor_evidence_v2", "summary": "s", "open_questions": [],
                           "claims": [{"claim_id": "c1", "statement": statement, "evidence": [binding]}]})

    openai_llm.always(executor, role="executor")
    openai_llm.always(Reply.json({"verdict": "PASS", "score": 0.9, "claim_checks": []}), role="verifier")
    openai_llm.always(lambda r: Reply.json({**answer_plan(user_payload(r)), "diagnosis": choice, **(extra_plan or {})}),
                      role="composer")
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    run.refresh_from_db()
    assert run.status == "SUCCESS", (run.error_code, run.error_message)
    return run


@pytest.mark.django_db
def test_the_root_cause_service_is_the_cited_records_not_the_statements(openai_llm, make_run, demo_knowledge):
    run = _lying_run(openai_llm, make_run, statement=f"{LIAR_SERVICE} ran out of database connections.",
                     choice={"outcome": "root_cause", "cause": "resource.pool", "service": LIAR_SERVICE,
                             "started_at": "1999-01-01T00:00:00Z"})
    root = run.diagnosis["rootCause"]
    assert root["service"] == "payment-service" and run.root_service == "payment-service"
    assert root["cause"] == "resource.pool"
    # The start time is the cited record's own timestamp, never one the composer wrote.
    cited = run.self_evaluation["verifier_evaluation"]["verified_evidence"][0]
    record = next(r for r in run.tool_invocations.get(invocation_id=cited["source_invocation_id"]).result["records"]
                  if r["message"] == cited["evidence_excerpt"])
    assert root["startedAt"] == record["timestamp"] != "1999-01-01T00:00:00Z"


@pytest.mark.django_db
@pytest.mark.parametrize("cause", ["cosmic_rays_from_ledger", "<img src=x onerror=alert(1)>", "network.DNS"])
def test_a_cause_outside_the_closed_kind_set_is_never_served(openai_llm, make_run, demo_knowledge, cause):
    run = _lying_run(openai_llm, make_run, statement="payment-service ran out of database connections.",
                     choice={"outcome": "root_cause", "cause": cause})
    assert run.diagnosis["rootCause"]["cause"] is None


@pytest.mark.django_db
def test_claim_ids_follow_the_pattern_and_exist_in_the_run(openai_llm, make_run, demo_knowledge):
    run = _lying_run(openai_llm, make_run, statement="payment-service ran out of database connections.",
                     choice={"outcome": "root_cause", "symptoms": ["c1", "ghost", "<b>x</b>", "c1 ; drop"]},
                     extra_plan={"root_cause": ["c1", "ghost-claim", "bad id!"]})
    root = run.diagnosis["rootCause"]
    assert root["claimIds"] == ["c1"]
    assert run.diagnosis["symptoms"] == []  # the root claim is no symptom; the others are not claims of the run
    plan = run.self_evaluation["verifier_evaluation"]["composer_audit"]["answer_plan"]
    assert "bad id!" not in plan["root_cause"] and "<b>x</b>" not in plan["diagnosis"]["symptoms"]


@pytest.mark.django_db
def test_nothing_wrong_is_refused_over_a_cited_error_line(openai_llm, make_run, demo_knowledge):
    run = _lying_run(openai_llm, make_run, statement="payment-service is healthy.",
                     choice={"outcome": "nothing_wrong"}, extra_plan={"root_cause": [], "evidence": ["c1"]})
    assert run.diagnosis["nothingWrong"] is False and run.diagnosis["undetermined"] is True
    assert run.effective_verdict != "PASS"  # an undetermined problem is never a PASS


@pytest.mark.django_db
def test_nothing_wrong_stands_over_quiet_records(openai_llm, make_run, demo_knowledge):
    run = _lying_run(openai_llm, make_run, statement="payment-service logs look routine.", level_error=False,
                     choice={"outcome": "nothing_wrong"}, extra_plan={"root_cause": [], "evidence": ["c1"]})
    assert run.diagnosis["nothingWrong"] is True and run.diagnosis["rootCause"] is None


@pytest.mark.django_db
def test_a_root_cause_resting_only_on_a_runbook_is_labelled_and_capped(openai_llm, make_run, demo_knowledge):
    from diagnosis.services.execution import run_execute
    from tests.diagnosis.conftest import tool_outputs, user_payload
    from tests.security.test_lying_model import PLAN, Script, evidence, play
    from tests.support.fake_openai import Reply, answer_plan

    def executor(request):
        kb = next(o for o in tool_outputs(request) if o["tool"] == "lookup_knowledge")
        content = kb["result"]["results"][0]["content"]
        excerpt = next(line.strip(" -*#") for line in content.splitlines() if len(line.strip(" -*#")) > 30)
        return evidence({"claim_id": "c1", "statement": "The runbook names pool exhaustion as the usual cause.",
                         "evidence": [{"source_invocation_id": kb["invocation_id"], "tool_name": "lookup_knowledge",
                                       "raw_path": "$.results[0].content", "evidence_excerpt": excerpt}]})

    play(openai_llm, Script(executor=executor, tool_args={"query": "payment-service connection pool exhausted"},
                            tool_name="lookup_knowledge",
                            composer=lambda r: Reply.json({**answer_plan(user_payload(r)),
                                                           "diagnosis": {"outcome": "root_cause", "cause": "resource.pool"}})))
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    run.refresh_from_db()
    assert run.status == "SUCCESS", (run.error_code, run.error_message)
    root = run.diagnosis["rootCause"]
    assert root["basis"] == "knowledge_only" and root["service"] is None
    assert run.effective_verdict == "LOW_CONFID"
    assert "A similar past incident or runbook describes" in run.answer


def test_a_root_named_by_its_pods_series_is_the_service_of_that_series_not_of_the_callers_line():
    """A root's own evidence is often a series labelled only by its pod (cAdvisor, the kubelet), and its caller's
    line names it by an IP. The composer's chosen root is of the series: its pod's workload."""
    from diagnosis.structured_diagnosis import cited_record, service_of

    series = {"series": [{"labels": {"__name__": "container_network_receive_packets_dropped_total",
                                     "namespace": "tovra", "pod": "quenmor-7d9f8c6b5-x2x9q", "interface": "eth0"},
                          "values": [[1.0, "3"]], "description": "container_network_receive_packets_dropped_total"}]}
    logs = {"records": [{"timestamp": "2026-11-29T11:58:00Z", "service": "plisket", "level": "WARN",
                         "message": "connect EHOSTUNREACH 10.244.7.12:8080"}]}
    records = [cited_record(invocation_id="inv-1", tool_name="query_metrics", result=series, raw_path="$.series[0].description"),
               cited_record(invocation_id="inv-2", tool_name="query_logs", result=logs, raw_path="$.records[0].message")]
    assert records[0].service == "quenmor"
    assert service_of(records, "quenmor") == "quenmor"


def test_a_root_seen_only_through_its_callers_line_is_named_by_the_service_record_that_declares_it():
    """The caller's line names the root by an outside host; the cluster declares that host as an ExternalName
    Service. The root claim cites that Service record (its text verifies), and the structured root is the
    service it declares, not the caller whose line is the other citation."""
    from diagnosis.gatekeeper import InvocationRecord, verify_bindings
    from diagnosis.llm.offline.localised import root_claim
    from diagnosis.localisation.outcome import localise
    from diagnosis.structured_diagnosis import cited_record, service_of
    from tests.localisation.test_below import _certificate_of_an_outside_host

    results = _certificate_of_an_outside_host([{"name": "pelmor-rates", "type": "ExternalName",
                                                "externalName": "rates.pelmor.io"}])
    found = localise(results.items, ["sivet"])
    assert found.root == "pelmor-rates"
    _finding, bindings = root_claim(found)
    assert "$.services[0]" in [b["raw_path"] for b in bindings]
    by_id = {r["invocation_id"]: r for r in results.items}
    lookup = type("Lookup", (), {"lookup": lambda self, ids: [
        InvocationRecord(i, "run-1", by_id[i]["tool_name"], "SUCCESS", by_id[i]["result"]) for i in ids if i in by_id]})()
    audit = verify_bindings(executor_output={"version": "executor_evidence_v2", "claims": [
        {"claim_id": "c1", "statement": "The certificate of pelmor-rates expired.", "evidence": bindings}]},
        run_id="run-1", lookup=lookup)
    assert audit.verified_binding_count == audit.total_binding_count == len(bindings)
    records = [cited_record(invocation_id=b["source_invocation_id"], tool_name=b["tool_name"],
                            result=by_id[b["source_invocation_id"]]["result"], raw_path=b["raw_path"]) for b in bindings]
    assert [r.service for r in records] == ["sivet", "pelmor-rates"]
    assert service_of(records, "pelmor-rates") == "pelmor-rates"
