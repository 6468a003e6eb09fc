"""The state of one generated incident while it is being written: the call graph, the cluster that
runs it, per-node timelines and everything the fault and the noise add (log events, series, Kubernetes
objects, changes, alerts, ground-truth evidence).

Times are offsets in seconds before "now" (<= 0). The window is ``SAMPLES`` samples ``STEP`` seconds
apart, the newest at offset 0, as the demo format stores them.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from diagnosis.evaluation.generator.formats import Event
from diagnosis.evaluation.generator.graph import Graph, Node
from diagnosis.evaluation.generator.names import NameBook, pod_suffix, template_hash, word

STEP = 60
SAMPLES = 60
WINDOW = STEP * (SAMPLES - 1)
OFFICIAL_IMAGES = {"nginx": "nginx:1.27.{}", "postgres": "postgres:16.{}", "mysql": "mysql:8.0.{}",
                   "redis": "redis:7.2.{}", "rabbitmq": "rabbitmq:3.13.{}-management", "kafka": "bitnami/kafka:3.7.{}",
                   "envoy": "envoyproxy/envoy:v1.31.{}"}


def sample_time(i: int) -> int:
    """The offset of sample ``i`` (0 = oldest)."""
    return -(SAMPLES - 1 - i) * STEP


def first_sample_at(offset: float) -> int:
    """The first sample at or after ``offset``."""
    return max(0, min(SAMPLES, math.ceil((offset + WINDOW) / STEP)))


@dataclass
class Pod:
    name: str
    ip: str
    node: str
    started: int  # offset of the container start
    restarts: int = 0
    state: dict[str, Any] | None = None  # None: running since ``started``
    last_state: dict[str, Any] | None = None
    phase: str = "Running"
    ready: bool = True
    reason: str | None = None
    message: str | None = None
    image: str = ""
    restart_samples: list[int] = field(default_factory=list)  # samples where the container restarted
    replaced: tuple[str, int] | None = None  # (the pod this one replaced, offset of the replacement)


@dataclass
class StoryTimeline:
    """Per-sample behaviour of one node; metric conventions render it (telemetry.py)."""

    rps: list[float]
    err: list[float]  # ratio of 5xx answers
    latency: list[float]  # median seconds
    cpu: list[float]  # cores
    cpu_limit: float
    memory: list[float]  # bytes
    memory_limit: float
    missing: set[int] = field(default_factory=set)  # failed scrapes / process down (every series of the node)


@dataclass
class Workload:
    """The Kubernetes objects of one in-cluster node."""

    kind: str  # Deployment | StatefulSet
    replicas: int
    revision: int
    template_hash: str
    image: str
    cluster_ip: str
    pods: list[Pod]
    created: int  # offset the current ReplicaSet was created


@dataclass
class World:
    rng: random.Random
    graph: Graph
    names: NameBook
    namespace: str
    nodes: list[tuple[str, str]]  # (k8s node name, hostIP)
    workloads: dict[str, Workload]
    timelines: dict[str, StoryTimeline]
    events: list[tuple[str, Event]] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)
    k8s_events: list[dict[str, Any]] = field(default_factory=list)
    extra_pods: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    old_replicasets: list[dict[str, Any]] = field(default_factory=list)

    def log(self, node: Node | str, offset: float, level: str, text: str, **kw: Any) -> Event:
        name = node if isinstance(node, str) else node.name
        event = Event(offset=round(min(0.0, offset), 3), level=level, text=text, **kw)
        self.events.append((name, event))
        return event

    def address(self, node: Node, style: str | None = None) -> str:
        """How a caller names ``node`` in a line: short name, cluster DNS name, cluster IP or a pod IP
        (always with the port)."""
        if not node.in_cluster:
            return f"{node.host}:443"
        style = style or self.rng.choice(("host", "fqdn", "ip", "pod_ip"))
        if style == "fqdn":
            return f"{node.name}.{self.namespace}.svc.cluster.local:{node.port}"
        if style == "ip":
            return f"{self.workloads[node.name].cluster_ip}:{node.port}"
        if style == "pod_ip":
            return f"{self.rng.choice(self.workloads[node.name].pods).ip}:{node.port}"
        return f"{node.name}:{node.port}"

    def url(self, node: Node, path: str) -> str:
        if not node.in_cluster:
            return f"https://{node.host}{path}"
        return f"http://{self.address(node, self.rng.choice(('host', 'fqdn', 'ip')))}{path}"

    def conn_string(self, caller: Node, node: Node) -> str:
        """A connection string the caller's stack would log for a datastore, cache or queue."""
        host = self.address(node, self.rng.choice(("host", "fqdn", "host", "ip")))
        db, user = node.database, node.db_user
        if node.tech == "postgres":
            return f"jdbc:postgresql://{host}/{db}" if caller.tech == "java" else f"postgres://{user}@{host}/{db}"
        if node.tech == "mysql":
            if caller.tech == "java":
                return f"jdbc:mysql://{host}/{db}?useSSL=false"
            return f"{user}@tcp({host})/{db}" if caller.tech == "go" else f"mysql://{user}@{host}/{db}"
        if node.tech == "redis":
            return f"redis://{host}/0"
        if node.tech == "rabbitmq":
            return f"amqp://{user}@{host}/{db}"
        if node.tech == "kafka":
            return host
        return self.url(node, "/")

    def pod_ip(self, node: Node) -> str:
        return self.rng.choice(self.workloads[node.name].pods).ip

    def k8s_event(self, kind: str, obj: str, reason: str, message: str, first: float, last: float | None = None,
                  count: int = 1, type_: str = "Warning") -> dict[str, Any]:
        event = {"type": type_, "reason": reason, "message": message, "count": count, "object": f"{kind}/{obj}",
                 "first_offset_seconds": int(min(0, first)), "last_offset_seconds": int(min(0, last if last is not None
                                                                                          else first))}
        self.k8s_events.append(event)
        return event


def _timeline(rng: random.Random, node: Node) -> StoryTimeline:
    base_rps = rng.uniform(3, 120) if node.role in ("frontend", "service") else rng.uniform(20, 400)
    base_lat = rng.uniform(0.01, 0.12) if node.role != "external" else rng.uniform(0.08, 0.3)
    base_err = rng.uniform(0.001, 0.008)
    cpu_limit = rng.choice((0.5, 1.0, 2.0))
    cpu_base = cpu_limit * rng.uniform(0.1, 0.35)
    mem_limit = rng.choice((256, 512, 1024, 2048)) * 1024 * 1024
    mem_base = mem_limit * rng.uniform(0.3, 0.55)
    wobble = [1 + 0.08 * math.sin(i / rng.uniform(4, 9) + rng.random()) + rng.uniform(-0.05, 0.05) for i in range(SAMPLES)]
    return StoryTimeline(
        rps=[base_rps * w for w in wobble],
        err=[base_err * rng.uniform(0.6, 1.4) for _ in range(SAMPLES)],
        latency=[base_lat * rng.uniform(0.9, 1.1) for _ in range(SAMPLES)],
        cpu=[cpu_base * w for w in wobble],
        cpu_limit=cpu_limit,
        memory=[mem_base * rng.uniform(0.98, 1.02) for _ in range(SAMPLES)],
        memory_limit=mem_limit,
    )


def build_world(rng: random.Random, graph: Graph) -> World:
    """The cluster: worker nodes, a Deployment or StatefulSet per in-cluster node with pods and IPs."""
    names = NameBook(rng)
    for node in graph.nodes:  # keep the graph's names out of the book's later draws
        names._taken.add(node.name)
    namespace = names.plain((2, 3))
    region = rng.choice(("eu-west-1", "us-east-2", "ap-south-1"))
    k8s_nodes = []
    for i in range(rng.randint(2, 6)):
        a, b = rng.randint(1, 250), rng.randint(1, 250)
        name = f"ip-10-20-{a}-{b}.{region}.compute.internal" if rng.random() < 0.5 else \
            f"{word(rng, 2)}-pool-{template_hash(rng)[:5]}"
        k8s_nodes.append((name, f"10.20.{a}.{b}"))
    k8s_nodes = list(dict.fromkeys(k8s_nodes))
    used_ips: set[str] = set()

    def fresh_ip(prefix: str) -> str:
        while True:
            ip = f"{prefix}.{rng.randint(0, 250)}.{rng.randint(2, 250)}"
            if ip not in used_ips:
                used_ips.add(ip)
                return ip

    registry = f"registry.{word(rng, 2)}.{rng.choice(('io', 'dev', 'internal'))}"
    workloads: dict[str, Workload] = {}
    for node in graph.nodes:
        if not node.in_cluster:
            continue
        stateful = node.role in ("datastore", "queue")
        replicas = 1 if stateful or node.role == "cache" else rng.randint(1, 3)
        if node.tech in OFFICIAL_IMAGES:
            image = OFFICIAL_IMAGES[node.tech].format(rng.randint(1, 9))
        else:
            image = f"{registry}/{namespace}/{node.name}:{rng.randint(1, 6)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        hash_ = template_hash(rng)
        created = -rng.randint(2, 40) * 86400 - rng.randint(0, 86399)
        pods = []
        for k in range(replicas):
            pod_name = f"{node.name}-{k}" if stateful else f"{node.name}-{hash_}-{pod_suffix(rng)}"
            host = rng.choice(k8s_nodes)
            pods.append(Pod(name=pod_name, ip=fresh_ip("10.244"), node=host[0], started=created + rng.randint(60, 600),
                            image=image))
        workloads[node.name] = Workload(kind="StatefulSet" if stateful else "Deployment", replicas=replicas,
                                        revision=rng.randint(2, 40), template_hash=hash_, image=image,
                                        cluster_ip=fresh_ip("10.96"), pods=pods, created=created)
    timelines = {node.name: _timeline(rng, node) for node in graph.nodes}
    return World(rng=rng, graph=graph, names=names, namespace=namespace, nodes=k8s_nodes, workloads=workloads,
                 timelines=timelines)
