"""Kubernetes evidence through the official ``kubernetes`` client: events, pod and container status,
and Services with the pod IPs behind them.

Read-only: the backend only lists and reads pods, events, services, endpointslices (or, where the
discovery API is refused, endpoints); RBAC: get/list/watch on those, see the README. Configured by
``KUBECONFIG`` or, inside a cluster, the service account. ``normalise_pods``/``normalise_events``/
``normalise_services``/``endpoints_from_slices``/``endpoints_from_endpoints`` turn the client's models
into the tool's result shape; the demo backend serves the same shape from ``kubernetes.json``.

``kind: service`` answers with ``services``: each Service's name, type, clusterIP, ports, selector and
``endpoints`` (``{ip, pod, node, ready}``, from its EndpointSlices): what resolves an address or a
``<svc>.<ns>.svc.cluster.local`` name in a log line to a service. Without a name or selector it lists
every Service of the namespace (at most ``MAX_SERVICES``); with a name it adds the pods the Service
selects and the events of the Service and those pods.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from diagnosis.tools.backends.base import BackendError, format_timestamp
from diagnosis.tools.backends.kubernetes_api import connect

BACKEND_NAME = "kubernetes"
KINDS = ("pod", "deployment", "statefulset", "daemonset", "job", "cronjob", "replicaset", "node", "service")
MAX_PODS = 50
MAX_EVENTS = 100
MAX_SERVICES = 100
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # on every EndpointSlice, naming its Service


def check_arguments(*, namespace: str | None, kind: str | None, name: str | None, selector: str | None) -> str:
    """The lower-cased kind; a name or a selector is required, except for services (then: all of them)."""
    kind = (kind or "pod").lower()
    if kind not in KINDS:
        raise BackendError(f"must be one of {', '.join(KINDS)}, got {kind!r}", argument="kind")
    if not (name or selector) and kind != "service":
        raise BackendError("give a name or a label selector (e.g. app=checkout)", argument="name")
    if namespace is not None and not namespace.strip():
        raise BackendError("must not be blank", argument="namespace")
    return kind


def _ts(value: Any) -> str | None:
    if isinstance(value, datetime):
        return format_timestamp(value)
    return str(value) if value else None


def _state(state: Any) -> dict[str, Any] | None:
    """``{"state": waiting|running|terminated, "reason", "message", "exitCode", "startedAt", "finishedAt"}``."""
    if state is None:
        return None
    for phase in ("terminated", "waiting", "running"):
        detail = getattr(state, phase, None)
        if detail is not None:
            out = {"state": phase, "reason": getattr(detail, "reason", None), "message": getattr(detail, "message", None),
                   "exitCode": getattr(detail, "exit_code", None), "startedAt": _ts(getattr(detail, "started_at", None)),
                   "finishedAt": _ts(getattr(detail, "finished_at", None))}
            return {k: v for k, v in out.items() if v is not None}
    return None


def normalise_pods(pods: Iterable[Any]) -> list[dict[str, Any]]:
    out = []
    for pod in list(pods)[:MAX_PODS]:
        status = pod.status
        containers = []
        for c in (status.container_statuses or []) + (getattr(status, "init_container_statuses", None) or []):
            containers.append({
                "name": c.name, "image": c.image, "ready": bool(c.ready), "restartCount": int(c.restart_count or 0),
                "state": _state(c.state), "lastState": _state(c.last_state),
            })
        conditions = [{"type": cond.type, "status": cond.status, "reason": cond.reason, "message": cond.message}
                      for cond in (status.conditions or []) if cond.status != "True"]
        out.append({
            "name": pod.metadata.name, "namespace": pod.metadata.namespace, "phase": status.phase,
            "node": getattr(pod.spec, "node_name", None), "podIP": getattr(status, "pod_ip", None),
            "hostIP": getattr(status, "host_ip", None), "reason": status.reason, "message": status.message,
            "labels": dict(pod.metadata.labels or {}), "containers": containers,
            "conditions": [{k: v for k, v in c.items() if v is not None} for c in conditions],
        })
    return out


def normalise_services(services: Iterable[Any], endpoints: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """``{name, namespace, type, clusterIP, ports: [{name, port, targetPort, protocol}], selector, endpoints}``
    (plus ``externalName`` for an ExternalName Service); ``clusterIP`` is ``"None"`` for a headless one."""
    out = []
    for svc in list(services)[:MAX_SERVICES]:
        spec = svc.spec
        item = {
            "name": svc.metadata.name, "namespace": svc.metadata.namespace, "type": spec.type or "ClusterIP",
            "clusterIP": spec.cluster_ip,
            "ports": [{"name": p.name, "port": p.port, "targetPort": p.target_port, "protocol": p.protocol or "TCP"}
                      for p in spec.ports or []],
            "selector": dict(spec.selector or {}),
            "endpoints": endpoints.get(svc.metadata.name, []),
        }
        if spec.external_name:
            item["externalName"] = spec.external_name
        out.append(item)
    return out


def endpoints_from_slices(slices: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """Service name -> ``[{ip, pod, node, ready}]`` from discovery.k8s.io/v1 EndpointSlices (an unknown
    ``ready`` condition counts as ready, as the API documents)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for endpoint_slice in slices:
        service = (endpoint_slice.metadata.labels or {}).get(SERVICE_NAME_LABEL)
        if not service:
            continue
        for endpoint in endpoint_slice.endpoints or []:
            ref = endpoint.target_ref
            ready = getattr(endpoint.conditions, "ready", None)
            for ip in endpoint.addresses or []:
                out.setdefault(service, []).append({
                    "ip": ip, "pod": ref.name if ref is not None and ref.kind == "Pod" else None,
                    "node": endpoint.node_name, "ready": ready is not False})
    return out


def endpoints_from_endpoints(items: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """The same from core/v1 Endpoints (``addresses`` are ready, ``notReadyAddresses`` are not)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        for subset in item.subsets or []:
            for addresses, ready in ((subset.addresses, True), (subset.not_ready_addresses, False)):
                for address in addresses or []:
                    ref = address.target_ref
                    out.setdefault(item.metadata.name, []).append({
                        "ip": address.ip, "pod": ref.name if ref is not None and ref.kind == "Pod" else None,
                        "node": address.node_name, "ready": ready})
    return out


def normalise_events(events: Iterable[Any]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        involved = e.involved_object
        last = e.last_timestamp or getattr(e, "event_time", None) or e.first_timestamp
        out.append({
            "type": e.type, "reason": e.reason, "message": e.message, "count": int(e.count or 1),
            "object": f"{(involved.kind or '').lower()}/{involved.name}", "firstTimestamp": _ts(e.first_timestamp),
            "lastTimestamp": _ts(last),
        })
    out.sort(key=lambda e: e["lastTimestamp"] or "")
    return out[-MAX_EVENTS:]


def _matches(event_object: str, names: set[str], prefix: str | None) -> bool:
    name = event_object.split("/", 1)[-1]
    return name in names or bool(prefix and name.startswith(prefix))


class KubernetesBackend:
    """``query_kubernetes`` against a cluster, with read-only verbs of the official client."""

    name = BACKEND_NAME

    def __init__(self, core_api: Any = None, *, discovery_api: Any = None, default_namespace: str = "default",
                 timeout: float = 5.0) -> None:
        self._api = core_api
        self._discovery = discovery_api
        self.default_namespace = default_namespace
        self.timeout = timeout

    @classmethod
    def from_environment(cls, *, default_namespace: str = "default", timeout: float = 5.0) -> KubernetesBackend:
        """Configured at the first call (a missing cluster is then a failed tool call, never a failed run)."""
        return cls(None, default_namespace=default_namespace, timeout=timeout)

    @staticmethod
    def _connect() -> tuple[Any, Any]:
        """KUBECONFIG (or ~/.kube/config) first, then the in-cluster service account."""
        from kubernetes import client

        api_client = connect()
        return client.CoreV1Api(api_client), client.DiscoveryV1Api(api_client)

    def query_kubernetes(self, *, namespace: str | None = None, kind: str | None = None, name: str | None = None,
                         selector: str | None = None) -> dict[str, Any]:
        kind = check_arguments(namespace=namespace, kind=kind, name=name, selector=selector)
        namespace = namespace or self.default_namespace
        from kubernetes.client.exceptions import ApiException

        if self._api is None:
            self._api, self._discovery = self._connect()

        services: list[dict[str, Any]] | None = None
        try:
            if kind == "service":
                services, pods = self._services(namespace, name, selector)
            elif kind == "pod" and name:
                pods = [self._api.read_namespaced_pod(name, namespace, _request_timeout=self.timeout)]
            elif selector:
                pods = self._api.list_namespaced_pod(namespace, label_selector=selector, limit=MAX_PODS,
                                                     _request_timeout=self.timeout).items
            else:  # a workload by name: its pods carry the name as prefix
                pods = [p for p in self._api.list_namespaced_pod(namespace, limit=500, _request_timeout=self.timeout).items
                        if p.metadata.name.startswith(f"{name}-")]
            wants_events = kind != "service" or bool(name)
            events = (self._api.list_namespaced_event(namespace, limit=500, _request_timeout=self.timeout).items
                      if wants_events else [])
        except ApiException as exc:
            if exc.status == 404:
                raise BackendError(f"{kind} {name!r} not found in namespace {namespace!r}", argument="name",
                                   backend=BACKEND_NAME) from None
            raise BackendError(f"Kubernetes API answered {exc.status} {exc.reason}", backend=BACKEND_NAME) from None
        except BackendError:
            raise
        except Exception as exc:  # connection refused, timeouts, TLS
            raise BackendError(f"Kubernetes API unreachable: {type(exc).__name__}: {exc}", backend=BACKEND_NAME) from None
        normal_pods = normalise_pods(pods)
        names = {p["name"] for p in normal_pods} | ({name} if name else set())
        prefix = f"{name}-" if name and kind not in ("pod", "service") else None
        wanted = [e for e in normalise_events(events) if _matches(e["object"], names, prefix)]
        result = {"backend": BACKEND_NAME, "namespace": namespace, "kind": kind, "name": name, "selector": selector,
                  "pods": normal_pods, "events": wanted}
        if services is not None:
            result["services"] = services
        return result

    def _services(self, namespace: str, name: str | None, selector: str | None) -> tuple[list[dict[str, Any]], list[Any]]:
        """The Services (one by name, by label selector, or all) with their endpoints, and for a named
        Service the pods its selector picks."""
        if name:
            items = [self._api.read_namespaced_service(name, namespace, _request_timeout=self.timeout)]
        else:
            items = self._api.list_namespaced_service(namespace, label_selector=selector or None, limit=MAX_SERVICES,
                                                      _request_timeout=self.timeout).items
        services = normalise_services(items, self._endpoints(namespace, name))
        pods: list[Any] = []
        if name and services[0]["selector"]:
            label_selector = ",".join(f"{k}={v}" for k, v in sorted(services[0]["selector"].items()))
            pods = self._api.list_namespaced_pod(namespace, label_selector=label_selector, limit=MAX_PODS,
                                                 _request_timeout=self.timeout).items
        return services, pods

    def _endpoints(self, namespace: str, service: str | None) -> dict[str, list[dict[str, Any]]]:
        """EndpointSlices of one Service (or all); core/v1 Endpoints where the discovery API is refused."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        if self._discovery is None:
            self._discovery = client.DiscoveryV1Api(self._api.api_client)
        try:
            slices = self._discovery.list_namespaced_endpoint_slice(
                namespace, label_selector=f"{SERVICE_NAME_LABEL}={service}" if service else None,
                _request_timeout=self.timeout).items
            return endpoints_from_slices(slices)
        except ApiException as exc:
            if exc.status not in (403, 404):
                raise
        items = self._api.list_namespaced_endpoints(
            namespace, field_selector=f"metadata.name={service}" if service else None,
            _request_timeout=self.timeout).items
        return endpoints_from_endpoints(items)
