"""A random call graph: frontends call services, services call services and backing components.

The graph is a DAG (calls only go "down" the layers): frontends/gateways -> services ->
datastores, caches, queues and outside APIs. Each node gets a technology and a log format drawn at
random, so two incidents of the same fault kind read differently.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from diagnosis.evaluation.generator.names import NameBook

ROLES = ("frontend", "service", "datastore", "cache", "queue", "external")
LEAF_ROLES = ("datastore", "cache", "queue", "external")
# technology -> the log formats its software writes (formats.py renders them)
TECH_FORMATS: dict[str, tuple[str, ...]] = {
    "nginx": ("nginx",),
    "envoy": ("json", "logfmt"),
    "java": ("logback", "log4j", "json"),
    "go": ("zap", "zerolog", "logfmt", "klog"),
    "python": ("python", "json"),
    "node": ("json", "logfmt"),
    "postgres": ("postgres",),
    "mysql": ("mysql",),
    "redis": ("redis",),
    "rabbitmq": ("rabbitmq",),
    "kafka": ("log4j",),
    "external": (),
}
ROLE_TECHS = {
    "frontend": ("nginx", "envoy", "node", "go"),
    "service": ("java", "go", "python", "node"),
    "datastore": ("postgres", "mysql"),
    "cache": ("redis",),
    "queue": ("rabbitmq", "kafka"),
    "external": ("external",),
}
PORTS = {"nginx": 80, "envoy": 8080, "java": 8080, "go": 8080, "python": 8000, "node": 3000, "postgres": 5432,
         "mysql": 3306, "redis": 6379, "rabbitmq": 5672, "kafka": 9092, "external": 443}


@dataclass
class Node:
    """One component of the graph and what it runs."""

    name: str
    role: str
    tech: str
    format: str
    port: int
    host: str = ""  # outside APIs: the DNS name callers use
    database: str = ""  # datastores: the database name; queues: the queue or topic
    db_user: str = ""

    @property
    def is_leaf(self) -> bool:
        return self.role in LEAF_ROLES

    @property
    def in_cluster(self) -> bool:
        return self.role != "external"


@dataclass
class Graph:
    """Nodes in layer order and directed call edges ``caller -> callee``."""

    nodes: list[Node]
    edges: list[tuple[str, str]]
    by_name: dict[str, Node] = field(init=False)

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}

    def callees(self, name: str) -> list[Node]:
        return [self.by_name[b] for a, b in self.edges if a == name]

    def callers(self, name: str) -> list[Node]:
        return [self.by_name[a] for a, b in self.edges if b == name]

    def ancestors(self, name: str) -> list[Node]:
        """Every node with a call path to ``name``, nearest first."""
        seen: list[str] = []
        frontier = [name]
        while frontier:
            nxt = []
            for current in frontier:
                for caller in self.callers(current):
                    if caller.name not in seen:
                        seen.append(caller.name)
                        nxt.append(caller.name)
            frontier = nxt
        return [self.by_name[n] for n in seen]

    def of_role(self, *roles: str) -> list[Node]:
        return [n for n in self.nodes if n.role in roles]


def _node(rng: random.Random, names: NameBook, role: str) -> Node:
    tech = rng.choice(ROLE_TECHS[role])
    formats = TECH_FORMATS[tech]
    node = Node(name=names.service(), role=role, tech=tech, format=rng.choice(formats) if formats else "",
                port=PORTS[tech])
    if role == "external":
        node.host = names.host()
    if role in ("datastore", "queue"):
        node.database = names.plain((2, 2))
        node.db_user = f"{names.plain((1, 2))}_{rng.choice(('app', 'rw', 'svc', 'user'))}"
    return node


def build_graph(rng: random.Random, size: int) -> Graph:
    """A random DAG of ``size`` (3-30) nodes; every node is reachable from a frontend and every
    leaf has a caller."""
    if not 3 <= size <= 30:
        raise ValueError(f"size must be between 3 and 30, got {size}")
    names = NameBook(rng)
    frontends = 1 if size < 8 else rng.randint(1, 2)
    leaves = max(1, min(size - frontends - 1, round(size * rng.uniform(0.25, 0.4))))
    services = size - frontends - leaves
    leaf_roles = ["datastore"] + [rng.choice(LEAF_ROLES) for _ in range(leaves - 1)]
    rng.shuffle(leaf_roles)
    front = [_node(rng, names, "frontend") for _ in range(frontends)]
    middle = [_node(rng, names, "service") for _ in range(services)]
    bottom = [_node(rng, names, role) for role in leaf_roles]
    edges: set[tuple[str, str]] = set()
    # every service gets a caller above it (a frontend or an earlier service): the DAG stays connected
    for i, svc in enumerate(middle):
        above = front + middle[:i]
        edges.add((rng.choice(above).name, svc.name))
        if i and rng.random() < 0.3:
            edges.add((rng.choice(above).name, svc.name))
    for leaf in bottom:
        edges.add((rng.choice(middle).name, leaf.name))
        if len(middle) > 2 and rng.random() < 0.35:
            edges.add((rng.choice(middle).name, leaf.name))
    for gateway in front:
        if not any(a == gateway.name for a, _ in edges):
            edges.add((gateway.name, rng.choice(middle).name))
    for svc in middle:  # a few more calls down the layers
        if rng.random() < 0.4:
            edges.add((svc.name, rng.choice(bottom).name))
    order = {n.name: i for i, n in enumerate(front + middle + bottom)}
    return Graph(nodes=front + middle + bottom, edges=sorted(edges, key=lambda e: (order[e[0]], order[e[1]])))
