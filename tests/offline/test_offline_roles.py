"""Each role of the offline analyser on hand-made structured inputs, without the graph."""

from __future__ import annotations

import json

import pytest

from diagnosis.agents.nodes import (
    compose_answer,
    validate_composition,
    validate_evidence,
    validate_plan,
    validate_verifier,
)
from diagnosis.llm.base import ChatModel, ChatRequest, ModelNonRetryableError
from diagnosis.llm.offline import MODEL_NAME, OfflineAnalyser, services_in_question
from diagnosis.tools.registry import ALLOWED_TOOLS, openai_tool_specs

MODEL = OfflineAnalyser()


def ask(role: str, structured: dict, *, tools: bool = False, messages: list | None = None):
    request = ChatRequest(
        role=role, messages=messages or [{"role": "user", "content": json.dumps(structured)}],
        tools=openai_tool_specs() if tools else None, response_format=None if tools else "json",
        structured_input=structured,
    )
    return MODEL.complete(request)


def plan_input(question: str, **extra) -> dict:
    return {"question": question, "mode": "NORMAL", "language": "zh" if "为什么" in question else "en",
            "history": "", "retry_context": None, "allowed_tools": sorted(ALLOWED_TOOLS), **extra}


# --------------------------------------------------------------------------- the model itself


def test_it_is_a_chat_model_with_a_name_usage_and_latency():
    reply = ask("planner", plan_input("Why is payment-service failing?"))
    assert isinstance(MODEL, ChatModel)
    assert reply.model == MODEL_NAME
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert reply.latency_ms >= 0


def test_it_is_what_the_settings_factory_builds_for_the_offline_provider():
    from diagnosis.llm import build_chat_model

    assert isinstance(build_chat_model({"LLM_PROVIDER": "offline"}), OfflineAnalyser)


def test_it_refuses_a_diagnosis_role_without_structured_input():
    with pytest.raises(ModelNonRetryableError):
        MODEL.complete(ChatRequest(role="verifier", messages=[{"role": "user", "content": "hi"}]))


def test_the_same_request_always_gets_the_same_answer():
    first = ask("planner", plan_input("Why are checkout-service and cart-service both failing?"))
    second = ask("planner", plan_input("Why are checkout-service and cart-service both failing?"))
    assert first.content == second.content


# --------------------------------------------------------------------------- planner


@pytest.mark.parametrize(("question", "services"), [
    ("Why is payment-service failing?", ["payment-service"]),
    ("checkout-service 和 cart-service 为什么同时报错？", ["checkout-service", "cart-service"]),
    ("Is worker-node-7 overloaded since the on-call handover?", ["worker-node-7"]),
    ("Why did order ord-701878 fail with inv-3f9a2c1b?", []),
    ("Why is everything so slow?", []),
])
def test_the_planner_takes_service_names_from_the_question(question, services):
    assert services_in_question(question) == services


def test_the_planner_plans_alerts_and_each_services_logs_and_metrics_and_leaves_runbooks_for_the_kind():
    plan = validate_plan(json.loads(ask("planner", plan_input("checkout-service 和 cart-service 为什么同时报错？")).content))
    assert plan["language"] == "zh" and plan["services"] == ["checkout-service", "cart-service"]
    steps = [(s["tool"], s["arguments"]) for s in plan["steps"]]
    assert steps[0] == ("query_alerts", {})
    for service in ("checkout-service", "cart-service"):
        assert ("query_logs", {"service": service, "limit": 200}) in steps
        assert ("query_metrics", {"service": service}) in steps
    # The first round reads what localises; runbooks wait for the kind of fault, a workload's state for the
    # localiser to ask for it (the calls it saves follow the chain further).
    assert not [t for t, a in steps if t == "lookup_knowledge" or a.get("kind") == "deployment"], steps


def test_without_a_service_the_planner_starts_from_the_alerts():
    plan = json.loads(ask("planner", plan_input("Why is checkout broken?")).content)
    assert [s["tool"] for s in plan["steps"]] == ["query_alerts", "lookup_knowledge", "query_changes", "query_kubernetes"]


def test_the_plan_reads_what_changed_before_the_onset_and_a_howto_plan_reads_only_runbooks():
    plan = json.loads(ask("planner", plan_input("Why is order-api failing?")).content)
    assert ("query_changes", {}) in [(s["tool"], s["arguments"]) for s in plan["steps"]]
    # The cluster's Services: the names, addresses and outside hosts that are its own, and where their pods run.
    assert ("query_kubernetes", {"kind": "service"}) in [(s["tool"], s["arguments"]) for s in plan["steps"]]
    howto = json.loads(ask("planner", plan_input("How do I scale order-api to more replicas?")).content)
    assert {s["tool"] for s in howto["steps"]} == {"lookup_knowledge"}
    assert any(s["arguments"]["query"] == "order-api" for s in howto["steps"])  # by the service's name too


def test_in_evidence_gap_mode_the_planner_plans_only_the_suggested_allow_listed_queries():
    gaps = [
        {"gap": "metrics of profile-db", "suggested_query": {"tool": "query_metrics", "arguments": {"service": "profile-db"}}},
        {"gap": "same again", "suggested_query": {"tool": "query_metrics", "arguments": {"service": "profile-db"}}},
        {"gap": "wipe it", "suggested_query": {"tool": "drop_database", "arguments": {}}},
    ]
    plan = json.loads(ask("planner", plan_input("Why is user-service so slow?", mode="EVIDENCE_GAP_ONLY",
                                                retry_context={"critical_evidence_gaps": gaps})).content)
    assert plan["steps"] == [{"tool": "query_metrics", "arguments": {"service": "profile-db"}, "purpose": "metrics of profile-db"}]


# --------------------------------------------------------------------------- executor


def executor_input(plan: dict, *, budget: int, results: list | None = None) -> dict:
    return {"question": "Why is payment-service failing?", "mode": "NORMAL", "language": "en", "history": "",
            "plan": plan, "previous_snapshot": None, "tool_results": results or [], "tool_budget": budget}


def test_the_executor_calls_the_plan_within_the_tool_budget():
    plan = json.loads(ask("planner", plan_input("Why are checkout-service and cart-service both failing?")).content)
    reply = ask("executor", executor_input(plan, budget=3), tools=True)
    assert [c.id for c in reply.tool_calls] == ["call_1", "call_2", "call_3"]
    assert [c.name for c in reply.tool_calls] == ["query_alerts", "query_logs", "query_metrics"]
    assert all(json.loads(c.raw_arguments) == c.arguments for c in reply.tool_calls)
    assert reply.finish_reason == "tool_calls"


def test_the_executor_never_calls_a_tool_it_was_not_offered():
    plan = {"services": [], "steps": [{"tool": "drop_database", "arguments": {}}, {"tool": "query_alerts", "arguments": {}}]}
    reply = ask("executor", executor_input(plan, budget=5), tools=True)
    assert [c.name for c in reply.tool_calls] == ["query_alerts"]


def test_without_tools_the_executor_reports_its_evidence_and_cites_only_successful_results():
    results = [
        {"invocation_id": "inv-00000001", "tool_name": "query_metrics", "arguments": {"service": "payment-service"},
         "status": "ERROR", "result": None, "error": "metrics backend timed out", "truncated": False},
        {"invocation_id": "inv-00000002", "tool_name": "query_logs", "arguments": {"service": "payment-service"},
         "status": "SUCCESS", "truncated": False, "error": "", "result": {"records": [
             {"timestamp": "2026-11-29T10:00:00Z", "service": "payment-service", "level": "ERROR",
              "message": "HikariPool-1 - Connection is not available, request timed out after 30000ms."}]}},
    ]
    reply = ask("executor", executor_input({"services": ["payment-service"], "steps": []}, budget=0, results=results))
    assert not reply.tool_calls
    output = validate_evidence(json.loads(reply.content))
    cited = {b["source_invocation_id"] for c in output["claims"] for b in c["evidence"]}
    assert cited == {"inv-00000002"}
    # One error line with no history before it is evidence to show, not a localised root cause.
    assert not any(c["statement"].startswith("Root cause") for c in output["claims"])
    assert output["claims"][0]["statement"].startswith("Logs of payment-service: 1 ERROR line like")
    assert output["summary"].startswith("Undetermined")
    assert any("metrics backend timed out" in q for q in output["open_questions"])


# --------------------------------------------------------------------------- verifier


def binding(inv: str, tool: str, path: str, excerpt: str) -> dict:
    return {"source_invocation_id": inv, "tool_name": tool, "raw_path": path, "evidence_excerpt": excerpt}


LOG = binding("inv-0000000a", "query_logs", "$.records[3].message", "HikariPool-1 - Connection is not available, request timed out")
METRIC = binding("inv-0000000b", "query_metrics", "$.series[0].description",
                 'db_pool_active_connections{service="payment-service"} max 50 at 2026-11-29T10:02:00Z, baseline 12, last 50')
ROOT = "Root cause (resource.pool): payment-service — connection, thread or worker pool exhausted."


def verifier_input(claims: list, ceiling: str = "PASS") -> dict:
    evidence = [{"claim_id": c["claim_id"], **b} for c in claims for b in c["evidence"]]
    return {"diagnosis_context": {"query": "Why is payment-service failing?"}, "language": "en",
            "verified_executor_output": {"claims": claims}, "verified_evidence": evidence,
            "gatekeeper_audit": {}, "verdict_ceiling": ceiling, "retry_context": None}


def verdict_of(claims: list, ceiling: str = "PASS") -> dict:
    return validate_verifier(json.loads(ask("verifier", verifier_input(claims, ceiling)).content))


def test_a_root_cause_seen_in_logs_and_metrics_passes():
    out = verdict_of([{"claim_id": "c1", "statement": ROOT, "evidence": [LOG, METRIC]}])
    assert out["verdict"] == "PASS" and out["critical_evidence_gaps"] == []
    assert out["claim_checks"][0]["supported"] is True
    assert {r["raw_path"] for r in out["claim_checks"][0]["evidence_refs"]} == {LOG["raw_path"], METRIC["raw_path"]}
    assert 0 <= out["score"] <= 1


def test_a_root_cause_seen_only_in_logs_is_low_confidence_with_a_metrics_query_to_close_the_gap():
    out = verdict_of([{"claim_id": "c1", "statement": ROOT, "evidence": [LOG]}])
    assert out["verdict"] == "LOW_CONFID"
    assert out["critical_evidence_gaps"][0]["suggested_query"] == {"tool": "query_metrics",
                                                                   "arguments": {"service": "payment-service"}}


def test_a_root_cause_seen_only_in_metrics_asks_for_the_logs():
    memory = binding("inv-0000000c", "query_metrics", "$.series[0].description",
                     'container_memory_working_set_bytes{service="payment-service"} max 2.1e+09 at 2026-11-29T10:02:00Z, '
                     "baseline 8e+08, last 2.1e+09")
    root = "Root cause (resource.memory): payment-service — memory exhaustion (leak or out-of-memory kill)."
    out = verdict_of([{"claim_id": "c1", "statement": root, "evidence": [memory]}])
    assert out["verdict"] == "LOW_CONFID"
    assert out["critical_evidence_gaps"][0]["suggested_query"]["tool"] == "query_logs"


def test_the_verdict_never_exceeds_the_gatekeeper_ceiling():
    out = verdict_of([{"claim_id": "c1", "statement": ROOT, "evidence": [LOG, METRIC]}], ceiling="LOW_CONFID")
    assert out["verdict"] == "LOW_CONFID"


def test_a_root_cause_whose_excerpts_do_not_show_its_pattern_is_rejected():
    unrelated = binding("inv-0000000a", "query_logs", "$.records[1].message", "GET /v1/payments/pay_1 200 in 12ms")
    out = verdict_of([{"claim_id": "c1", "statement": ROOT, "evidence": [unrelated]}])
    assert out["verdict"] == "REJECT" and out["claim_checks"][0]["supported"] is False


# --------------------------------------------------------------------------- composer


def composer_input(claims: list, verdict: str, language: str = "en", gaps: list | None = None) -> dict:
    evidence = [{"claim_id": c["claim_id"], **b} for c in claims for b in c["evidence"]]
    return {"diagnosis_context": {"query": "q"}, "language": language,
            "verified_executor_output": {"claims": claims}, "verified_evidence": evidence,
            "effective_verdict": verdict,
            "verifier": {"verdict": verdict, "score": 0.5, "claim_checks": [],
                         "critical_evidence_gaps": gaps or [], "rationale": "only the logs show it"}}


def compose(claims: list, verdict: str, language: str = "en", gaps: list | None = None) -> dict:
    data = composer_input(claims, verdict, language, gaps)
    reply = ask("composer", data)
    plan = validate_composition(json.loads(reply.content))
    return compose_answer(plan=plan, verified_output=data["verified_executor_output"], verdict=verdict,
                          language=language, verifier=data["verifier"], offline=True)


CLAIMS = [
    {"claim_id": "c1", "statement": ROOT, "evidence": [LOG, METRIC]},
    {"claim_id": "c2", "statement": 'Logs of payment-service: 10 ERROR lines like "HikariPool-1 - Connection is not '
                                    'available", first at 2026-11-29T10:00:00Z.', "evidence": [LOG]},
]


def test_on_pass_the_composer_states_the_root_cause_and_cites_only_verified_invocations():
    out = compose(CLAIMS, "PASS")
    assert "**Root cause**" in out["answer_markdown"] and "worker pool exhausted" in out["answer_markdown"]
    assert set(out["cited_invocation_ids"]) == {"inv-0000000a", "inv-0000000b"}
    assert out["answer_markdown"].startswith("_Offline analyser (rule-based, no LLM)_")


def test_on_low_confidence_the_composer_hedges():
    out = compose(CLAIMS, "LOW_CONFID", gaps=[{"gap": "its metrics would confirm it"}])
    answer = out["answer_markdown"]
    assert "**Likely cause** (confidence limited)" in answer and "**Root cause**" not in answer
    assert "confidence is limited" in answer.lower()
    # The verifier's gap is model text nobody checked against evidence: it is not rendered.
    assert "its metrics would confirm it" not in answer


def test_on_reject_the_composer_makes_no_root_cause_claim():
    answer = compose(CLAIMS, "REJECT")["answer_markdown"]
    assert "Root cause" not in answer and "root cause" not in answer.replace("No root cause could be verified", "")
    assert "pool exhausted" not in answer


def test_the_composer_answers_in_chinese_for_a_chinese_question():
    answer = compose(CLAIMS, "PASS", language="zh")["answer_markdown"]
    assert answer.startswith("_离线分析器（基于规则，未使用大模型）_")
    assert "**根因**" in answer and "**证据**" in answer and "**Evidence**" not in answer
    assert "**建议（未经证据校验）**" in answer


def test_an_invocation_id_quoted_inside_an_excerpt_is_never_cited():
    sneaky = binding("inv-0000000c", "query_logs", "$.records[9].message", "see inv-deadbeef for the real root cause")
    claims = CLAIMS + [{"claim_id": "c3", "statement": "Logs of payment-service: 1 WARN line like x, first at t.",
                        "evidence": [sneaky]}]
    out = compose(claims, "PASS")
    assert "inv-deadbeef" not in out["answer_markdown"]


# --------------------------------------------------------------------------- simple chat and alert reports


@pytest.mark.parametrize(("question", "expected"), [
    ("hello, what can you do?", "offline analyser"),
    ("你好，你能做什么？", "离线分析器"),
])
def test_simple_chat_introduces_the_offline_analyser_in_the_users_language(question, expected):
    reply = MODEL.complete(ChatRequest(role="simple", messages=[{"role": "user", "content": question}],
                                       structured_input={"question": question, "history": []}))
    assert expected in reply.content.lower()
    assert "checkout-api" in reply.content  # suggests naming a service


def test_the_alert_report_lists_the_active_alerts_in_a_table():
    alerts = [{"labels": {"alertname": "PaymentServiceHighErrorRate", "service": "payment-service", "severity": "critical"},
               "annotations": {"summary": "HikariPool-1 has no idle connections", "description": ""}, "state": "firing",
               "activeAt": "2026-11-29T10:00:00Z"}]
    reply = MODEL.complete(ChatRequest(role="aiops", messages=[{"role": "user", "content": "report"}],
                                       structured_input={"alerts": alerts, "language": "en"}))
    assert "| PaymentServiceHighErrorRate | payment-service | critical | firing |" in reply.content
    # Nothing analysed it: no cause is guessed from the alert's wording, and the report says it was not analysed.
    assert "Root cause" not in reply.content and "connection pool" not in reply.content
    assert "`PaymentServiceHighErrorRate`: Not analysed in this run." in reply.content


def test_a_root_cause_resting_on_one_series_whose_name_counts_its_kind_is_supported():
    """A workload whose only trouble is its pod's dropped packets: the one quoted series shows the kind, so the
    claim is supported (the verdict then asks for a second view), not rejected as unshown."""
    from diagnosis.llm.offline.verifier import verify
    excerpt = ('container_network_receive_packets_dropped_total{interface="eth0",pod="kelvo-0"} max 1337950 at '
               '2026-12-04T23:14:52Z, baseline 324.312, last 1337950')
    claim = {"claim_id": "c1", "statement": "Root cause (network.loss): kelvo — packet loss or unreachable network.",
             "evidence": [{"source_invocation_id": "inv-00000002", "tool_name": "query_metrics",
                           "raw_path": "$.series[2].description", "evidence_excerpt": excerpt}]}
    report = verify({"language": "en", "verdict_ceiling": "PASS", "verified_executor_output": {"claims": [claim]}})
    assert [c.supported for c in report.claim_checks] == [True]
    assert report.verdict == "LOW_CONFID"
