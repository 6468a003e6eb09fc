"""The dependency graph the evidence itself names, each edge keeping the records it came from.

Edges ``caller -> callee`` come from:
- caller/callee labels on metrics (Istio ``source_workload``/``destination_workload``, Linkerd
  ``deployment``/``dst_deployment``, OpenTelemetry ``peer.service``/``server.address`` as labels,
  ``client``/``server``, ``upstream``);
- WARN and ERROR lines of a service that name another service: a URL or connection string host, a
  ``host:port``, an IP address or a cluster DNS name that Kubernetes resolves, or the name of a service
  the evidence knows;
- calls seen in traces;
- placement: a service depends on the node its pods run on, and a node on the workloads it hosts;
- a declared topology (``topology`` results: ``{"edges": [{"from", "to"}]}``), when an operator gives one.

An address that resolves to nothing known is kept as unresolved: the answer must then say where it
could not look.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from dataclasses import dataclass, field

from diagnosis.localisation.levels import WARN_OR_WORSE
from diagnosis.localisation.records import Evidence, Ref, service_of

_URL_HOST = re.compile(r"\b[a-z][a-z0-9+.-]*:(?:[a-z0-9+.-]+:)?//(?:[^@/\s\"']+@)?([A-Za-z0-9_.-]+)", re.I)
# Never a version after a colon: a browser's ``rv:125.0``, an image's ``app:1.2.3``.
_HOST_PORT = re.compile(r"(?<![\w.:/-])([A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*):(\d{2,5})\b(?![.:]\d)")
_IP = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])")
_IP_PORT = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3}):(\d{2,5})\b")
# An address with a port from the ephemeral range (Linux 32768-60999, IANA 49152-65535) is the client side
# of a connection the line's own service accepted: PostgreSQL's ``10.0.3.7(37668)``, an access log's
# ``10.0.3.7:51234``. It names who called, not a dependency.
_CLIENT_PORT = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})[:(](\d{5})\b")
EPHEMERAL_FROM = 32768
# Names on the public internet (a partner's API, a website) are not services of the cluster to query.
_SOURCE_FILE = re.compile(r"\.(?:java|kt|scala|py|go|js|ts|rb|cs|cpp|cc|c|h|rs|php|ex|exs|erl|clj)$")
_PUBLIC_SUFFIX = re.compile(r"\.(?:com|org|net|io|dev|app|cloud|co|uk|de|cn|example)$", re.I)
# Keys that name where a call went (not ``client`` or nginx's ``server``/``host``, which name this side).
_KEYED_HOST = re.compile(r"\b(?:db_?host|upstream_?host|peer|peer\.service|addr|remote_addr|endpoint|backend|"
                         r"target|dial|broker|bootstrap\.servers|dependency|callee|to)[\"']?\s*[=:]\s*[\"']?"
                         r"([A-Za-z][A-Za-z0-9_.-]+)", re.I)
# A host given with its port as a pair of keys: Python clients' ``HTTPConnectionPool(host='x', port=80)`` and
# ``Redis<ConnectionPool<Connection<host=x,port=6379>>>``, libpq's ``host=x port=5432``. A ``host`` key alone
# is often this side (nginx's ``host``), the pair is where a call went.
# A server's own line gives its client the same way, with the client's ephemeral port (PostgreSQL's
# "connection received: host=10.0.3.7 port=51234"): that pair names who called.
_HOST_AND_PORT = re.compile(r"\bhost\s*=\s*[\"']?([A-Za-z0-9][A-Za-z0-9_.-]*)[\"']?\s*[,;]?\s*port\s*=\s*(\d{2,5})\b", re.I)
# Keys that name who made the call, not where it went: ``client=web-ui``, ``"caller":"jobs"``, ``source=10.0.3.7``.
_CALLER_KEY = re.compile(r"\b(?:client|caller|source|src|origin|requester)(?:_?(?:id|name|app|service|ip|addr))?[\"']?\s*[=:]\s*"
                         r"[\"']?([A-Za-z0-9][A-Za-z0-9_.-]*)", re.I)
_DIGITS = re.compile(r"\d+")
_UNSPECIFIED = {"0.0.0.0", "::"}
# A resolver's reply that the name does not exist, as Go's resolver reports it ("lookup NAME on
# 10.96.0.10:53: no such host"): the name server at that address answered.
_RESOLVER_ANSWERED = re.compile(r"\blookup \S+ on \[?([0-9A-Fa-f.:]+?)\]?:53: no such host")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*[A-Za-z0-9](?:\.[A-Za-z0-9_-]+)*")
_CALLER_CALLEE = (("source_workload", "destination_workload"), ("deployment", "dst_deployment"),
                  ("source_service", "destination_service"), ("client", "server"), ("caller", "callee"),
                  ("service", "peer_service"), ("service", "peer.service"), ("service", "upstream"),
                  ("service", "server_address"), ("src", "dst"))
# A Service's cluster DNS name, as a callee label often gives it (Istio's ``destination_service``,
# OpenTelemetry's ``server.address``): ``<service>.<namespace>.svc[.cluster.local]``, maybe with a port.
_CLUSTER_DNS = re.compile(r"([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)\.[a-z0-9-]+\.svc(?:\.cluster\.local)?\.?(?::\d{1,5})?", re.I)


@dataclass
class Edge:
    caller: str
    callee: str
    via: str  # metric | log | trace | placement | topology | client
    refs: list[Ref] = field(default_factory=list)


@dataclass
class DependencyGraph:
    edges: dict[tuple[str, str], Edge] = field(default_factory=dict)
    unresolved: dict[str, list[tuple[str, Ref]]] = field(default_factory=lambda: defaultdict(list))
    nodes: set[str] = field(default_factory=set)  # the entities that are nodes, not services
    # The edges from and to each entity, in the order of ``edges``: a service's edges without a walk over
    # all of them (``add`` is the one way in).
    _from: dict[str, list[Edge]] = field(default_factory=dict, repr=False, compare=False)
    _to: dict[str, list[Edge]] = field(default_factory=dict, repr=False, compare=False)

    def add(self, caller: str, callee: str, via: str, ref: Ref | None = None) -> None:
        if not caller or not callee or caller == callee:
            return
        edge = self.edges.get((caller, callee))
        if edge is None:
            edge = self.edges[(caller, callee)] = Edge(caller, callee, via)
            self._from.setdefault(caller, []).append(edge)
            self._to.setdefault(callee, []).append(edge)
        if ref is not None and len(edge.refs) < 3 and ref not in edge.refs:
            edge.refs.append(ref)

    def note_unresolved(self, service: str, addresses: list[str], ref: Ref) -> None:
        seen = {a for a, _ in self.unresolved[service]}
        for address in addresses:
            if address not in seen and len(self.unresolved[service]) < 5:
                self.unresolved[service].append((address, ref))
                seen.add(address)
        if not self.unresolved[service]:
            del self.unresolved[service]

    def dependencies(self, service: str) -> list[Edge]:
        return list(self._from.get(service, ()))

    def callers(self, service: str) -> list[Edge]:
        return list(self._to.get(service, ()))

    def path(self, subject: list[str], root: str) -> list[Edge]:
        """The shortest chain of edges from an asked service to the root (empty when it is the root)."""
        for start in subject:
            if start == root:
                return []
            frontier, came_by = deque([start]), {start: None}  # the edge each service was first reached by
            while frontier:
                service = frontier.popleft()
                for edge in self._from.get(service, ()):
                    if edge.callee in came_by:
                        continue
                    if edge.callee == root:
                        path = [edge]
                        while came_by[path[-1].caller] is not None:
                            path.append(came_by[path[-1].caller])
                        return path[::-1]
                    came_by[edge.callee] = edge
                    frontier.append(edge.callee)
        return []


def resolve(name: str, evidence: Evidence, known: set[str]) -> str | None:
    """The service an address or name stands for, or None."""
    if name in evidence.addresses:
        return evidence.addresses[name]
    if name in known:
        return name
    first = name.split(".", 1)[0]
    if "." in name and (first in known or first in evidence.addresses) and not _IP.fullmatch(name):
        return evidence.addresses.get(first, first)
    return None


def _addresses(message: str) -> list[str]:
    """Where a line says a call went: URL and connection-string hosts, ``host:port``, ``IP:port`` and
    keyed hosts (a bare IP is more often the client's). Never the unspecified address (``0.0.0.0``: a
    server's own listener, which no call can reach), nor a name server that answered the lookup the
    line reports (its resolution worked; the name it was asked for is what failed)."""
    names = [m.group(1) for m in _URL_HOST.finditer(message)] + [m.group(1) for m in _HOST_PORT.finditer(message)]
    names += [m.group(1) for m in _IP_PORT.finditer(message) if int(m.group(2)) < EPHEMERAL_FROM]
    names += [m.group(1) for m in _KEYED_HOST.finditer(message)]
    names += [m.group(1) for m in _HOST_AND_PORT.finditer(message) if int(m.group(2)) < EPHEMERAL_FROM]
    answered = {m.group(1) for m in _RESOLVER_ANSWERED.finditer(message)}
    return [n.rstrip(".") for n in dict.fromkeys(names)
            if not _SOURCE_FILE.search(n) and n not in _UNSPECIFIED and n not in answered]


def outside_hosts(message: str) -> list[str]:
    """The hosts on the public internet a line says a call went to (the cluster may still declare one, as an
    ExternalName Service)."""
    return [name for name in _addresses(message) if _PUBLIC_SUFFIX.search(name)]


def _ephemeral_clients(message: str) -> list[str]:
    """The IPs a line gives with an ephemeral port: the clients of connections the line's own service accepted."""
    return [m.group(1) for pattern in (_CLIENT_PORT, _HOST_AND_PORT) for m in pattern.finditer(message)
            if int(m.group(2)) >= EPHEMERAL_FROM]


def named_in(message: str, evidence: Evidence, known: set[str]) -> tuple[list[str], list[str]]:
    """The services a line names, and the addresses it names that resolve to nothing."""
    found, unresolved = [], []
    for name in _addresses(message):
        target = resolve(name, evidence, known)
        if target:
            found.append(target)
        elif not _PUBLIC_SUFFIX.search(name):
            unresolved.append(name)
    callers = {m.group(1) for m in _CALLER_KEY.finditer(message)}
    clients = set(_ephemeral_clients(message)) | callers
    for ip in _IP.findall(message):
        if ip in evidence.addresses and ip not in clients:
            found.append(evidence.addresses[ip])
    for word in _WORD.findall(message):
        # A plain word is a name only when the cluster declares a Service for that workload ("upstream neidis
        # answered after 2.8s"); otherwise "cache" or "orders" in a line may be any word.
        plain = not ("-" in word or "." in word or "_" in word)
        if word not in found and word not in callers and (not plain or word in evidence.declarations):
            target = resolve(word, evidence, known)
            if target:
                found.append(target)
    return list(dict.fromkeys(found)), list(dict.fromkeys(unresolved))


def addressed_in(message: str, evidence: Evidence, known: set[str]) -> tuple[list[str], list[str]]:
    """The services a line reaches by URL, connection string, ``host:port`` or keyed host, and the
    addresses of those that resolve to nothing known."""
    found, unresolved = [], []
    for name in _addresses(message):
        target = resolve(name, evidence, known)
        if target or not _PUBLIC_SUFFIX.search(name):
            (found if target else unresolved).append(target or name)
    return list(dict.fromkeys(found)), unresolved


# The peer of a connection a server's own line records: ``(10.0.3.7:51009 -> 10.0.9.2:5672)`` (RabbitMQ,
# Envoy and most access logs write the client first), or an address with an ephemeral port.
_ARROW_PEER = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})[:(]\d{1,5}\)?\s*-+>\s*\d{1,3}(?:\.\d{1,3}){3}")
MAX_CLIENTS = 8
_GROUP_LABELS = ("consumergroup", "consumer_group", "group", "consumer", "consumer_name", "durable_name")


def clients_of(service: str, evidence: Evidence) -> list[tuple[str, Ref]]:
    """The services whose connections the service's own lines record, by the peer address the cluster's
    Services resolve (an endpoint pod IP): who holds a session with it. For a broker, its consumers
    (and producers) among them; the graph's edges keep the direction of calls, so these are read only when
    a candidate's trouble is what its clients should drain (``ranking.backlog_only``)."""
    found: dict[str, Ref] = {}
    known = evidence.services() | set(evidence.queried) | set(evidence.declarations)
    for series in evidence.series:  # a consumer group named after its service (Kafka's ``consumergroup``)
        group = next((series.labels[k] for k in _GROUP_LABELS if series.labels.get(k)), None)
        client = resolve(group, evidence, known) if group and service_of(series.labels) == service else None
        if client and client != service and client not in found and len(found) < MAX_CLIENTS:
            found[client] = series.ref
    for record in evidence.logs:
        if record.service != service or len(found) >= MAX_CLIENTS:
            continue
        peers = [m.group(1) for m in _ARROW_PEER.finditer(record.message)]
        peers += _ephemeral_clients(record.message)
        for ip in peers:
            client = evidence.addresses.get(ip)
            if client and client != service and client not in found:
                found[client] = record.ref
    return list(found.items())


def _peer(value: str, evidence: Evidence, known: set[str]) -> str:
    """The service a caller or callee label names: an address the cluster resolves, a known service spelt
    with underscores, a Service's cluster DNS name read as the Service, else the label as it stands."""
    if resolved := resolve(value, evidence, known):
        return resolved
    if "_" in value and value.replace("_", "-") in known:
        return value.replace("_", "-")  # an nginx upstream block named after the service (``perks_api``)
    dns = _CLUSTER_DNS.fullmatch(value)
    return dns.group(1).lower() if dns else value


def _may_name_address(text: str) -> bool:
    return ":" in text or "=" in text


def build_graph(evidence: Evidence) -> DependencyGraph:
    graph = DependencyGraph()
    known = evidence.services() | set(evidence.queried)
    for series in evidence.series:
        labels = series.labels
        for a, b in _CALLER_CALLEE:
            if labels.get(a) and labels.get(b):
                graph.add(_peer(labels[a], evidence, known), _peer(labels[b], evidence, known), "metric", series.ref)
    routine: dict[tuple[str, str], int] = defaultdict(int)
    # A routine line with no ":" or "=" names no address (every address pattern needs one), so it only
    # counts towards its shape. A line that has one has it in its shape too, unless it comes after the
    # first 160 characters: only then can a line without one share its shape, and have to be counted.
    routine_flags = [r.level not in WARN_OR_WORSE for r in evidence.logs]
    may_name = [":" in r.message or "=" in r.message for r in evidence.logs]  # ``_may_name_address``, inlined
    counted = {r.service for r, routine_line, may in zip(evidence.logs, routine_flags, may_name)
               if routine_line and may and not _may_name_address(r.message[:160])}
    for record, routine_line, may in zip(evidence.logs, routine_flags, may_name):
        if routine_line:
            if not may and record.service not in counted:
                continue
            # Routine lines still name what a service talks to, by address or connection string; a few
            # lines of each shape tell it.
            shape = (record.service, _DIGITS.sub("0", record.message[:160]))
            routine[shape] += 1
            if routine[shape] <= 2:
                targets, unresolved = addressed_in(record.message, evidence, known - {record.service})
                for target in targets:
                    graph.add(record.service, target, "log", record.ref)
                graph.note_unresolved(record.service, unresolved, record.ref)
            continue
        services, unresolved = named_in(record.message, evidence, known - {record.service})
        for target in services:
            if target != record.service:
                graph.add(record.service, target, "log", record.ref)
        graph.note_unresolved(record.service, unresolved, record.ref)
    for call in evidence.calls:
        graph.add(call.caller, call.callee, "trace", call.ref)
    def node_key(node: str) -> str:
        key = node if node in known else f"node:{node}"
        graph.nodes.add(key)
        return key

    hosts: dict[str, list[str]] = defaultdict(list)
    for placement in evidence.placements:
        if placement.node:
            hosts[node_key(placement.node)].append(placement.service)
    for series in evidence.series:  # a workload series that carries its node places it there too
        node = series.labels.get("node")
        service = series.labels.get("service") or series.labels.get("app")
        if node and service and service != node:
            hosts[node_key(node)].append(service)
        elif not service and evidence.node(series.labels):
            node_key(evidence.node(series.labels))
    for node, services in hosts.items():
        for service in dict.fromkeys(services):
            graph.add(service, node, "placement")
            graph.add(node, service, "placement")
    return graph


def node_entities(evidence: Evidence) -> set[str]:
    return {f"node:{evidence.node(s.labels)}" for s in evidence.series if evidence.node(s.labels)}
