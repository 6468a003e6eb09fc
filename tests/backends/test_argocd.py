"""ArgoCDSource against recorded Argo CD Application API responses served over HTTP."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from diagnosis.tools.backends.argocd import ArgoCDSource
from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.changes import ChangesBackend

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
WINDOW = {"start": "2026-11-29T00:00:00Z", "end": "2026-11-30T12:00:00Z"}


def changes(url, **kwargs):
    source = ArgoCDSource(url, "argocd-api-token-xyz", app_namespace="argocd")
    return ChangesBackend([source], default_namespace="shop", clock=lambda: NOW).query_changes(**kwargs)


def test_history_entries_and_a_failed_last_sync_become_changes(http_server):
    http_server.respond_with_recording("/api/v1/applications/checkout", "argocd_application_checkout.json")
    result = changes(http_server.url, service="checkout", **WINDOW)
    [request] = http_server.requests
    assert request["headers"]["authorization"] == "Bearer argocd-api-token-xyz"
    assert request["params"] == {"appNamespace": "argocd"}
    assert [(c["at"], c["status"], c["by"], c["what"]) for c in result["changes"]] == [
        ("2026-11-29T14:00:02Z", "deployed", "automated",
         "application checkout synced revision 51b0e3d9c2a4 (checkout@main) by automated"),
        ("2026-11-30T10:05:14Z", "deployed", "alice",
         "application checkout synced revision 3f9c2e17a0b8 (checkout@main) by alice"),
        ("2026-11-30T10:19:31Z", "Failed", "bob",
         'application checkout sync Failed at revision 9d1e0c4b7a3f: one or more objects failed to apply, reason: '
         'admission webhook "validate.kyverno.svc" denied the request'),
    ]
    assert {(c["kind"], c["service"], c["object"], c["namespace"]) for c in result["changes"]} == {
        ("argocd", "checkout", "application/checkout", "shop")}
    assert result["changes"][1]["revision"] == "12"


def test_without_a_service_every_application_of_the_namespace_is_read(http_server):
    http_server.respond_with_recording("/api/v1/applications", "argocd_applications.json")
    result = changes(http_server.url, **WINDOW)
    assert {c["service"] for c in result["changes"]} == {"checkout"}  # billing deploys to another namespace


def test_an_unknown_application_is_no_change_and_a_server_error_is_an_error(http_server):
    http_server.respond_with_recording("/api/v1/applications/nope", "argocd_permission_denied.json", status=403)
    assert changes(http_server.url, service="nope")["changes"] == []
    http_server.respond("/api/v1/applications/checkout", "upstream connect error", status=503)
    with pytest.raises(BackendError, match=r"argocd application read failed \(HTTP 503\): upstream connect error"):
        changes(http_server.url, service="checkout")


def test_a_token_is_required():
    with pytest.raises(BackendError, match="token is required"):
        ArgoCDSource("http://argocd", "")
