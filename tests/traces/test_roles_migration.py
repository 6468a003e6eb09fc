"""diagnosis/migrations/0002_roles.py: the support_staff and auditor groups."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, Permission

roles = import_module("diagnosis.migrations.0002_roles")
pytestmark = pytest.mark.django_db

VIEW = {
    "view_chatsession", "view_diagnosisrun", "view_agentstep", "view_toolinvocation", "view_runevent",
    "view_caselibraryentry", "view_knowledgedocument", "view_knowledgechunk",
    "view_runreview", "view_runreviewentry",  # 0004_reviews_and_console_indexes: reviews are readable too
}


def codenames(group_name: str) -> set[str]:
    return set(Group.objects.get(name=group_name).permissions.values_list("codename", flat=True))


def test_support_staff_may_view_the_audit_models_and_give_feedback():
    assert codenames("support_staff") == VIEW | {"give_feedback"}


def test_auditors_may_only_view():
    assert codenames("auditor") == VIEW


def test_give_feedback_is_a_permission_on_diagnosis_runs():
    permission = Permission.objects.get(codename="give_feedback")
    assert (permission.content_type.app_label, permission.content_type.model) == ("diagnosis", "diagnosisrun")
    assert permission.name == "Can give feedback on runs"


def test_the_view_permissions_are_djangos_own_and_not_duplicated():
    for codename in VIEW:
        assert Permission.objects.filter(codename=codename, content_type__app_label="diagnosis").count() == 1
    assert Permission.objects.get(codename="view_caselibraryentry").name == "Can view case"


def test_the_migration_reverses_and_reapplies_cleanly():
    assert roles.Migration.operations[0].reversible
    roles.remove_roles(apps, None)
    assert not Group.objects.filter(name__in=["support_staff", "auditor"]).exists()
    assert not Permission.objects.filter(codename="give_feedback").exists()
    assert Permission.objects.filter(codename="view_diagnosisrun").exists()
    roles.create_roles(apps, None)
    roles.create_roles(apps, None)  # idempotent
    import_module("diagnosis.migrations.0004_reviews_and_console_indexes").grant_review_roles(apps, None)
    assert codenames("support_staff") == VIEW | {"give_feedback"}
    assert Permission.objects.filter(codename="give_feedback").count() == 1
