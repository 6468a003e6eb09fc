"""The trust line reads the structured diagnosis defensively (with or without `subject`, `candidates`
and `undetermined`) and flags what a reviewer must not miss."""

from __future__ import annotations

from traces.trust import asked_services, trust_line


def test_a_root_cause_on_another_service_than_the_one_asked_about_is_flagged():
    line = trust_line(flow="CHAT", question="Why is payment-service failing?", verdict="PASS",
                      diagnosis={"rootCause": {"service": "ledger-db"}, "nothingWrong": False})
    assert line.asked == ("payment-service",) and line.asked_source == "question"
    assert line.root_service == "ledger-db" and line.flags == ("root cause on another service",)


def test_the_asked_service_comes_from_the_diagnosis_subject_when_it_has_one():
    line = trust_line(flow="CHAT", question="Why is it slow?", verdict="LOW_CONFID", diagnosis={
        "subject": {"services": ["checkout-service"], "withoutData": ["checkout-service"]},
        "rootCause": {"service": "checkout-service"}, "candidates": [{"service": "x"}], "undetermined": False})
    assert line.asked == ("checkout-service",) and line.asked_source == "diagnosis"
    assert not line.mismatch and line.flags == ("no data for checkout-service",)


def test_same_service_nothing_wrong_and_undetermined_are_read_as_they_are_stored():
    same = trust_line(flow="CHAT", question="Is payment-service ok?", verdict="PASS",
                      diagnosis={"rootCause": {"service": "payment-service"}})
    assert same.flags == () and same.state == ""
    calm = trust_line(flow="CHAT", question="Is payment-service ok?", verdict="PASS",
                      diagnosis={"rootCause": None, "nothingWrong": True, "undetermined": False})
    assert calm.state == "nothingWrong"
    open_ = trust_line(flow="CHAT", question="q", verdict="", diagnosis={"rootCause": None, "undetermined": True})
    assert open_.state == "undetermined" and open_.verdict == ""
    assert trust_line(flow="CHAT", question="q", verdict="", diagnosis=None).state == ""


def test_an_alert_analysis_shows_its_coverage_and_its_verdict_from_the_audit_when_the_column_is_empty():
    rules = {"claims_verified": 4, "claims_total": 4, "alerts_analysed": 2, "alerts_total": 2}
    full = trust_line(flow="AI_OPS", question="Analyse 2 active alert(s): A (svc-a), B (svc-b).", verdict="",
                      diagnosis={"rootCause": None, "undetermined": True, "coverage": {
                          "alertsAnalysed": 2, "alertsReceived": 2}},
                      self_evaluation={"aiops_rule_evaluation": rules})
    assert (full.verdict, full.verdict_source, full.coverage, full.flags, full.state) == (
        "PASS", "audit", (2, 2), (), "")
    partial = trust_line(flow="AI_OPS", question="Analyse 22 active alert(s)", verdict="LOW_CONFID",
                         diagnosis={"coverage": {"alertsAnalysed": 3, "alertsReceived": 22}})
    assert partial.coverage == (3, 22) and partial.flags == ("not every alert analysed",)
    assert partial.verdict_source == "run"
    degraded = trust_line(flow="AI_OPS", question="q", verdict="", diagnosis={}, degraded=True,
                          self_evaluation={"aiops_rule_evaluation": rules})
    assert degraded.verdict == ""


def test_the_services_a_question_names():
    assert asked_services("Why is payment-service slow? Is ledger-db up?", "CHAT") == ("payment-service", "ledger-db")
    assert asked_services("为什么支付服务变慢了？", "CHAT") == ()
    assert asked_services("Analyse 2 active alert(s): HighLatency (checkout), Errors (-).", "AI_OPS") == ("checkout",)
