"""Fixtures of the audit-console tests: one user per role, logged-in clients and recorded runs."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth.models import Group

from tests.factories import UserFactory

# Playwright's sync API runs an event loop in the test thread; the ORM calls the browser tests make
# around it (creating rows, checking the stored feedback) are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Every test here creates users; a slow hasher would be most of the suite's time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def support_staff(support_user):
    """Charlie: staff, in the support_staff group (view everything, give feedback)."""
    support_user.groups.add(Group.objects.get(name="support_staff"))
    return support_user


@pytest.fixture
def auditor(db):
    """Dana: staff, in the auditor group (view only)."""
    user = UserFactory(username="dana", is_staff=True)
    user.groups.add(Group.objects.get(name="auditor"))
    return user


@pytest.fixture
def superuser(db):
    return UserFactory(username="root", is_staff=True, is_superuser=True)


@pytest.fixture
def outsider(alice):
    """Alice: an API client (no staff flag); she owns sessions but may not enter the console."""
    return alice


@pytest.fixture
def staff_client(client, support_staff):
    client.force_login(support_staff)
    return client


@pytest.fixture
def auditor_client(client, auditor):
    client.force_login(auditor)
    return client


def roles_create() -> None:
    """The roles of the data migrations, made again: a transactional test's flush removes them."""
    import importlib

    from django.apps import apps

    importlib.import_module("diagnosis.migrations.0002_roles").create_roles(apps, None)
    importlib.import_module("diagnosis.migrations.0004_reviews_and_console_indexes").grant_review_roles(apps, None)


def support_staff_create(username: str = "sam"):
    """A support-staff account made inside a test (after `roles_create` in transactional tests)."""
    user = UserFactory(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name="support_staff"))
    return user
