"""The run list: its columns, filters and search, and the big-table rules (no heavy column, no full count)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from tests.console.scenarios import evidence_retry_run, fallback_run, happy_run
from tests.factories import DiagnosisRunFactory
from traces.admin import CappedCountPaginator

pytestmark = pytest.mark.django_db
LIST = reverse("admin:diagnosis_diagnosisrun_changelist")


@pytest.fixture
def runs(alice):
    return {
        "happy": happy_run(owner=alice),
        "retry": evidence_retry_run(owner=alice),
        "fallback": fallback_run(owner=alice, question="Is checkout slow because of payments?"),
        "pending": DiagnosisRunFactory(session__owner=alice, question="Why are refunds stuck?"),
    }


def listed(client, query="") -> set[str]:
    response = client.get(LIST + query)
    assert response.status_code == 200
    return {run.run_id for run in response.context["cl"].result_list}


def test_it_shows_the_columns_support_staff_scan(staff_client, runs):
    page = staff_client.get(LIST).content.decode()
    for header in ("run", "session", "question", "agent flow", "strategy", "status", "degraded",
                   "feedback", "duration", "tokens", "created", "verdict and trust"):
        assert f">{header.capitalize()}<" in page or f">{header}<" in page.lower(), header
    assert runs["happy"].run_id in page  # full id in the link's title
    assert "5,722" in page  # tokens of the evidence-retry run


@pytest.mark.parametrize("query, expected", [
    ("?degraded__exact=1", {"retry", "fallback"}),
    ("?degraded__exact=0", {"happy", "pending"}),
    ("?status__exact=PENDING", {"pending"}),
    ("?verdict=PASS", {"happy"}),
    ("?verdict=none", {"retry", "fallback", "pending"}),
    ("?strategy__exact=DIAGNOSIS&agent_flow__exact=CHAT", {"happy", "retry", "fallback", "pending"}),
    ("?feedback=none", {"happy", "retry", "fallback", "pending"}),
    ("?created_at__gte=2000-01-01+00%3A00%3A00%2B00%3A00", {"happy", "retry", "fallback", "pending"}),
    ("?created_at__lt=2000-01-01+00%3A00%3A00%2B00%3A00", set()),
])
def test_it_filters_by_status_flow_strategy_verdict_degraded_feedback_and_date(staff_client, runs, query, expected):
    assert listed(staff_client, query) == {runs[name].run_id for name in expected}


def test_it_filters_by_feedback(staff_client, runs):
    DiagnosisRun.objects.filter(pk=runs["happy"].pk).update(feedback="useful")
    assert listed(staff_client, "?feedback=useful") == {runs["happy"].run_id}
    assert listed(staff_client, "?feedback=not_useful") == set()


def test_the_list_query_leaves_the_heavy_columns_in_the_database(staff_client, runs):
    with CaptureQueriesContext(connection) as ctx:
        staff_client.get(LIST)
    # Compare without identifier quotes: SQLite writes "table"."column", MySQL `table`.`column`.
    queries = [q["sql"].replace("`", "").replace('"', "") for q in ctx.captured_queries]
    run_queries = [sql for sql in queries if "diagnosis_run.run_id" in sql]
    assert len(run_queries) == 1
    sql = run_queries[0]
    for column in ("self_evaluation", "orchestration_trace", "answer", "error_message", "feedback_comment"):
        assert f"diagnosis_run.{column}" not in sql, column
    assert "chat_session.summary" not in sql and "chat_session.metadata" not in sql
    # the question comes as a preview only: SUBSTR(question, 1, 91), never the whole text
    preview = re.compile(r"SUBSTR(?:ING)?\(diagnosis_run\.question", re.I)
    assert preview.search(sql)
    assert "diagnosis_run.question" not in preview.sub("", sql.split(" FROM ")[0])
    assert "JOIN" not in sql  # no join: SQLite with statistics would drive it from chat_session
    sessions = [q for q in queries if q.startswith("SELECT chat_session.id, chat_session.session_id FROM chat_session")]
    assert len(sessions) == 1 and "chat_session.summary" not in sessions[0]  # the page's sessions, in one query


def test_the_list_never_counts_the_whole_table(staff_client, runs):
    with CaptureQueriesContext(connection) as ctx:
        staff_client.get(LIST)
    counts = [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counts and all("LIMIT 10001" in sql for sql in counts)


def test_past_the_cap_the_list_says_more_than(staff_client, runs, monkeypatch):
    monkeypatch.setattr(CappedCountPaginator, "COUNT_CAP", 3)
    page = staff_client.get(LIST).content.decode()
    assert "more than 3</span> diagnosis runs" in page
    monkeypatch.setattr(CappedCountPaginator, "COUNT_CAP", 4)
    assert "more than" not in staff_client.get(LIST).content.decode()


def test_a_session_lists_its_runs_oldest_first(staff_client, alice):
    from tests.factories import ChatSessionFactory

    session = ChatSessionFactory(owner=alice)
    first = happy_run(session=session, question="first question")
    second = fallback_run(session=session, question="second question")
    DiagnosisRun.objects.filter(pk=second.pk).update(created_at=first.created_at.replace(year=first.created_at.year + 1))
    page = staff_client.get(reverse("admin:diagnosis_chatsession_change", args=[session.pk])).content.decode()
    assert page.index(first.run_id) < page.index(second.run_id)
    assert "runs, oldest first" in page.lower()


def test_steps_and_invocations_are_reachable_from_their_run(staff_client, alice):
    run = evidence_retry_run(owner=alice)
    other = happy_run(owner=alice)
    steps = staff_client.get(reverse("admin:diagnosis_agentstep_changelist") + f"?run__id__exact={run.pk}")
    assert len(steps.context["cl"].result_list) == run.step_count
    assert other.run_id not in steps.content.decode()
    invocations = staff_client.get(reverse("admin:diagnosis_toolinvocation_changelist") + f"?run__id__exact={run.pk}")
    assert {i.invocation_id for i in invocations.context["cl"].result_list} == set(
        run.tool_invocations.values_list("invocation_id", flat=True))
    step = run.steps.get(step_index=1)
    page = staff_client.get(reverse("admin:diagnosis_agentstep_change", args=[step.pk])).content.decode()
    assert run.run_id in page and step.tool_invocations.get().invocation_id in page


@pytest.mark.parametrize("column", ["status_badge", "duration", "tokens", "created"])
def test_it_sorts_by_the_sortable_columns(staff_client, runs, column):
    from traces.admin import DiagnosisRunAdmin

    index = DiagnosisRunAdmin.list_display.index(column)
    for order in (str(index), f"-{index}"):
        response = staff_client.get(LIST + f"?o={order}")
        assert response.status_code == 200 and len(response.context["cl"].result_list) == 4
    ascending = [r.run_id for r in staff_client.get(LIST + f"?o={index}").context["cl"].result_list]
    if column == "tokens":
        assert ascending[0] == runs["pending"].run_id and ascending[-1] == runs["retry"].run_id
