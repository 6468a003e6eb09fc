"""Fixtures of the security suite: the four roles of every permission test, their clients, and a
world of two clients' finished runs (with steps, tool invocations and a case) to attack."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps

from tests.api.conftest import token_client
from tests.diagnosis.conftest import demo_knowledge, fake_openai, make_run, openai_llm  # noqa: F401
from tests.factories import UserFactory


def ensure_roles() -> None:
    """The support_staff and auditor groups with their permissions, exactly as the roles migration
    makes them: transactional tests flush the rows that migration created."""
    import_module("diagnosis.migrations.0002_roles").create_roles(apps, None)
    import_module("diagnosis.migrations.0004_reviews_and_console_indexes").grant_review_roles(apps, None)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """The users' factory hashes a password per user: at full PBKDF2 strength that is most of the
    time of a short test, and hashing strength is not what this suite measures."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def api_executor(request):
    """Embedded pass: tasks run eagerly. Services pass: a real worker runs them, unless the test
    asked for `eager_tasks` because it changes settings a worker process cannot see."""
    from tests.conftest import services_available

    if services_available() and "eager_tasks" not in request.fixturenames:
        request.getfixturevalue("live_worker")
    else:
        # Not the app's current flag: an earlier test of the session may have left it off.
        request.getfixturevalue("eager_tasks")


@pytest.fixture
def support_staff(support_user):
    """Charlie: staff flag, member of support_staff (reads everything, rates any run)."""
    from django.contrib.auth.models import Group

    ensure_roles()
    support_user.groups.add(Group.objects.get(name="support_staff"))
    return support_user


@pytest.fixture
def auditor(db):
    """Dana: staff flag, member of auditor (reads everything, rates nothing)."""
    from django.contrib.auth.models import Group

    ensure_roles()
    user = UserFactory(username="dana", is_staff=True)
    user.groups.add(Group.objects.get(name="auditor"))
    return user


@pytest.fixture
def clients(alice, bob, support_staff, auditor):
    """One token-authenticated API client per role, keyed by role name."""
    return {"alice": token_client(alice), "bob": token_client(bob), "support": token_client(support_staff),
            "auditor": token_client(auditor)}


@pytest.fixture
def world(alice, bob):
    """Alice's and Bob's finished runs, each with two steps, two tool invocations and a case."""
    from diagnosis.services.feedback import case_upsert
    from tests.traces.conftest import make_run as make_traced_run

    runs = {}
    for owner in (alice, bob):
        run = make_traced_run(owner=owner, steps=2, question=f"Why is {owner.username}-service failing?",
                              answer=f"{owner.username}-service exhausts its DB pool.")
        case_upsert(run=run, user=None)
        runs[owner.username] = run
    return runs
