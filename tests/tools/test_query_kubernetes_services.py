"""query_kubernetes kind=service on the real backend: Services, EndpointSlices (or Endpoints) and pod IPs,
from recorded API responses played by a local HTTP server through the official client."""

from __future__ import annotations

import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.kubernetes import KubernetesBackend

RECORDED = Path(__file__).parent / "recorded_kubernetes"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices"
# (path, selector the request must carry or None) -> (status, recorded file)
ROUTES = {
    ("/api/v1/namespaces/shop/services", None): (200, "services_shop.json"),
    ("/api/v1/namespaces/shop/services/orders-mysql", None): (200, "service_orders_mysql.json"),
    ("/api/v1/namespaces/shop/services/nope", None): (404, "pod_not_found.json"),
    (SLICES, None): (200, "endpointslices_shop.json"),
    (SLICES, "kubernetes.io/service-name=orders-mysql"): (200, "endpointslices_orders_mysql.json"),
    ("/api/v1/namespaces/shop/pods", "app=orders-mysql"): (200, "pods_app_orders_mysql.json"),
    ("/api/v1/namespaces/shop/pods", "app=checkout"): (200, "pods_app_checkout.json"),
    ("/api/v1/namespaces/shop/events", None): (200, "events_shop.json"),
    ("/api/v1/namespaces/shop/endpoints", None): (200, "endpoints_shop.json"),
}


def _serve(routes):
    seen: list[tuple[str, str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            url = urlparse(self.path)
            params = parse_qs(url.query)
            seen.append((self.command, url.path, params))
            selector = (params.get("labelSelector") or [None])[0]
            status, name = routes.get((url.path, selector), (404, "pod_not_found.json"))
            body = (RECORDED / name).read_bytes()
            self.send_response(status if self.command == "GET" else 405)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    return server, client.CoreV1Api(client.ApiClient(config)), seen


@pytest.fixture
def cluster():
    server, api, seen = _serve(ROUTES)
    yield KubernetesBackend(api, default_namespace="shop"), seen
    server.shutdown()
    server.server_close()


def test_all_services_of_the_namespace_come_with_their_endpoint_ips_and_pods(cluster):
    backend, seen = cluster
    result = backend.query_kubernetes(kind="service")
    by_name = {s["name"]: s for s in result["services"]}
    assert set(by_name) == {"checkout", "orders-mysql", "orders-mysql-headless", "payments-psp"}
    mysql = by_name["orders-mysql"]
    assert mysql == {
        "name": "orders-mysql", "namespace": "shop", "type": "ClusterIP", "clusterIP": "10.96.112.40",
        "ports": [{"name": "mysql", "port": 3306, "targetPort": 3306, "protocol": "TCP"}],
        "selector": {"app": "orders-mysql"},
        "endpoints": [{"ip": "10.244.2.31", "pod": "orders-mysql-0", "node": "worker-node-2", "ready": True}],
    }
    assert by_name["orders-mysql-headless"]["clusterIP"] == "None"
    assert by_name["checkout"]["ports"][0]["targetPort"] == "http"
    assert by_name["checkout"]["endpoints"] == [
        {"ip": "10.244.3.58", "pod": "checkout-7d9c6b5f8-x2kqz", "node": "worker-node-3", "ready": False},
        {"ip": "10.244.1.12", "pod": "checkout-7d9c6b5f8-m5n8b", "node": "worker-node-1", "ready": True},
    ]
    assert by_name["payments-psp"]["externalName"] == "api.psp.example.net"
    assert result["pods"] == [] and result["events"] == []  # a listing reads no pods or events
    assert {m for m, _, _ in seen} == {"GET"}


def test_an_address_in_a_log_line_resolves_to_its_service(cluster):
    backend, _ = cluster
    services = backend.query_kubernetes(kind="service")["services"]

    def owner(address: str) -> set[str]:
        ip = ipaddress.ip_address(address)
        return {s["name"] for s in services
                if s["clusterIP"] not in (None, "None") and ipaddress.ip_address(s["clusterIP"]) == ip
                or any(ipaddress.ip_address(e["ip"]) == ip for e in s["endpoints"])}

    assert owner("10.96.112.40") == {"orders-mysql"}  # the ClusterIP in a JDBC URL
    assert owner("10.244.2.31") == {"orders-mysql", "orders-mysql-headless"}  # the pod IP in a MySQL log line
    assert owner("10.244.3.58") == {"checkout"}


def test_a_named_service_adds_its_selected_pods_with_pod_ips_and_their_events(cluster):
    backend, seen = cluster
    result = backend.query_kubernetes(kind="service", name="orders-mysql")
    (service,) = result["services"]
    assert service["endpoints"][0]["pod"] == "orders-mysql-0"
    (pod,) = result["pods"]
    assert pod["name"] == "orders-mysql-0" and pod["podIP"] == "10.244.2.31" and pod["hostIP"] == "10.0.3.12"
    assert pod["containers"][0]["state"]["state"] == "running"
    slices = [params for _, path, params in seen if path == SLICES]
    assert slices == [{"labelSelector": ["kubernetes.io/service-name=orders-mysql"]}]
    assert result["events"] == []  # the recorded events are about the checkout pods


def test_pods_carry_their_pod_ip_and_host_ip(cluster):
    backend, _ = cluster
    (pod,) = backend.query_kubernetes(kind="deployment", selector="app=checkout")["pods"]
    assert pod["podIP"] == "10.244.3.58" and pod["hostIP"] == "10.0.3.17"


def test_without_endpointslice_access_the_endpoints_api_is_read_instead():
    routes = dict(ROUTES)
    routes[(SLICES, None)] = (403, "endpointslices_forbidden.json")
    server, api, seen = _serve(routes)
    try:
        services = KubernetesBackend(api, default_namespace="shop").query_kubernetes(kind="service")["services"]
    finally:
        server.shutdown()
        server.server_close()
    checkout = next(s for s in services if s["name"] == "checkout")
    assert checkout["endpoints"] == [
        {"ip": "10.244.1.12", "pod": "checkout-7d9c6b5f8-m5n8b", "node": "worker-node-1", "ready": True},
        {"ip": "10.244.3.58", "pod": "checkout-7d9c6b5f8-x2kqz", "node": "worker-node-3", "ready": False},
    ]
    assert any(path == "/api/v1/namespaces/shop/endpoints" for _, path, _ in seen)


def test_an_unknown_service_is_a_backend_error_naming_the_argument(cluster):
    backend, _ = cluster
    with pytest.raises(BackendError, match="^name: service 'nope' not found in namespace 'shop'"):
        backend.query_kubernetes(kind="service", name="nope")


def test_other_kinds_still_need_a_name_or_a_selector(cluster):
    backend, _ = cluster
    with pytest.raises(BackendError, match="^name: give a name or a label selector"):
        backend.query_kubernetes(kind="deployment")
