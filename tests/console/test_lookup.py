"""Run lookup in the console: ids (whole or a prefix of 8+ characters) by one indexed lookup that opens
the run, question words by full-text search (MySQL FULLTEXT, SQLite FTS5), and the new filters.

Transactional: InnoDB's full-text index sees rows only once they are committed.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from tests.console.conftest import roles_create
from tests.console.scenarios import evidence_retry_run, fallback_run, happy_run
from tests.factories import ChatSessionFactory, DiagnosisRunFactory
from traces.search import runs_lookup

pytestmark = pytest.mark.django_db(transaction=True)
LIST = reverse("admin:diagnosis_diagnosisrun_changelist")


@pytest.fixture(autouse=True)
def _roles(transactional_db):
    roles_create()


@pytest.fixture
def runs(alice):
    session = ChatSessionFactory(owner=alice, session_id="ticket-4711-checkout")
    return {
        "happy": happy_run(owner=alice),
        "retry": evidence_retry_run(owner=alice),
        "fallback": fallback_run(session=session, question="Is checkout slow because of payments?"),
        "second": DiagnosisRunFactory(session=session, question="Checkout is still slow after the restart"),
        "pending": DiagnosisRunFactory(session__owner=alice, question="Why are refunds stuck?"),
        "zh": DiagnosisRunFactory(session__owner=alice, question="为什么支付服务的数据库连接池耗尽了？"),
    }


def listed(client, query: str) -> set[str]:
    response = client.get(LIST + query)
    assert response.status_code == 200, response
    return {run.run_id for run in response.context["cl"].result_list}


def opens(client, query: str) -> str:
    response = client.get(LIST + query)
    assert response.status_code == 302, response
    return response["Location"]


def detail_url(run) -> str:
    return reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk])


def test_a_whole_run_id_opens_the_run(staff_client, runs):
    assert opens(staff_client, f"?q={runs['retry'].run_id}") == detail_url(runs["retry"])


@pytest.mark.parametrize("length", [8, 12, 20])
def test_a_run_id_prefix_opens_the_run(staff_client, runs, length):
    assert opens(staff_client, f"?q={runs['retry'].run_id[:length]}") == detail_url(runs["retry"])


def test_an_invocation_id_whole_or_prefix_opens_its_run(staff_client, runs):
    invocation_id = runs["retry"].tool_invocations.first().invocation_id
    assert opens(staff_client, f"?q={invocation_id}") == detail_url(runs["retry"])
    # a prefix matching invocations of several runs lists them instead
    assert runs_lookup(DiagnosisRun.objects.all(), invocation_id[:8]).kind == "invocation"


def test_a_session_id_lists_its_runs_and_a_prefix_does_too(staff_client, runs):
    expected = {runs["fallback"].run_id, runs["second"].run_id}
    assert listed(staff_client, "?q=ticket-4711-checkout") == expected
    assert listed(staff_client, "?q=ticket-4711") == expected
    single = ChatSessionFactory(owner=runs["happy"].session.owner, session_id="ticket-5000-refunds")
    DiagnosisRun.objects.filter(pk=runs["happy"].pk).update(session=single)
    assert opens(staff_client, "?q=ticket-5000-refunds") == detail_url(runs["happy"])


def test_an_unknown_id_finds_nothing_and_does_not_fall_back_to_the_text(staff_client, runs):
    assert listed(staff_client, "?q=run-ffffffff") == set()
    assert listed(staff_client, "?q=inv-00000000") == set()


def test_the_id_lookup_is_one_indexed_prefix_query_without_a_substring_search(staff_client, runs):
    prefix = runs["retry"].run_id[:12]
    with CaptureQueriesContext(connection) as ctx:
        staff_client.get(LIST + f"?q={prefix}")
    lookups = [q["sql"] for q in ctx.captured_queries if prefix in q["sql"] or "%s" in q["sql"]]
    run_queries = [q["sql"] for q in ctx.captured_queries if "diagnosis_run" in q["sql"] and prefix in q["sql"]]
    assert len(run_queries) == 1, lookups
    sql = run_queries[0].upper()
    assert "QUESTION" not in sql.split("WHERE", 1)[1]
    assert f"%{prefix.upper()}" not in sql  # no leading wildcard


@pytest.mark.parametrize("term, expected", [
    ("checkout slow", {"fallback", "second"}),
    ("refunds", {"pending"}),
    ("Refunds stuck", {"pending"}),
    ("payments checkout", {"fallback"}),
    ("数据库连接池", {"zh"}),
    ("nothing-like-this", set()),
])
def test_question_words_are_found_by_full_text_search(staff_client, runs, term, expected):
    assert listed(staff_client, f"?q={term}") == {runs[name].run_id for name in expected}


def test_the_full_text_index_follows_updates_and_deletes(staff_client, runs):
    DiagnosisRun.objects.filter(pk=runs["pending"].pk).update(question="Why are chargebacks stuck?")
    assert listed(staff_client, "?q=refunds") == set()
    assert listed(staff_client, "?q=chargebacks") == {runs["pending"].run_id}
    runs["pending"].delete()
    assert listed(staff_client, "?q=chargebacks") == set()


@pytest.mark.parametrize("query, expected", [
    ("?tool=query_logs", {"happy", "retry", "fallback"}),
    ("?tool=query_metrics", {"retry"}),
    ("?tool=query_alerts", set()),
    ("?error_code=model_connection_error", {"pending"}),
    ("?model=gpt-4o-mini", {"happy", "retry", "fallback"}),
    ("?latency=10000-", {"retry"}),
    ("?latency=5000-6000", {"happy"}),
    ("?latency=-100", {"pending", "second", "zh"}),
    ("?tokens=5000-6000", {"retry"}),
    ("?tokens=1-", {"happy", "retry", "fallback", "second"}),
    ("?tokens=1200-1200", {"second"}),
    ("?service=payment-service", {"second", "zh"}),
    ("?service=payment", set()),  # exact, not a prefix
    ("?service=payments-db", {"pending"}),
    ("?service=checkout-service", {"happy"}),
    ("?service=ledger-service", set()),
    ("?degraded__exact=1", {"retry", "fallback"}),
    ("?degraded__exact=1&service=payment-service", set()),
    ("?service=payment-service&tokens=1000-", {"second"}),
])
def test_it_filters_by_service_tool_error_code_model_latency_and_tokens(staff_client, runs, query, expected):
    DiagnosisRun.objects.filter(pk=runs["pending"].pk).update(error_code="model_connection_error", duration_ms=40)
    DiagnosisRun.objects.filter(pk__in=[runs["second"].pk, runs["zh"].pk]).update(duration_ms=90)
    DiagnosisRun.objects.filter(pk=runs["second"].pk).update(prompt_tokens=1000, completion_tokens=200)
    # The service comes from the structured diagnosis's root cause, when there is one.
    for name, service in [("second", "payment-service"), ("zh", "payment-service"), ("pending", "payments-db"),
                          ("happy", "checkout-service")]:
        run = DiagnosisRun.objects.get(pk=runs[name].pk)
        run.diagnosis = {"rootCause": {"service": service, "cause": "pool exhausted"}, "nothingWrong": False}
        run.save(update_fields=["diagnosis"])
    DiagnosisRun.objects.filter(pk=runs["retry"].pk).update(diagnosis={"rootCause": None, "undetermined": True})
    DiagnosisRun.objects.filter(pk=runs["fallback"].pk).update(diagnosis=None)
    assert listed(staff_client, query) == {runs[name].run_id for name in expected}


def test_a_bad_range_is_shown_under_its_box_and_the_list_is_the_one_without_it(staff_client, runs):
    response = staff_client.get(LIST + "?degraded__exact=1&latency=abc")
    page = response.content.decode()
    assert response.status_code == 200
    assert 'id="filter-latency-error"' in page and "is not a range of whole numbers" in page
    assert 'value="abc"' in page  # still in the box, to be corrected
    assert listed(staff_client, "?degraded__exact=1&latency=abc") == listed(staff_client, "?degraded__exact=1")


@pytest.mark.parametrize("query, control", [
    ("?status__exact=BOGUS", "filter-status__exact-error"), ("?tool=no_such_tool", "filter-tool-error"),
    ("?created_at__gte=yesterday", "filter-created_at__gte-error"), ("?tokens=9-1", "filter-tokens-error"),
    ("?q=%22()%22", "searchbar-error"),
])
def test_a_malformed_filter_or_search_is_named_beside_its_control(staff_client, runs, query, control):
    response = staff_client.get(LIST + query)
    assert response.status_code == 200
    assert f'id="{control}"' in response.content.decode()
    assert len(response.context["cl"].result_list) == len(runs)  # the list without the bad value


def test_the_tool_filter_finds_older_runs_that_other_filters_select(staff_client, runs, monkeypatch):
    """Every run that called the tool is a candidate, not only the newest few: with the list's count
    capped at one, the oldest run calling query_logs is still found when another filter picks it."""
    from traces.admin import CappedCountPaginator

    monkeypatch.setattr(CappedCountPaginator, "COUNT_CAP", 1)
    assert listed(staff_client, "?tool=query_logs&latency=5000-6000") == {runs["happy"].run_id}


def test_the_tool_filter_count_stops_at_its_cap_and_says_more_than(staff_client, runs, monkeypatch):
    """Counting costs one index probe per run, so under the tool filter the count stops at its cap and
    the footer says "more than"."""
    import traces.admin_filters

    monkeypatch.setattr(traces.admin_filters, "TOOL_COUNT_CAP", 2)
    page = staff_client.get(LIST + "?tool=query_logs").content.decode()
    assert "more than 2</span> diagnosis runs" in page
    assert "more than" not in staff_client.get(LIST + "?tool=query_metrics").content.decode()


def test_steps_and_tool_invocations_are_found_by_run_session_or_invocation_id(staff_client, runs):
    retry = runs["retry"]
    invocation = retry.tool_invocations.first()
    tools = reverse("admin:diagnosis_toolinvocation_changelist")
    steps = reverse("admin:diagnosis_agentstep_changelist")
    for term, expected in ((retry.run_id, set(retry.tool_invocations.values_list("pk", flat=True))),
                           (retry.session.session_id, set(retry.tool_invocations.values_list("pk", flat=True))),
                           (invocation.invocation_id, {invocation.pk}), ("run-00000000", set())):
        found = {row.pk for row in staff_client.get(tools, {"q": term}).context["cl"].result_list}
        assert found == expected, term
    found = {row.pk for row in staff_client.get(steps, {"q": retry.run_id}).context["cl"].result_list}
    assert found == set(retry.steps.values_list("pk", flat=True)) != set()
