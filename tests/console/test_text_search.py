"""Question text search gives the same runs as a plain substring search, newest first, whichever path
answers it: the newest-first scan (common words) or the full-text index (rare words, older runs), in
English and in Chinese, on SQLite (FTS5 trigram) and MariaDB/MySQL (FULLTEXT, CJK bigram terms).

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
    "支付服务 500",
]


@pytest.fixture(autouse=True)
def _roles(transactional_db):
    roles_create()


@pytest.fixture
def corpus(alice):
    session = ChatSessionFactory(owner=alice)
    return [DiagnosisRunFactory(session=session, question=q) for q in QUESTIONS]


def substring_matches(runs, term: str, limit: int | None = None) -> list[int]:
    """The oracle: ids of runs whose question contains every word (case-insensitively), newest first."""
    words = search._words(term)
    found = [r.pk for r in sorted(runs, key=lambda r: -r.pk) if all(w.lower() in r.question.lower() for w in words)]
    return found[:limit] if limit else found


def searched(term: str) -> list[int]:
    return list(runs_lookup(DiagnosisRun.objects.all(), term).queryset.order_by("-pk").values_list("pk", flat=True))


@pytest.mark.parametrize("term", TERMS)
def test_the_newest_first_scan_finds_what_a_substring_search_finds(corpus, term):
    assert searched(term) == substring_matches(corpus, term)


@pytest.mark.parametrize("term", TERMS)
def test_the_full_text_index_finds_what_a_substring_search_finds(corpus, term, monkeypatch):
    monkeypatch.setattr(search, "PROBE_ROWS", 1)  # the scan sees only the newest run: the index finds the rest
    assert searched(term) == substring_matches(corpus, term)


@pytest.mark.parametrize("index_match_cost", [0, 1_000])  # the sample sends the rest to the index, or scans on
def test_a_sampled_scan_then_a_deeper_scan_or_the_index_finds_what_a_substring_search_finds(
        corpus, monkeypatch, index_match_cost):
    monkeypatch.setattr(search, "SAMPLE_ROWS", 2)
    monkeypatch.setattr(search, "PROBE_ROWS", 6)
    monkeypatch.setattr(search, "INDEX_MATCH_COST", index_match_cost)
    for term in TERMS:
        assert searched(term) == substring_matches(corpus, term), term


def test_the_index_path_reads_the_full_text_index_and_the_scan_path_does_not(corpus, monkeypatch):
    monkeypatch.setattr(search, "PROBE_ROWS", 1)
    with CaptureQueriesContext(connection) as ctx:
        assert runs_lookup(DiagnosisRun.objects.all(), "数据库连接池").kind == "text"
    index_sql = " ".join(q["sql"] for q in ctx.captured_queries).upper()
    if connection.vendor == "sqlite":
        assert "DIAGNOSIS_RUN_FTS MATCH" in index_sql
    elif connection.vendor == "mysql" and connection.mysql_is_mariadb:
        assert "MATCH (QUESTION_TERMS) AGAINST" in index_sql
    else:
        assert "MATCH (QUESTION) AGAINST" in index_sql
    # Words matched by more runs than a list keeps never reach the index: the scan stops early.
    monkeypatch.setattr(search, "PROBE_ROWS", 50_000)
    monkeypatch.setattr(search, "TEXT_MATCHES", 2)
    with CaptureQueriesContext(connection) as ctx:
        lookup = runs_lookup(DiagnosisRun.objects.all(), "connection pool")
    assert lookup.kind == "text" and "MATCH" not in " ".join(q["sql"] for q in ctx.captured_queries).upper()
    assert sorted(lookup.queryset.values_list("pk", flat=True), reverse=True) == substring_matches(
        corpus, "connection pool", limit=2)


@pytest.mark.parametrize("probe_rows", [1, 4, 50_000])
def test_only_the_newest_matches_are_kept_whichever_path_finds_them(corpus, monkeypatch, probe_rows):
    monkeypatch.setattr(search, "PROBE_ROWS", probe_rows)
    monkeypatch.setattr(search, "TEXT_MATCHES", 2)
    for term in ("connection pool", "内存泄漏", "支付服务"):
        assert searched(term) == substring_matches(corpus, term, limit=2), term


def test_words_no_index_can_answer_are_the_bounded_scan_s_answer(corpus, monkeypatch):
    monkeypatch.setattr(search, "PROBE_ROWS", 3)  # the newest three runs only
    lookup = runs_lookup(DiagnosisRun.objects.all(), "on")  # shorter than every index's tokens
    newest = sorted(corpus, key=lambda r: -r.pk)[:3]
    assert lookup.kind == "scan"
    assert searched("on") == substring_matches(newest, "on") != substring_matches(corpus, "on")


def test_the_list_page_shows_the_search_results(staff_client, corpus, monkeypatch):
    monkeypatch.setattr(search, "PROBE_ROWS", 2)
    response = staff_client.get(LIST + "?q=数据库连接池")
    assert response.status_code == 200
    assert [r.pk for r in response.context["cl"].result_list] == substring_matches(corpus, "数据库连接池")


def test_the_cjk_terms_follow_the_question(alice):
    run = DiagnosisRunFactory(session__owner=alice, question="内存泄漏 in checkout")
    assert run.question_terms == "51855b58 5b586cc4 6cc46f0f" == cjk_terms("内存泄漏")
    assert DiagnosisRun.objects.get(pk=run.pk).question_terms == run.question_terms
    run.question = "Why is checkout slow?"
    run.save()
    assert DiagnosisRun.objects.get(pk=run.pk).question_terms is None
