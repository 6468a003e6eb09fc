"""GET /api/health and the OpenAPI schema."""

from __future__ import annotations

from unittest import mock

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_health_is_200_when_every_dependency_answers():
    response = APIClient().get("/api/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert set(response.json()["checks"]) == {"database", "broker", "cache"}


def test_health_is_503_naming_the_failing_part_when_the_database_is_down():
    from django.db import OperationalError, connection

    with mock.patch.object(connection, "cursor", side_effect=OperationalError("(2003) Can't connect to MySQL server")):
        response = APIClient().get("/api/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert response.json()["checks"]["database"] == {"ok": False, "error": "OperationalError: (2003) Can't connect to MySQL server"}
    assert response.json()["checks"]["cache"]["ok"] is True


def test_the_openapi_schema_describes_every_endpoint(admin_client):
    response = APIClient().get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("/api/chat", "/api/runs/{run_id}", "/api/runs/{run_id}/events", "/api/diagnosis/{session_id}/trace",
                 "/api/diagnosis/{session_id}/runs", "/api/feedback", "/api/health"):
        assert path in paths, path
    assert "200" in paths["/api/chat"]["post"]["responses"] and "202" in paths["/api/chat"]["post"]["responses"]


def test_the_schema_validates_without_warnings(tmp_path):
    import yaml
    from django.core.management import call_command

    # --fail-on-warn turns any warning of the schema generator into an error of the command.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    schema = yaml.safe_load((tmp_path / "schema.yaml").read_text())
    assert schema["openapi"].startswith("3.") and "/api/chat" in schema["paths"]


def test_the_docs_page_needs_no_cdn():
    response = APIClient().get("/api/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html
