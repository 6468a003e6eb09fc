"""Text search gives the same runs as a plain substring search over the question, the answer and the
root cause (service and summary), newest first, whichever plan answers it: the newest-first scan
(common words) or the full-text index (rare words), in English and in Chinese, on SQLite (FTS5
trigram) and MariaDB/MySQL (FULLTEXT, CJK bigram terms); combined with filters, over every match.

Transactional: InnoDB's full-text index sees rows only once they are committed.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from tests.console.conftest import roles_create
from tests.factories import ChatSessionFactory, DiagnosisRunFactory
from traces import search
from traces.fulltext import cjk_terms
from traces.search import SearchTermError, term_check
from traces.search import runs_lookup

pytestmark = pytest.mark.django_db(transaction=True)
LIST = reverse("admin:diagnosis_diagnosisrun_changelist")

QUESTIONS = [
    "Is checkout-service down because of the database connection pool?",
    "Why is payment-service slow since 14:00?",
    "payment-service connection pool exhausted again",
    "Kafka consumer lag on ledger-service partition 7",
    "为什么支付服务的数据库连接池耗尽了？",
    "数据库连了吗，连接池满了",  # every bigram of 数据库连接池, but not the phrase
    "订单服务的内存持续上涨，是否存在内存泄漏？",
    "checkout-service 内存泄漏 since the deploy",
    "Why are refunds stuck?",
    "CONNECTION POOL alarms on the order-service",
    "支付服务返回大量500错误",
]
TERMS = [
    "connection pool", "Connection POOL", "payment-service", "kafka consumer lag", "refunds stuck",
    "数据库连接池", "内存泄漏", "支付服务", "内存泄漏 checkout", "连接池", "order", "nothing-like-this",
    "支付服务 500", "ledger-db", "连接被拒绝", "replica lag", "db-primary",
]
# (answer, root-cause service, root-cause summary) of some runs: words found only there are found too
ANSWERS = {
    0: ("The pool is fine; ledger-db refused connections [inv-0000aaaa].", "ledger-db", "ledger-db 连接被拒绝"),
    3: ("Consumer lag follows the replica lag on the broker.", "kafka-broker", "replica lag after a restart"),
    8: ("Refunds wait on db-primary locks.", "db-primary", "row locks held by a batch job"),
}


@pytest.fixture(autouse=True)
def _roles(transactional_db):
    roles_create()


@pytest.fixture
def corpus(alice):
    session = ChatSessionFactory(owner=alice)
    runs = []
    for number, question in enumerate(QUESTIONS):
        answer, service, summary = ANSWERS.get(number, ("", None, None))
        diagnosis = {"rootCause": {"service": service, "summary": summary}} if service else None
        runs.append(DiagnosisRunFactory(session=session, question=question, answer=answer, diagnosis=diagnosis))
    return runs


def _text(run) -> str:
    root = (run.diagnosis or {}).get("rootCause") or {}
    return "\n".join([run.question, run.answer, root.get("service") or "", root.get("summary") or ""]).lower()


def substring_matches(runs, term: str) -> list[int]:
    """The oracle: ids of runs whose searched text holds every word (case-insensitively), newest first."""
    words = search._words(term)
    return [r.pk for r in sorted(runs, key=lambda r: -r.pk) if all(w.lower() in _text(r) for w in words)]


def searched(term: str, queryset=None) -> list[int]:
    queryset = DiagnosisRun.objects.all() if queryset is None else queryset
    return list(runs_lookup(queryset, term).queryset.order_by("-pk").values_list("pk", flat=True))


@pytest.fixture
def index_plan(monkeypatch):
    """The sample is 2 runs and every word counts as rare: the full-text index narrows the rows."""
    monkeypatch.setattr(search, "SAMPLE_ROWS", 2)
    monkeypatch.setattr(search, "INDEX_SHARE", 2.0)
    monkeypatch.setattr(search, "CJK_TERMS_INDEX_SHARE", 2.0)


@pytest.mark.parametrize("term", TERMS)
def test_the_newest_first_scan_finds_what_a_substring_search_finds(corpus, term):
    assert runs_lookup(DiagnosisRun.objects.all(), term).path == "scan"  # fewer runs than the sample
    assert searched(term) == substring_matches(corpus, term)


@pytest.mark.parametrize("term", TERMS)
def test_the_full_text_index_finds_what_a_substring_search_finds(corpus, term, index_plan):
    assert searched(term) == substring_matches(corpus, term)


def test_words_only_in_the_answer_or_the_root_cause_are_found(corpus):
    for term, number in (("ledger-db", 0), ("连接被拒绝", 0), ("replica lag", 3), ("row locks", 8), ("db-primary", 8)):
        assert corpus[number].pk in searched(term), term
        assert term.split()[0].lower() not in corpus[number].question.lower()


def test_the_index_plan_reads_the_full_text_index_and_the_scan_plan_does_not(corpus, monkeypatch, index_plan):
    with CaptureQueriesContext(connection) as ctx:
        lookup = runs_lookup(DiagnosisRun.objects.all(), "数据库连接池")
        list(lookup.queryset)
    index_sql = " ".join(q["sql"] for q in ctx.captured_queries).upper()
    assert lookup.path == "index"
    if connection.vendor == "sqlite":
        assert "DIAGNOSIS_RUN_FTS MATCH" in index_sql
    elif connection.vendor == "mysql" and connection.mysql_is_mariadb:
        assert "MATCH (DIAGNOSIS_RUN.QUESTION_TERMS, DIAGNOSIS_RUN.ANSWER_TERMS) AGAINST" in index_sql
    else:
        assert "MATCH (DIAGNOSIS_RUN.QUESTION, DIAGNOSIS_RUN.ANSWER" in index_sql
    # Words in a large share of the sample never reach the index: the list walks the newest runs.
    monkeypatch.setattr(search, "INDEX_SHARE", 0.0)
    with CaptureQueriesContext(connection) as ctx:
        lookup = runs_lookup(DiagnosisRun.objects.all(), "connection pool")
        found = sorted(lookup.queryset.values_list("pk", flat=True), reverse=True)
    assert lookup.path == "scan" and "MATCH" not in " ".join(q["sql"] for q in ctx.captured_queries).upper()
    assert found == substring_matches(corpus, "connection pool")


@pytest.mark.parametrize("plan", ["scan", "index"])
def test_a_search_with_a_filter_finds_every_match_the_filter_selects(corpus, monkeypatch, plan):
    """The filter and the search are one query over all rows: no cap applied before the filter."""
    if plan == "index":
        monkeypatch.setattr(search, "SAMPLE_ROWS", 2)
        monkeypatch.setattr(search, "INDEX_SHARE", 2.0)
        monkeypatch.setattr(search, "CJK_TERMS_INDEX_SHARE", 2.0)
    DiagnosisRun.objects.filter(pk__in=[corpus[2].pk, corpus[9].pk]).update(degraded=True)
    degraded = DiagnosisRun.objects.filter(degraded=True)
    assert searched("pool", degraded) == [corpus[9].pk, corpus[2].pk]


def test_words_no_index_can_answer_are_matched_over_every_run(corpus):
    lookup = runs_lookup(DiagnosisRun.objects.all(), "on")  # shorter than every index's tokens
    assert lookup.path == "scan"
    assert searched("on") == substring_matches(corpus, "on")


def test_the_list_page_shows_the_search_results(staff_client, corpus, index_plan):
    response = staff_client.get(LIST + "?q=数据库连接池")
    assert response.status_code == 200
    assert [r.pk for r in response.context["cl"].result_list] == substring_matches(corpus, "数据库连接池")


def test_a_term_with_nothing_to_search_for_or_too_long_is_refused():
    for term in ('"()"', "*", "x" * (search.MAX_TERM_CHARS + 1)):
        with pytest.raises(SearchTermError):
            term_check(term)
    for term in ("pool", "run-0123abcd", "连接池", ""):
        term_check(term)


def test_the_cjk_terms_follow_the_question(alice):
    run = DiagnosisRunFactory(session__owner=alice, question="内存泄漏 in checkout")
    assert run.question_terms == "51855b58 5b586cc4 6cc46f0f" == cjk_terms("内存泄漏")
    assert DiagnosisRun.objects.get(pk=run.pk).question_terms == run.question_terms
    run.question = "Why is checkout slow?"
    run.save()
    assert DiagnosisRun.objects.get(pk=run.pk).question_terms is None


def test_the_answer_terms_follow_the_answer_and_the_root_cause_summary(alice):
    run = DiagnosisRunFactory(session__owner=alice, question="q", answer="内存泄漏",
                              diagnosis={"rootCause": {"service": "svc", "summary": "连接"}})
    stored = DiagnosisRun.objects.get(pk=run.pk)
    assert stored.answer_terms == "51855b58 5b586cc4 6cc46f0f 8fde63a5" and stored.root_summary == "连接"
    run.answer, run.diagnosis = "fine", None
    run.save(update_fields=["answer", "diagnosis"])
    stored = DiagnosisRun.objects.get(pk=run.pk)
    assert stored.answer_terms is None and stored.root_summary is None
