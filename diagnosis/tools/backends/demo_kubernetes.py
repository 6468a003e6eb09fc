"""``query_kubernetes`` for the demo world: the scenarios' ``kubernetes.json`` pods, Services and events,
served as the kubernetes backend normalises them, their times shifted to "now"."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Iterable

from diagnosis.tools.backends.base import BackendError, format_timestamp

__all__ = ["DemoKubernetes", "shift_offsets"]

BACKEND_NAME = "demo"

_POD_KEYS = ("name", "namespace", "phase", "node", "podIP", "hostIP", "reason", "message", "labels", "containers",
             "conditions")


def _label_selector(selector: str | None) -> dict[str, str]:
    """``app=x,tier=db`` (also ``==``) -> ``{"app": "x", "tier": "db"}``."""
    pairs = [part.replace("==", "=").split("=", 1) for part in (selector or "").split(",") if "=" in part]
    return {k.strip(): v.strip() for k, v in pairs}


def _labels_match(labels: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())


def _served_pod(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Every key the kubernetes backend returns (absent ones null), then any further key of the file."""
    defaults = {"namespace": namespace, "labels": {}, "containers": [], "conditions": []}
    out = {key: pod.get(key, defaults.get(key)) for key in _POD_KEYS}
    return {**out, **{k: v for k, v in pod.items() if k not in out}}


def _pod_ready(pod: dict[str, Any]) -> bool:
    containers = pod.get("containers") or []
    return pod.get("phase", "Running") == "Running" and all(c.get("ready", True) for c in containers)


def _served_service(svc: dict[str, Any], world: dict[str, Any]) -> dict[str, Any]:
    """A Service with its endpoints: the file's, else the pods its selector picks that have a pod IP."""
    selector = dict(svc.get("selector") or {})
    if svc.get("endpoints") is not None:
        endpoints = [{"ip": e["ip"], "pod": e.get("pod"), "node": e.get("node"), "ready": e.get("ready", True)}
                     for e in svc["endpoints"]]
    elif selector:
        endpoints = [{"ip": p["podIP"], "pod": p["name"], "node": p.get("node"), "ready": _pod_ready(p)}
                     for p in world["pods"] if p.get("podIP") and _labels_match(p.get("labels") or {}, selector)]
    else:
        endpoints = []
    out = {
        "name": svc["name"], "namespace": world["namespace"], "type": svc.get("type", "ClusterIP"),
        "clusterIP": svc.get("clusterIP"),
        "ports": [{"name": p.get("name"), "port": p["port"], "targetPort": p.get("targetPort", p["port"]),
                   "protocol": p.get("protocol", "TCP")} for p in svc.get("ports", [])],
        "selector": selector, "endpoints": endpoints,
    }
    if svc.get("externalName"):
        out["externalName"] = svc["externalName"]
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def shift_offsets(value: Any, now: datetime) -> Any:
    """``x_offset_seconds`` keys become ``x`` timestamps (``last_offset_seconds`` -> ``lastTimestamp``)."""
    if isinstance(value, list):
        return [shift_offsets(v, now) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key.endswith("_offset_seconds") and _finite(item):
            stem = key[: -len("_offset_seconds")]
            target = {"first": "firstTimestamp", "last": "lastTimestamp", "started": "startedAt",
                      "finished": "finishedAt"}.get(stem, stem)
            out[target] = format_timestamp(now + timedelta(seconds=item))
        else:
            out[key] = shift_offsets(item, now)
    return out


class DemoKubernetes:
    """Every ``kubernetes.json`` world of the given scenarios."""

    def __init__(self, worlds: Iterable[dict[str, Any]]) -> None:
        self._kubernetes = list(worlds)

    def namespaces(self) -> str:
        return ",".join(sorted({w["namespace"] for w in self._kubernetes}))

    def query_kubernetes(self, *, now: datetime, namespace: str | None = None, kind: str | None = None,
                         name: str | None = None, selector: str | None = None) -> dict[str, Any]:
        """Pods, Services and events of ``kubernetes.json``, in the shape the ``kubernetes`` backend returns."""
        from diagnosis.tools.backends.kubernetes import check_arguments

        kind = check_arguments(namespace=namespace, kind=kind, name=name, selector=selector)
        wanted_labels = _label_selector(selector)
        pods, events, namespaces, services = [], [], set(), []
        for world in self._kubernetes:
            if namespace and world["namespace"] != namespace:
                continue
            namespaces.add(world["namespace"])
            chosen: list[dict[str, Any]] = []
            if kind == "service":
                for svc in world["services"]:
                    if (name and svc["name"] != name) or not _labels_match(svc.get("labels") or {}, wanted_labels):
                        continue
                    services.append(_served_service(svc, world))
                    if name and svc.get("selector"):
                        chosen += [p for p in world["pods"] if _labels_match(p.get("labels") or {}, svc["selector"])]
            else:
                for pod in world["pods"]:
                    if name and not (pod["name"] == name or (kind != "pod" and pod["name"].startswith(f"{name}-"))):
                        continue
                    if _labels_match(pod.get("labels") or {}, wanted_labels):
                        chosen.append(pod)
            pods += [shift_offsets(_served_pod(pod, world["namespace"]), now) for pod in chosen]
            names = {p["name"] for p in chosen}
            prefix = f"{name}-" if name and kind != "service" else None
            for event in world["events"]:
                target = event["object"].split("/", 1)[-1]
                if target in names or (name and target == name) or (prefix and target.startswith(prefix)):
                    events.append(shift_offsets(event, now))
        if kind == "service" and name and not services:
            raise BackendError(f"service {name!r} not found in namespace {namespace or self.namespaces()!r}",
                               argument="name", backend=BACKEND_NAME)
        events.sort(key=lambda e: e.get("lastTimestamp") or "")
        result = {"backend": BACKEND_NAME, "namespace": namespace or ",".join(sorted(namespaces)), "kind": kind,
                  "name": name, "selector": selector, "pods": pods, "events": events}
        if kind == "service":
            result["services"] = services
        return result
