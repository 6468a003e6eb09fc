"""diagnosis.services.access: who sees and who rates which sessions and runs."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, Permission

from diagnosis.selectors import visible_runs, visible_sessions
from diagnosis.services.access import can_give_feedback, is_support_staff
from tests.factories import UserFactory
from tests.traces.conftest import make_run

pytestmark = pytest.mark.django_db


def test_support_staff_auditors_and_superusers_count_as_support_staff(support_staff, auditor):
    assert is_support_staff(support_staff)
    assert is_support_staff(auditor)
    assert is_support_staff(UserFactory(username="root", is_superuser=True))


def test_clients_anonymous_users_and_the_is_staff_flag_alone_do_not(alice, support_user):
    assert not is_support_staff(alice)
    assert not is_support_staff(support_user)
    assert not is_support_staff(AnonymousUser())


def test_an_inactive_group_member_sees_nothing(support_staff, alice):
    make_run(owner=alice)
    support_staff.is_active = False
    assert not is_support_staff(support_staff)
    assert not visible_runs(support_staff).exists()


def test_a_client_sees_only_its_own_sessions_and_runs(alice, bob):
    mine, theirs = make_run(owner=alice), make_run(owner=bob)
    assert list(visible_sessions(alice)) == [mine.session]
    assert list(visible_runs(alice)) == [mine]
    assert list(visible_runs(bob)) == [theirs]
    assert not visible_runs(AnonymousUser()).exists()
    assert not visible_sessions(AnonymousUser()).exists()


def test_support_staff_and_auditors_see_every_session_and_run(support_staff, auditor, alice, bob):
    runs = {make_run(owner=alice), make_run(owner=bob)}
    for user in (support_staff, auditor):
        assert set(visible_runs(user)) == runs
        assert set(visible_sessions(user)) == {r.session for r in runs}


def test_owners_support_staff_and_superusers_may_give_feedback(alice, support_staff):
    run = make_run(owner=alice)
    assert can_give_feedback(alice, run)
    assert can_give_feedback(support_staff, run)
    assert can_give_feedback(UserFactory(username="root", is_superuser=True), run)


def test_other_clients_and_auditors_may_not_rate_someone_elses_run(alice, bob, auditor):
    run = make_run(owner=alice)
    assert not can_give_feedback(bob, run)
    assert not can_give_feedback(auditor, run)
    assert not can_give_feedback(AnonymousUser(), run)


def test_the_give_feedback_permission_alone_is_enough_to_rate(alice, bob):
    run = make_run(owner=alice)
    bob.user_permissions.add(Permission.objects.get(codename="give_feedback", content_type__app_label="diagnosis"))
    assert can_give_feedback(bob, run)
