"""Capacity and scheduling faults: rate limits and quotas; pods that cannot be scheduled, evicted pods,
and a node under resource pressure."""

from __future__ import annotations

from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.names import pod_suffix
from diagnosis.evaluation.generator.series import counter, gauge
from diagnosis.evaluation.generator.story import Story, degrade, spread
from diagnosis.evaluation.generator.world import SAMPLES, World, first_sample_at


def rate_limit(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    limit = rng.choice((50, 100, 200, 600))
    direct = {}
    for caller in world.graph.callers(root.name):
        c_onset = onset + rng.randint(5, 60)
        url = world.url(root, "/")
        text = rng.choice((f"{url} answered 429 Too Many Requests (Retry-After: {rng.randint(1, 60)})",
                           f"ThrottlingException: Rate exceeded calling {url}",
                           f"rate limit exceeded on {url}: {limit} requests per second, backing off",
                           f"RESOURCE_EXHAUSTED: rate limit of {limit}/s reached for {url}"))
        for at in spread(world, c_onset, 0, rng.randint(2, 3)):
            world.log(caller, at, "WARN" if "backing off" in text else "ERROR", text)
        degrade(world, caller, c_onset, "errors")
        direct[caller.name] = (c_onset, "errors")
    i0 = first_sample_at(onset)
    if root.in_cluster:
        world.series.append(counter("envoy_http_local_rate_limiter_http_local_rate_limit_rate_limited",
                                    {"service": root.name}, [0.0 if i < i0 else rng.uniform(2000, 9000) for i in range(SAMPLES)], 0))
        for at in spread(world, onset, 0, 2):
            world.log(root, at, "WARN", f"local rate limit of {limit} req/s reached, rejecting with 429")
        metric = "envoy_http_local_rate_limiter_http_local_rate_limit_rate_limited"
        anomalous = {"metric": metric, "service": root.name, "direction": "up", "query": f"rate({metric}[5m])"}
    else:
        world.timelines[root.name].err = [e if i < i0 else 1.0 for i, e in enumerate(world.timelines[root.name].err)]
        anomalous = {"metric": "probe_success", "service": root.name, "direction": "down"}
    return Story("capacity.rate_limit", root, onset, "rate_limited", ["rate limit", "429", "throttl", "too many requests"],
                 ["429" if any("429" in e.text for _, e in world.events) else "rate"], None, direct=direct,
                 anomalous=[anomalous], also_accepted=["capacity.quota"] if not root.in_cluster else [])


def quota(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    i0 = first_sample_at(onset)
    if not root.in_cluster:
        metric = rng.choice(("Requests", "Read requests", "Queries"))
        text = (f"Quota exceeded for quota metric '{metric}' and limit '{metric} per day' of service '{root.host}'"
                if rng.random() < 0.5 else f"403 Forbidden from https://{root.host}/: monthly quota exhausted")
        direct = {}
        for caller in world.graph.callers(root.name):
            c_onset = onset + rng.randint(5, 60)
            for at in spread(world, c_onset, 0, rng.randint(2, 3)):
                world.log(caller, at, "ERROR", text)
            degrade(world, caller, c_onset, "errors")
            direct[caller.name] = (c_onset, "errors")
        world.timelines[root.name].err = [e if i < i0 else 1.0 for i, e in enumerate(world.timelines[root.name].err)]
        return Story("capacity.quota", root, onset, "quota_exhausted", ["quota"], ["quota"], None, direct=direct,
                     anomalous=[{"metric": "probe_success", "service": root.name, "direction": "down"}],
                     also_accepted=["capacity.rate_limit"])
    wl = world.workloads[root.name]
    want = wl.replicas + rng.randint(2, 5)
    world.k8s_event("deployment", root.name, "SuccessfulRescale",
                    f"New size: {want}; reason: cpu resource utilization (percentage of request) above target",
                    onset - 30, onset - 30, type_="Normal")
    used = rng.choice((8, 16, 24))
    quota_name = rng.choice(("compute-resources", f"{world.namespace}-quota", "team-limits"))
    message = (f'Error creating: pods "{root.name}-{wl.template_hash}-{pod_suffix(rng)}" is forbidden: exceeded quota: '
               f"{quota_name}, requested: limits.cpu=1, used: limits.cpu={used}, limited: limits.cpu={used}")
    world.k8s_event("replicaset", f"{root.name}-{wl.template_hash}", "FailedCreate", message, onset, -rng.randint(5, 60),
                    count=rng.randint(10, 40))
    world.series.append(gauge("kube_deployment_spec_replicas", {"namespace": world.namespace, "deployment": root.name},
                              [float(wl.replicas) if i < i0 else float(want) for i in range(SAMPLES)]))
    tl = world.timelines[root.name]
    for i in range(i0, SAMPLES):
        tl.rps[i] *= 2.5
        tl.cpu[i] = tl.cpu_limit * rng.uniform(0.9, 1.0)
    degrade(world, root, onset, "slow")
    return Story("capacity.quota", root, onset, "resource_quota_exceeded", ["quota"], ["exceeded quota"], "slow",
                 anomalous=[{"signal": "latency", "service": root.name, "direction": "up"}], trace="slow")


def pending(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    wl = world.workloads[root.name]
    nodes = len(world.nodes)
    resource = rng.choice(("cpu", "memory"))
    gone = world.nodes[0][0]
    world.k8s_event("node", gone, "RemovingNode", f"Node {gone} event: Removing Node {gone} from Controller",
                    onset - 20, onset - 20, type_="Normal")
    for pod in wl.pods:
        pod.phase, pod.ready, pod.node = "Pending", False, None
        pod.replaced = (pod.name, onset)
        pod.name = f"{root.name}-{wl.template_hash}-{pod_suffix(rng)}"
        pod.state = {"state": "waiting", "reason": "ContainerCreating"}
        pod.reason = None
        message = (f"0/{nodes - 1} nodes are available: {nodes - 1} Insufficient {resource}. preemption: 0/{nodes - 1} "
                   f"nodes are available: {nodes - 1} No preemption victims found for incoming pod.")
        world.k8s_event("pod", pod.name, "FailedScheduling", message, onset, -rng.randint(5, 50), count=rng.randint(5, 30))
        world.series.append(gauge("kube_pod_status_phase", {"namespace": world.namespace, "pod": pod.name, "phase": "Pending"},
                                  [None if i < first_sample_at(onset) else 1.0 for i in range(SAMPLES)]))
    world.timelines[root.name].missing |= set(range(first_sample_at(onset), SAMPLES))
    world.series.append(gauge("kube_deployment_status_replicas_unavailable",
                              {"namespace": world.namespace, "deployment": root.name},
                              [0.0 if i < first_sample_at(onset) else float(wl.replicas) for i in range(SAMPLES)]))
    return Story("scheduling.pending", root, onset, "pods_unschedulable", ["pending", "unschedulable", "insufficient",
                                                                            "schedul"],
                 [f"Insufficient {resource}"], "refused",
                 anomalous=[{"metric": "kube_deployment_status_replicas_unavailable", "service": root.name,
                             "direction": "up", "query": f'kube_deployment_status_replicas_unavailable{{deployment="{root.name}"}}'}],
                 notes=f"{gone} was removed; the pods of {root.name} do not fit on the remaining nodes")


def eviction(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    wl = world.workloads[root.name]
    resource = rng.choice(("ephemeral-storage", "memory"))
    victim = wl.pods[0]
    evicted = victim.name
    threshold = "10Gi" if resource == "ephemeral-storage" else "100Mi"
    message = (f"The node was low on resource: {resource}. Threshold quantity: {threshold}, available: "
               f"{rng.randint(1000, 9000)}Ki. Container {root.name} was using {rng.randint(2, 9)}Gi, request is 0, "
               f"has larger consumption of {resource}.")
    world.extra_pods.append({"name": victim.name, "phase": "Failed", "node": victim.node, "reason": "Evicted",
                             "message": message, "labels": {"app": root.name},
                             "containers": [{"name": root.name, "image": wl.image, "ready": False, "restartCount": 0,
                                             "state": {"state": "terminated", "reason": "ContainerStatusUnknown",
                                                       "exitCode": 137, "finished_offset_seconds": onset},
                                             "lastState": None}]})
    world.k8s_event("pod", victim.name, "Evicted", message, onset, onset)
    pressure = "NodeHasDiskPressure" if resource == "ephemeral-storage" else "NodeHasMemoryPressure"
    world.k8s_event("node", victim.node, pressure, f"Node {victim.node} status is now: {pressure}", onset - 40, onset - 40,
                    type_="Normal")
    i0 = first_sample_at(onset)
    for pod in wl.pods:
        if rng.random() < 0.7 or pod is victim:
            pod.replaced = (pod.name, onset)
            pod.name = f"{root.name}-{wl.template_hash}-{pod_suffix(rng)}"
            pod.started = onset + rng.randint(60, 240)
            world.k8s_event("pod", pod.name, "Scheduled", f"Successfully assigned {world.namespace}/{pod.name} to "
                            f"{rng.choice(world.nodes)[0]}", onset + 5, onset + 5, type_="Normal")
    world.timelines[root.name].missing |= {i0, min(SAMPLES - 1, i0 + 1)}
    world.series.append(gauge("kube_pod_status_reason", {"namespace": world.namespace, "pod": evicted, "reason": "Evicted"},
                              [0.0 if i < i0 else 1.0 for i in range(SAMPLES)]))
    degrade(world, root, onset, "errors", rng.uniform(0.3, 0.7))
    return Story("scheduling.eviction", root, onset, "pod_evicted", ["evict"], ["The node was low on resource"],
                 "refused", also_accepted=["scheduling.node_pressure"],
                 anomalous=[{"metric": "kube_pod_status_reason", "service": root.name, "direction": "up",
                             "query": f'kube_pod_status_reason{{pod="{evicted}"}}'}])


def node_pressure(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    node_name, host_ip = rng.choice(world.nodes)
    for name, wl in world.workloads.items():  # the pressured node runs only the root's pods
        for pod in wl.pods:
            if name == root.name:
                pod.node = node_name
            elif pod.node == node_name:
                others = [n for n, _ in world.nodes if n != node_name]
                pod.node = rng.choice(others) if others else pod.node
    i0 = first_sample_at(onset)
    total = rng.choice((8, 16, 32)) * 1024 ** 3
    world.series.append(gauge("node_memory_MemAvailable_bytes", {"instance": f"{host_ip}:9100"},
                              [total * rng.uniform(0.35, 0.45) if i < i0 else total * rng.uniform(0.01, 0.03)
                               for i in range(SAMPLES)]))
    world.series.append(counter("node_pressure_memory_waiting_seconds_total", {"instance": f"{host_ip}:9100"},
                                [rng.uniform(0, 0.5) if i < i0 else rng.uniform(25, 55) for i in range(SAMPLES)],
                                rng.randint(100, 9000)))
    world.k8s_event("node", node_name, "NodeHasInsufficientMemory", f"Node {node_name} status is now: NodeHasInsufficientMemory",
                    onset, onset, type_="Normal")
    world.k8s_event("node", node_name, "EvictionThresholdMet", "Attempting to reclaim memory", onset + 10,
                    -rng.randint(5, 60), count=rng.randint(3, 20))
    degrade(world, root, onset, "slow")
    return Story("scheduling.node_pressure", root, onset, "node_memory_pressure", ["pressure", "node", "memory"],
                 ["Attempting to reclaim memory", node_name], "slow", trace="slow",
                 anomalous=[{"metric": "node_memory_MemAvailable_bytes", "service": root.name, "direction": "down",
                             "query": f'node_memory_MemAvailable_bytes{{instance="{host_ip}:9100"}}'}],
                 notes=f"node {node_name} ran out of memory; it hosts the pods of {root.name}")
