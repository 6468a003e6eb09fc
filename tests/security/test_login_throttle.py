"""Console login throttling (django-axes): failed logins counted per user name and per client address;
past the limit even the right password is refused, while logins without a request (test clients,
commands) and API tokens are untouched."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery staple"


def admin_login(username: str, password: str, address: str):
    return Client(REMOTE_ADDR=address).post("/admin/login/", {"username": username, "password": password, "next": "/admin/"})


def logged_in(response) -> bool:
    return response.status_code == 302 and response["Location"] == "/admin/"


def test_a_user_past_the_failure_limit_is_locked_out_from_every_address(settings):
    UserFactory(username="staffer", is_staff=True)
    assert logged_in(admin_login("staffer", PASSWORD, "10.0.0.9"))  # the right password works at first
    attempts = [admin_login("staffer", f"wrong-{i}", f"10.0.1.{i}").status_code for i in range(settings.AXES_FAILURE_LIMIT)]
    refused = admin_login("staffer", PASSWORD, "10.0.2.1")
    assert attempts[:-1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)  # the login form again, with an error
    assert refused.status_code == 429 and not logged_in(refused)  # the right password, from a fresh address: refused
    print(f"\nconsole login: {settings.AXES_FAILURE_LIMIT} wrong passwords from {settings.AXES_FAILURE_LIMIT} addresses, "
          f"then the right one: {refused.status_code}")


def test_an_address_past_the_failure_limit_is_locked_out_for_every_user(settings):
    UserFactory(username="other", is_staff=True)
    for i in range(settings.AXES_FAILURE_LIMIT):
        admin_login(f"guess-{i}", "wrong", "10.0.3.3")
    assert admin_login("other", PASSWORD, "10.0.3.3").status_code == 429
    assert logged_in(admin_login("other", PASSWORD, "10.0.3.4"))  # the user is not locked: only that address


def test_logins_without_a_request_and_api_tokens_are_not_throttled(settings):
    from tests.api.conftest import token_client

    user = UserFactory(username="scripted", is_staff=True)
    for i in range(settings.AXES_FAILURE_LIMIT):
        admin_login("scripted", "wrong", f"10.0.4.{i}")
    assert Client().login(username="scripted", password=PASSWORD)  # no request: not a web login
    assert token_client(user).get("/api/health").status_code in (200, 503)
