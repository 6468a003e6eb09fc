"""Auto mode sends every question about a system's state to the gated DIAGNOSIS graph; SIMPLE answers
are labelled as not checked against evidence and carry no citation-like token."""

from __future__ import annotations

import pytest

from diagnosis.models import DiagnosisRun
from diagnosis.services.strategy import strategy_choose
from tests.support.fake_openai import Reply

STATE_QUESTIONS = [
    "what is wrong with billing right now?", "What's wrong with checkout?", "is billing healthy?",
    "Why is the search page slow?", "latency of orders went up", "is web01 down?", "any alerts firing?",
    "billing health check please", "db-01 is acting up", "host web01.prod.example.com",
    "orders keep failing", "we see errors in checkout", "status of the payment flow",
    "billing 怎么了？", "订单服务故障了吗", "支付接口报错", "搜索很慢", "延迟很高", "有告警吗", "结算挂了", "库存异常",
]
GENERAL_QUESTIONS = ["hello", "Hello, who are you?", "thanks!", "你好，你能做什么？", "good morning"]


@pytest.mark.parametrize("question", STATE_QUESTIONS)
def test_auto_mode_diagnoses_every_question_about_a_systems_state(question):
    assert strategy_choose(question=question, mode="auto") == DiagnosisRun.Strategy.DIAGNOSIS


@pytest.mark.parametrize("question", GENERAL_QUESTIONS)
def test_greetings_and_general_questions_stay_simple(question):
    assert strategy_choose(question=question, mode="auto") == DiagnosisRun.Strategy.SIMPLE


@pytest.mark.django_db(transaction=True)
def test_a_simple_answer_is_labelled_unchecked_and_has_no_citation_like_token(alice_api, demo_knowledge, eager_tasks,
                                                                              openai_llm):
    openai_llm.always(Reply.text(
        "Hi! Billing is fine, see [inv-3f9a2c1b]. The SIMPLETOKEN41 cache died (INV\u20113F9A2C1B). Ask me anything."),
        role="simple")
    body = alice_api.post("/api/chat", {"question": "hello"}, format="json").json()
    assert body["strategy"] == "SIMPLE" and body["evidenceChecked"] is False and body["suggestions"] == []
    assert body["status"] == "SUCCESS", body
    answer = body["answer"]
    assert answer.startswith("_General answer — not checked against evidence")
    assert "inv" not in answer.lower() and "SIMPLETOKEN41" not in answer
    assert "Ask me anything." in answer
    run = DiagnosisRun.objects.get(run_id=body["runId"])
    assert len(run.self_evaluation["simple_audit"]["removed"]) == 2


@pytest.mark.django_db(transaction=True)
def test_a_diagnosis_answer_says_its_evidence_was_checked(alice_api, demo_knowledge):
    body = alice_api.post("/api/chat", {"question": "Why is payment-service failing?"}, format="json").json()
    assert body["strategy"] == "DIAGNOSIS" and body["evidenceChecked"] is True
    assert body["suggestions"] and all("inv-" not in s for s in body["suggestions"])
    assert "**Suggestions (not checked against evidence)**" in body["answer"]
