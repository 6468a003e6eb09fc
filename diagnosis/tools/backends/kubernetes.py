"""Kubernetes evidence through the official ``kubernetes`` client: events plus pod and container status.

Read-only: the backend only lists and reads pods and events (RBAC: get/list/watch on pods and
events, see the README). Configured by ``KUBECONFIG`` or, inside a cluster, the service account.
``normalise_pods``/``normalise_events`` turn the client's models into the tool's result shape; the
demo backend serves the same shape from ``kubernetes.json``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from diagnosis.tools.backends.base import BackendError, format_timestamp
from diagnosis.tools.backends.kubernetes_api import connect

BACKEND_NAME = "kubernetes"
KINDS = ("pod", "deployment", "statefulset", "daemonset", "job", "cronjob", "replicaset", "node")
MAX_PODS = 50
MAX_EVENTS = 100


def check_arguments(*, namespace: str | None, kind: str | None, name: str | None, selector: str | None) -> str:
    """The lower-cased kind; a name or a selector is required."""
    kind = (kind or "pod").lower()
    if kind not in KINDS:
        raise BackendError(f"must be one of {', '.join(KINDS)}, got {kind!r}", argument="kind")
    if not (name or selector):
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
            "node": getattr(pod.spec, "node_name", None), "reason": status.reason, "message": status.message,
            "labels": dict(pod.metadata.labels or {}), "containers": containers,
            "conditions": [{k: v for k, v in c.items() if v is not None} for c in conditions],
        })
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

    def __init__(self, core_api: Any = None, *, default_namespace: str = "default", timeout: float = 5.0) -> None:
        self._api = core_api
        self.default_namespace = default_namespace
        self.timeout = timeout

    @classmethod
    def from_environment(cls, *, default_namespace: str = "default", timeout: float = 5.0) -> KubernetesBackend:
        """Configured at the first call (a missing cluster is then a failed tool call, never a failed run)."""
        return cls(None, default_namespace=default_namespace, timeout=timeout)

    @staticmethod
    def _connect() -> Any:
        """KUBECONFIG (or ~/.kube/config) first, then the in-cluster service account."""
        from kubernetes import client

        return client.CoreV1Api(connect())

    def query_kubernetes(self, *, namespace: str | None = None, kind: str | None = None, name: str | None = None,
                         selector: str | None = None) -> dict[str, Any]:
        kind = check_arguments(namespace=namespace, kind=kind, name=name, selector=selector)
        namespace = namespace or self.default_namespace
        from kubernetes.client.exceptions import ApiException

        if self._api is None:
            self._api = self._connect()

        try:
            if kind == "pod" and name:
                pods = [self._api.read_namespaced_pod(name, namespace, _request_timeout=self.timeout)]
            elif selector:
                pods = self._api.list_namespaced_pod(namespace, label_selector=selector, limit=MAX_PODS,
                                                     _request_timeout=self.timeout).items
            else:  # a workload by name: its pods carry the name as prefix
                pods = [p for p in self._api.list_namespaced_pod(namespace, limit=500, _request_timeout=self.timeout).items
                        if p.metadata.name.startswith(f"{name}-")]
            events = self._api.list_namespaced_event(namespace, limit=500, _request_timeout=self.timeout).items
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
        wanted = [e for e in normalise_events(events) if _matches(e["object"], names, f"{name}-" if name and kind != "pod" else None)]
        return {"backend": BACKEND_NAME, "namespace": namespace, "kind": kind, "name": name, "selector": selector,
                "pods": normal_pods, "events": wanted}
