"""``kubernetes.json`` of a generated incident: pods with IPs and container states, Services (ClusterIP,
LoadBalancer, ExternalName for outside APIs), Deployments and ReplicaSets, and events."""

from __future__ import annotations

from typing import Any

from diagnosis.evaluation.generator.world import World

PORT_NAMES = {"nginx": "http", "envoy": "http", "java": "http", "go": "http", "python": "http", "node": "http",
              "postgres": "postgres", "mysql": "mysql", "redis": "redis", "rabbitmq": "amqp", "kafka": "kafka"}


def _pod(world: World, node_name: str, pod, wl) -> dict[str, Any]:
    state = pod.state or {"state": "running", "started_offset_seconds": int(min(0, pod.started))}
    out: dict[str, Any] = {"name": pod.name, "phase": pod.phase, "node": pod.node,
                           "labels": {"app": node_name, **({"pod-template-hash": wl.template_hash}
                                                           if wl.kind == "Deployment" else {})},
                           "containers": [{"name": node_name, "image": pod.image or wl.image, "ready": pod.ready,
                                           "restartCount": pod.restarts, "state": state, "lastState": pod.last_state}],
                           "conditions": [{"type": "Ready", "status": "True" if pod.ready else "False"}]}
    if pod.phase == "Running" and pod.node:
        out["podIP"] = pod.ip
        out["hostIP"] = dict(world.nodes).get(pod.node)
    if pod.phase == "Pending":
        out["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return out


def render_kubernetes(world: World) -> dict[str, Any]:
    pods, services, deployments, replicasets = [], [], [], list(world.old_replicasets)
    for node in world.graph.nodes:
        if not node.in_cluster:
            services.append({"name": node.name, "type": "ExternalName", "externalName": node.host,
                             "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]})
            continue
        wl = world.workloads[node.name]
        pods += [_pod(world, node.name, pod, wl) for pod in wl.pods]
        kind = "LoadBalancer" if node.role == "frontend" and world.rng.random() < 0.5 else "ClusterIP"
        services.append({"name": node.name, "type": kind, "clusterIP": wl.cluster_ip, "labels": {"app": node.name},
                         "selector": {"app": node.name},
                         "ports": [{"name": PORT_NAMES[node.tech], "port": node.port, "targetPort": node.port,
                                    "protocol": "TCP"}]})
        ready = sum(1 for p in wl.pods if p.ready)
        deployments.append({"kind": wl.kind, "name": node.name, "replicas": wl.replicas, "readyReplicas": ready,
                            "revision": wl.revision, "image": wl.image})
        if wl.kind == "Deployment":
            replicasets.append({"name": f"{node.name}-{wl.template_hash}", "deployment": node.name,
                                "revision": wl.revision, "replicas": wl.replicas, "image": wl.image,
                                "created_offset_seconds": int(min(0, wl.created))})
    pods += world.extra_pods
    events = sorted(world.k8s_events, key=lambda e: (e["last_offset_seconds"], e["object"]))
    return {"namespace": world.namespace, "pods": pods, "services": services, "events": events,
            "deployments": deployments, "replicasets": replicasets}
