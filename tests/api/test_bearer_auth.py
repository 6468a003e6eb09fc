"""API tokens are accepted as `Authorization: Bearer <token>` too (how Alertmanager sends them)."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_a_bearer_token_authenticates_like_a_token(alice):
    key = Token.objects.get_or_create(user=alice)[0].key
    missing = f"/api/runs/run-{'0' * 32}"
    for scheme in ("Bearer", "Token"):  # authenticated, so the run is looked up: not found
        response = APIClient().get(missing, HTTP_AUTHORIZATION=f"{scheme} {key}")
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    refused = APIClient().get(missing, HTTP_AUTHORIZATION="Bearer not-a-valid-token")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "not_authenticated"
