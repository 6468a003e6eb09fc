"""The console reads a constant number of queries whatever the size of a run (STYLE: pin every read).

Each test warms the process-wide caches (content types) with one request first, then pins the count.
"""

from __future__ import annotations

import pytest
from django.db.models import Max
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from traces import search

from tests.console.scenarios import run_with_steps

pytestmark = pytest.mark.django_db

# session, user, user permissions, group permissions, the user's saved views, capped COUNT, one page of
# runs, their sessions
RUN_LIST_QUERIES = 8
ID_LOOKUP_QUERIES = 5
# a text search adds the newest id (on a table larger than its sample, one count of the sample more,
# which picks the full-text index or the scan: traces/search.py); the list itself is the same query
TEXT_SEARCH_QUERIES = 1
# session, user, run (+ session, owner, feedback author, case), steps, invocations, two permission
# loads, the support-staff check of the feedback rule, the reviewer check, the reviewers to assign to,
# the active score configurations, the scores given
RUN_DETAIL_QUERIES = 12
# session, user, two permission loads, the chat session with its owner, its runs in order
SESSION_PAGE_QUERIES = 6


def _warm(client, url):
    assert client.get(url).status_code == 200


@pytest.mark.parametrize("steps", [1, 200])
def test_the_run_list_costs_the_same_queries_with_runs_of_1_and_200_steps(staff_client, django_assert_num_queries, steps):
    run_with_steps(steps)
    run_with_steps(steps)
    url = reverse("admin:diagnosis_diagnosisrun_changelist")
    _warm(staff_client, url)
    with django_assert_num_queries(RUN_LIST_QUERIES):
        response = staff_client.get(url)
    assert response.status_code == 200 and response.context["cl"].result_count == 2


@pytest.fixture
def _committed_roles(transactional_db):
    from tests.console.conftest import roles_create

    roles_create()


# Transactional: InnoDB's full-text index sees only committed rows.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("steps", [1, 200])
def test_a_filtered_searched_list_costs_the_same_queries(_committed_roles, staff_client, django_assert_num_queries,
                                                         steps):
    run = run_with_steps(steps)
    url = reverse("admin:diagnosis_diagnosisrun_changelist") + "?degraded__exact=0&verdict=none&q=payment-service+failing"
    _warm(staff_client, url)
    # Ids are not reused on MySQL: once the newest id passes the sample size, the sample is counted too.
    sample_count = 1 if DiagnosisRun.objects.aggregate(top=Max("id"))["top"] >= search.SAMPLE_ROWS else 0
    with django_assert_num_queries(RUN_LIST_QUERIES + TEXT_SEARCH_QUERIES + sample_count):
        response = staff_client.get(url)
    assert [r.pk for r in response.context["cl"].result_list] == [run.pk]


@pytest.mark.parametrize("steps", [1, 200])
def test_an_id_search_opens_the_run_with_one_lookup(staff_client, django_assert_num_queries, steps):
    run = run_with_steps(steps)
    url = reverse("admin:diagnosis_diagnosisrun_changelist") + f"?q={run.run_id[:12]}"
    staff_client.get(url)
    # session, user, user permissions, group permissions, the indexed id lookup
    with django_assert_num_queries(ID_LOOKUP_QUERIES):
        response = staff_client.get(url)
    assert response.status_code == 302 and response["Location"].endswith(f"/{run.pk}/change/")


@pytest.mark.parametrize("steps", [1, 200])
def test_the_run_detail_page_costs_the_same_queries_with_1_and_200_steps(staff_client, django_assert_num_queries, steps):
    run = run_with_steps(steps)
    _warm(staff_client, reverse("admin:diagnosis_diagnosisrun_change", args=[run_with_steps(1).pk]))
    with django_assert_num_queries(RUN_DETAIL_QUERIES):
        response = staff_client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk]))
    assert response.status_code == 200
    assert len(response.context["detail"].timeline.steps) == steps
    assert sum(len(s.invocations) for s in response.context["detail"].timeline.steps) == steps


@pytest.mark.parametrize("steps", [1, 200])
def test_the_session_page_lists_its_runs_in_constant_queries(staff_client, django_assert_num_queries, steps):
    run = run_with_steps(steps)
    url = reverse("admin:diagnosis_chatsession_change", args=[run.session_id])
    _warm(staff_client, url)
    with django_assert_num_queries(SESSION_PAGE_QUERIES):
        assert staff_client.get(url).status_code == 200
