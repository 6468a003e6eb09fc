"""query_changes against recorded Kubernetes API responses: rollouts, ConfigMap/Secret metadata, Helm history.

A local HTTP server plays the API server for the official client; it filters lists by equality label
selectors as the API server does and records each request's Accept header. The Secret list it serves
ignores the metadata-only Accept header (as a proxy or an old aggregated API may): values are planted in
``data``, in ``kubectl.kubernetes.io/last-applied-configuration`` and in Helm's release payloads, and
none of them may reach the stored tool result.
"""

from __future__ import annotations

import base64
import json
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.changes import ChangesBackend
from diagnosis.tools.backends.helm import HelmHistorySource, decode_release
from diagnosis.tools.backends.kubernetes_api import METADATA_ONLY, KubernetesReader
from diagnosis.tools.backends.kubernetes_changes import KubernetesChangeSource, template_difference
from diagnosis.tools.registry import ERROR, SUCCESS, Backends, ToolBox

RECORDED = Path(__file__).parent / "recorded_changes"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
WINDOW = {"start": "2026-11-29T00:00:00Z", "end": "2026-11-30T12:00:00Z"}
APPS = "/apis/apps/v1/namespaces/shop"
ROUTES = {
    f"{APPS}/deployments/checkout": "deployment_checkout.json",
    f"{APPS}/deployments": "deployments.json",
    f"{APPS}/statefulsets": "statefulsets.json",
    f"{APPS}/daemonsets": "daemonsets.json",
    f"{APPS}/replicasets": "replicasets.json",
    f"{APPS}/controllerrevisions": "controllerrevisions.json",
    "/api/v1/namespaces/shop/configmaps": "configmaps_metadata.json",
    "/api/v1/namespaces/shop/secrets": "secrets_full.json",
    **{f"/api/v1/namespaces/shop/secrets/sh.helm.release.v1.web.v{n}": f"sh.helm.release.v1.web.v{n}.json"
       for n in (1, 2, 3)},
}
PLANTED = ["planted-secret-value-7781", base64.b64encode(b"planted-secret-value-7781").decode(),
           "env-value-must-not-leak-4471", "helm-user-values-secret-5521", "helm-chart-default-secret-9902",
           "helm-manifest-secret-6610", "helm-notes-secret-3301"]


def _selected(items, selector):
    wanted = dict(part.split("=", 1) for part in (selector or "").split(",") if "=" in part)
    return [i for i in items if all((i["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]


@pytest.fixture
def api_server():
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            seen.append({"method": self.command, "path": url.path, "query": query, "accept": self.headers.get("Accept")})
            name = ROUTES.get(url.path) if self.command == "GET" else None
            if name is None:
                status = 404 if self.command == "GET" else 405
                body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": f"{url.path} not found", "reason": "NotFound", "code": status}).encode()
            else:
                status, document = 200, json.loads((RECORDED / name).read_text())
                if "items" in document:
                    document["items"] = _selected(document["items"], query.get("labelSelector"))
                body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}"))
    yield KubernetesReader(api, timeout=5), seen
    server.shutdown()
    server.server_close()


def backend(reader, **kwargs):
    return ChangesBackend([KubernetesChangeSource(reader), HelmHistorySource(reader)], default_namespace="shop",
                          clock=lambda: NOW, **kwargs)


def test_rollouts_come_from_owned_replicasets_with_image_and_spec_differences(api_server):
    reader, seen = api_server
    result = backend(reader).query_changes(service="checkout", kind="rollout", **WINDOW)
    assert [(c["revision"], c["at"], c["status"]) for c in result["changes"]] == [
        ("3", "2026-11-30T10:05:12Z", "superseded"), ("4", "2026-11-30T10:21:40Z", "complete")]
    broken, rollback = result["changes"]
    assert broken == {
        "kind": "rollout", "service": "checkout", "at": "2026-11-30T10:05:12Z",
        "what": "revision 3: checkout image registry.example.com/shop/checkout:2.13.0 -> "
                "registry.example.com/shop/checkout:2.15.0; spec changed: containers[checkout].env, "
                "containers[checkout].resources (change-cause: kubectl apply --filename=checkout.yaml)",
        "object": "deployment/checkout", "namespace": "shop", "revision": "3", "status": "superseded", "by": None,
        "description": "2026-11-30T10:05:12Z rollout checkout: revision 3: checkout image "
                       "registry.example.com/shop/checkout:2.13.0 -> registry.example.com/shop/checkout:2.15.0; spec "
                       "changed: containers[checkout].env, containers[checkout].resources (change-cause: kubectl apply "
                       "--filename=checkout.yaml)",
    }
    # A rollback reuses the old ReplicaSet: dated by the controller's rewrite, not its first creation.
    assert rollback["what"].startswith("revision 4: rollback to the template of revision(s) 2: checkout image "
                                       "registry.example.com/shop/checkout:2.15.0 -> registry.example.com/shop/checkout:2.14.0")
    replicasets = next(r for r in seen if r["path"].endswith("/replicasets"))
    assert replicasets["query"]["labelSelector"] == "app=checkout"
    assert {r["method"] for r in seen} == {"GET"}


def test_statefulset_revisions_come_from_controller_revisions(api_server):
    reader, _ = api_server
    result = backend(reader).query_changes(kind="rollout", **WINDOW)
    orders = [c for c in result["changes"] if c["service"] == "orders-db"]
    assert orders == [{
        "kind": "rollout", "service": "orders-db", "at": "2026-11-30T09:50:00Z",
        "what": "revision 2: postgres image postgres:16.3 -> postgres:16.4", "object": "statefulset/orders-db",
        "namespace": "shop", "revision": "2", "status": "complete", "by": None,
        "description": "2026-11-30T09:50:00Z rollout orders-db: revision 2: postgres image postgres:16.3 -> postgres:16.4",
    }]
    assert {c["service"] for c in result["changes"]} == {"checkout", "orders-db"}  # payments' and the canary's are not owned


def test_configmap_and_secret_updates_are_names_times_and_the_workloads_that_use_them(api_server):
    reader, seen = api_server
    result = backend(reader).query_changes(service="checkout", **WINDOW)
    updates = [(c["kind"], c["object"], c["at"], c["what"], c["revision"]) for c in result["changes"]
               if c["kind"] in ("config", "secret")]
    assert updates == [
        ("config", "configmap/checkout-flags", "2026-11-30T09:00:00Z", "ConfigMap checkout-flags created by flagger",
         "884001"),
        ("config", "configmap/checkout-config", "2026-11-30T10:02:31Z", "ConfigMap checkout-config updated by kubectl-edit",
         "884190"),
        ("secret", "secret/checkout-db", "2026-11-30T10:03:05Z",
         "Secret checkout-db updated by kubectl-client-side-apply", "884201"),
    ]
    lists = [r for r in seen if r["path"].endswith(("/configmaps", "/secrets"))]
    assert lists and all(r["accept"] == METADATA_ONLY for r in lists)


def test_helm_history_is_read_from_release_secrets_keeping_only_chart_status_and_times(api_server):
    reader, seen = api_server
    result = backend(reader).query_changes(kind="helm", **WINDOW)
    assert [(c["revision"], c["at"], c["status"], c["what"]) for c in result["changes"]] == [
        ("2", "2026-11-29T16:00:05.500Z", "superseded",
         "release web revision 2 superseded: chart web-1.3.0 (app 2.2.0) -> web-1.4.0 (app 2.3.1); Upgrade complete"),
        ("3", "2026-11-30T10:10:01Z", "failed",
         'release web revision 3 failed: chart web-1.4.0 (app 2.3.1) -> web-1.5.0 (app 2.4.0); Upgrade "web" failed: '
         "context deadline exceeded"),
    ]
    listing = next(r for r in seen if r["path"].endswith("/secrets"))
    assert listing["query"]["labelSelector"] == "owner=helm" and listing["accept"] == METADATA_ONLY
    # Only the revisions in the window and the one before each are read whole; revision 1 only as the base of 2.
    reads = sorted({r["path"].rsplit("/", 1)[1] for r in seen if "/secrets/" in r["path"]})
    assert reads == ["sh.helm.release.v1.web.v1", "sh.helm.release.v1.web.v2", "sh.helm.release.v1.web.v3"]


def test_a_decoded_release_keeps_nothing_but_the_listed_fields():
    stored = json.loads((RECORDED / "sh.helm.release.v1.web.v3.json").read_text())
    release = decode_release(stored["data"]["release"], driver="secret")
    assert release == {"name": "web", "namespace": "shop", "version": 3,
                       "info": {"status": "failed", "description": 'Upgrade "web" failed: context deadline exceeded',
                                "first_deployed": "2026-11-20T09:00:00.123456789Z", "last_deployed": "2026-11-30T10:10:01Z"},
                       "chart": {"metadata": {"name": "web", "version": "1.5.0", "appVersion": "2.4.0"}}}
    # The configmap driver stores one base64 layer less.
    assert decode_release(base64.b64decode(stored["data"]["release"]).decode(), driver="configmap") == release


def _recorder():
    rows = []

    class Recorder:
        def record(self, **row):
            rows.append(row)
            return f"inv-{len(rows):08x}"

    return Recorder(), rows


def test_no_secret_value_reaches_the_stored_tool_result(api_server):
    reader, _ = api_server
    recorder, rows = _recorder()
    box = ToolBox(backends=Backends(logs=None, metrics=None, alerts=None, knowledge=None, changes=backend(reader)),
                  recorder=recorder, max_calls=5)
    outcome = box.call("query_changes", {"namespace": "shop", **WINDOW})
    assert outcome.status == SUCCESS, outcome.error
    stored = json.dumps(rows[0]["result"])
    assert {c["kind"] for c in outcome.result["changes"]} == {"rollout", "config", "secret", "helm"}
    for value in PLANTED:
        assert value not in stored, value
    assert "last-applied-configuration" not in stored and "dockerconfigjson" not in stored
    assert rows[0]["result"]["request"]["namespace"] == "shop" and "namespace" not in rows[0]["result"]


def test_the_tool_is_bounded_and_a_failed_source_does_not_hide_the_others(api_server):
    reader, _ = api_server
    capped = ToolBox(backends=Backends(logs=None, metrics=None, alerts=None, knowledge=None, changes=backend(reader)),
                     recorder=_recorder()[0], max_calls=5, max_result_bytes=2500)
    small = capped.call("query_changes", {"namespace": "shop", **WINDOW})
    assert small.truncated and len(json.dumps(small.result)) <= 2500
    assert small.result["changes"][-1]["at"] == "2026-11-30T10:21:40Z"  # the newest are kept (the rollback)

    class Down:
        name, kinds = "argocd", ("argocd",)

        def changes(self, query):
            raise BackendError("argocd unreachable at http://argocd:443: connection refused", backend="argocd")

    result = ChangesBackend([KubernetesChangeSource(reader), Down()], default_namespace="shop",
                            clock=lambda: NOW).query_changes(**WINDOW)
    assert result["sources"] == [{"source": "kubernetes", "status": "ok"},
                                 {"source": "argocd", "status": "error",
                                  "message": "argocd unreachable at http://argocd:443: connection refused"}]
    with pytest.raises(BackendError, match="every change source failed"):
        ChangesBackend([Down()], clock=lambda: NOW).query_changes()
    box = ToolBox(backends=Backends(logs=None, metrics=None, alerts=None, knowledge=None), recorder=_recorder()[0],
                  max_calls=3)
    assert "no changes backend is configured" in box.call("query_changes", {}).error
    assert box.call("query_changes", {"kind": "deploy"}).status == ERROR


def test_an_unreachable_api_server_is_a_backend_error():
    reader = KubernetesReader(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")), timeout=1)
    with pytest.raises(BackendError, match="every change source failed: kubernetes: Kubernetes API unreachable"):
        ChangesBackend([KubernetesChangeSource(reader)], clock=lambda: NOW).query_changes(namespace="shop")


def test_a_template_difference_names_fields_but_never_their_values():
    old = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [
        {"name": "a", "image": "r/a:1", "env": [{"name": "TOKEN", "value": "old-value-123"}]}]}}
    new = {"metadata": {"labels": {"app": "a"}, "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z"}},
           "spec": {"containers": [{"name": "a", "image": "r/a:1", "env": [{"name": "TOKEN", "value": "new-value-456"}]},
                                   {"name": "sidecar", "image": "r/proxy:2"}]}}
    text = template_difference(old, new)
    assert text == ("container sidecar added (r/proxy:2); restarted (kubectl rollout restart); "
                    "spec changed: containers[a].env, containers[sidecar]")
    assert template_difference(new, new) == "pod template unchanged"
