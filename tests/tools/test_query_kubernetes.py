"""query_kubernetes: the official client against recorded API responses served over HTTP, and the demo backend.

The recorded bodies go through the client's own deserialisation (a local HTTP server plays the API
server); the backend only ever sends GET requests.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.demo import DemoBackend
from diagnosis.tools.backends.kubernetes import KubernetesBackend
from diagnosis.tools.registry import ERROR, SUCCESS, Backends, ToolBox

RECORDED = Path(__file__).parent / "recorded_kubernetes"
ROUTES = {
    "/api/v1/namespaces/shop/pods": (200, "pods_app_checkout.json"),
    "/api/v1/namespaces/shop/events": (200, "events_shop.json"),
    "/api/v1/namespaces/shop/pods/checkout-0": (404, "pod_not_found.json"),
}


@pytest.fixture
def api_server():
    seen: list[tuple[str, str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            url = urlparse(self.path)
            seen.append((self.command, url.path, parse_qs(url.query)))
            status, name = ROUTES.get(url.path, (404, "pod_not_found.json"))
            body = (RECORDED / name).read_bytes() if self.command == "GET" else b"{}"
            self.send_response(status if self.command == "GET" else 405)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    api = client.CoreV1Api(client.ApiClient(config))
    yield KubernetesBackend(api, default_namespace="shop"), seen
    server.shutdown()
    server.server_close()


def test_pods_and_events_come_back_with_state_last_state_exit_code_and_restarts(api_server):
    backend, seen = api_server
    result = backend.query_kubernetes(kind="deployment", selector="app=checkout")
    (pod,) = result["pods"]
    assert pod["name"] == "checkout-7d9c6b5f8-x2kqz" and pod["node"] == "worker-node-3"
    (container,) = pod["containers"]
    assert container["state"] == {"state": "waiting", "reason": "CrashLoopBackOff",
                                  "message": container["state"]["message"]}
    assert container["lastState"]["reason"] == "OOMKilled" and container["lastState"]["exitCode"] == 137
    assert container["lastState"]["finishedAt"] == "2026-11-30T10:41:16Z"
    assert container["restartCount"] == 6 and container["image"] == "registry.example.com/shop/checkout:2.14.0"
    assert {c["type"] for c in pod["conditions"]} == {"Ready", "ContainersReady"}
    # Only the events of the selected pods, oldest first; the other workload's event is left out.
    assert [e["reason"] for e in result["events"]] == ["Pulled", "BackOff"]
    assert result["events"][-1]["count"] == 23 and result["events"][-1]["object"] == "pod/checkout-7d9c6b5f8-x2kqz"
    assert {m for m, _, _ in seen} == {"GET"}
    assert seen[0][2]["labelSelector"] == ["app=checkout"]


def test_a_missing_pod_is_a_backend_error_naming_the_argument(api_server):
    backend, _ = api_server
    with pytest.raises(BackendError, match="^name: pod 'checkout-0' not found"):
        backend.query_kubernetes(kind="pod", name="checkout-0")


def test_an_unreachable_api_server_is_a_backend_error():
    api = client.CoreV1Api(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")))
    with pytest.raises(BackendError, match="unreachable"):
        KubernetesBackend(api, timeout=1).query_kubernetes(selector="app=x")


class _Recorder:
    def __init__(self):
        self.calls = []

    def record(self, **kwargs):
        self.calls.append(kwargs)
        return f"inv-{len(self.calls):08x}"


def test_the_tool_keeps_request_apart_from_observed_data_and_redacts(api_server):
    backend, _ = api_server
    box = ToolBox(backends=Backends(logs=None, metrics=None, alerts=None, knowledge=None, kubernetes=backend),
                  recorder=_Recorder(), max_calls=5)
    outcome = box.call("query_kubernetes", {"namespace": "shop", "kind": "deployment", "selector": "app=checkout"})
    assert outcome.status == SUCCESS, outcome.error
    assert outcome.result["request"]["arguments"] == {"namespace": "shop", "kind": "deployment", "selector": "app=checkout"}
    assert {"namespace", "kind", "selector", "name"} <= set(outcome.result["request"])
    assert "namespace" not in outcome.result and outcome.result["pods"] and outcome.result["events"]
    missing = box.call("query_kubernetes", {"namespace": "shop"})
    assert missing.status == ERROR and missing.error.startswith("name:")
    capped = ToolBox(backends=box.backends, recorder=_Recorder(), max_calls=5, max_result_bytes=1500)
    small = capped.call("query_kubernetes", {"kind": "deployment", "selector": "app=checkout"})
    assert small.truncated and len(json.dumps(small.result)) <= 1500


def test_without_a_backend_the_tool_fails_cleanly():
    box = ToolBox(backends=Backends(logs=None, metrics=None, alerts=None, knowledge=None), recorder=_Recorder(), max_calls=2)
    outcome = box.call("query_kubernetes", {"name": "checkout"})
    assert outcome.status == ERROR and "no Kubernetes backend" in outcome.error
