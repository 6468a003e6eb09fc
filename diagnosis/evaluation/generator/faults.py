"""The fault kinds the generator injects: one builder per kind of diagnosis/localisation/taxonomy.py, and
where each makes sense (a database fault needs a datastore with callers, a pool fault a service with a
database, a poison message a consumer of a queue)."""

from __future__ import annotations

from typing import Callable

from diagnosis.evaluation.generator import faults_change as change
from diagnosis.evaluation.generator import faults_dependency as dep
from diagnosis.evaluation.generator import faults_platform as platform
from diagnosis.evaluation.generator import faults_resource as res
from diagnosis.evaluation.generator.graph import Graph, Node
from diagnosis.evaluation.generator.story import Story
from diagnosis.evaluation.generator.world import World

Builder = Callable[[World, Node, int], Story]


def _has_callers(graph: Graph, node: Node) -> bool:
    return bool(graph.callers(node.name))


def _calls(graph: Graph, node: Node, *roles: str) -> bool:
    return any(c.role in roles for c in graph.callees(node.name))


def _app(node: Node) -> bool:
    return node.role in ("frontend", "service")


ELIGIBLE: dict[str, Callable[[Graph, Node], bool]] = {
    "resource.cpu": lambda g, n: _app(n),
    "resource.memory": lambda g, n: _app(n),
    "resource.disk": lambda g, n: n.role in ("datastore", "cache", "queue") and _has_callers(g, n),
    "resource.pool": lambda g, n: n.role == "service" and _calls(g, n, "datastore"),
    "network.dns": lambda g, n: _app(n) and bool(g.callees(n.name)),
    "network.tls": lambda g, n: n.role in ("service", "external") and _has_callers(g, n),
    "network.refused": lambda g, n: n.role == "service" and _has_callers(g, n),
    "network.timeout": lambda g, n: n.role in ("service", "datastore", "cache") and _has_callers(g, n),
    "network.loss": lambda g, n: n.role in ("service", "datastore", "cache") and _has_callers(g, n),
    "change.config": lambda g, n: n.role == "service" and _has_callers(g, n),
    "change.secret": lambda g, n: n.role == "service" and _calls(g, n, "datastore", "cache", "queue"),
    "change.image": lambda g, n: n.role == "service" and _has_callers(g, n),
    "change.flag": lambda g, n: _app(n),
    "change.deploy": lambda g, n: _app(n),
    "dependency.database": lambda g, n: n.role == "datastore" and _has_callers(g, n),
    "dependency.cache": lambda g, n: n.role == "cache" and _has_callers(g, n),
    "dependency.queue": lambda g, n: n.role == "queue" and _has_callers(g, n),
    "dependency.external_api": lambda g, n: n.role == "external" and _has_callers(g, n),
    "data.schema": lambda g, n: n.role == "service" and _calls(g, n, "datastore"),
    "data.poison_message": lambda g, n: n.role == "service" and _calls(g, n, "queue"),
    "capacity.rate_limit": lambda g, n: n.role in ("service", "external") and _has_callers(g, n),
    "capacity.quota": lambda g, n: n.role in ("service", "external") and _has_callers(g, n),
    "scheduling.pending": lambda g, n: n.role == "service" and _has_callers(g, n),
    "scheduling.eviction": lambda g, n: n.role == "service" and _has_callers(g, n),
    "scheduling.node_pressure": lambda g, n: _app(n),
}

BUILDERS: dict[str, Builder] = {
    "resource.cpu": res.cpu, "resource.memory": res.memory, "resource.disk": res.disk, "resource.pool": res.pool,
    "network.dns": res.dns, "network.tls": res.tls, "network.refused": res.refused, "network.timeout": res.timeout,
    "network.loss": res.loss,
    "change.config": change.config, "change.secret": change.secret, "change.image": change.image,
    "change.flag": change.flag, "change.deploy": change.deploy,
    "dependency.database": dep.database, "dependency.cache": dep.cache, "dependency.queue": dep.queue,
    "dependency.external_api": dep.external_api, "data.schema": dep.schema, "data.poison_message": dep.poison,
    "capacity.rate_limit": platform.rate_limit, "capacity.quota": platform.quota,
    "scheduling.pending": platform.pending, "scheduling.eviction": platform.eviction,
    "scheduling.node_pressure": platform.node_pressure,
}


def candidates(graph: Graph, kind: str) -> list[Node]:
    """The nodes where ``kind`` can happen in ``graph``."""
    return [n for n in graph.nodes if ELIGIBLE[kind](graph, n)]
