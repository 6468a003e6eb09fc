"""What lies below a candidate that no query examined: the dependencies and hops its evidence leads to, the
nodes it runs on, the addresses nothing resolves, and the checks that would examine them.

``localise`` reads it twice: to doubt a root whose trouble may come from further down (``beyond``), and to
say what to check next when it is undetermined (``next_checks``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diagnosis.localisation.graph import named_in, outside_hosts
from diagnosis.localisation.kinds import GENERIC, kind_named, signal_votes
from diagnosis.localisation.levels import at_least
from diagnosis.localisation.ranking import Candidate, starved, symptom_only
from diagnosis.localisation.records import Evidence, service_of


@dataclass
class NextCheck:
    tool: str
    arguments: dict[str, Any]
    why: str


QUIET_HOPS = 2


def beyond(top: Candidate, graph, evidence: Evidence, candidates) -> tuple[list[str], list[str]]:
    """What lies below the top: the examined dependencies that show nothing themselves (quiet hops, up to
    ``QUIET_HOPS`` deep: trouble further down reaches the top through them), and the services its dependencies
    or those hops name whose own telemetry no query returned."""
    if not graph.dependencies(top.service):
        return [], []
    seen = evidence.examined()  # once, not once per dependency
    quiet: list[str] = []
    unexamined: list[str] = []
    frontier = [top.service]
    for depth in range(QUIET_HOPS + 1):
        following = []
        for service in frontier:
            for edge in graph.dependencies(service):
                callee = edge.callee
                if callee in candidates or callee in graph.nodes or callee == top.service:
                    continue
                if callee not in seen:
                    unexamined.append(callee)
                elif depth < QUIET_HOPS and edge.via != "placement" and callee not in quiet:
                    quiet.append(callee)
                    following.append(callee)
        frontier = following
    return quiet, list(dict.fromkeys(unexamined))


# Kinds that are a fault of the service itself, whatever it calls: its own resources, its own changes,
# its scheduling, its certificates, the data it was given.
INTRINSIC_FAMILIES = ("change", "scheduling", "data")
INTRINSIC_KINDS = {"resource.cpu", "resource.memory", "resource.disk", "network.tls"}
_OWN_RESOURCES = ("cpu", "memory", "disk")


def of_its_own(candidate: Candidate, evidence: Evidence) -> bool:
    """A fault of the service itself, whatever lies below it. Short of a resource, or failing on a certificate,
    only by its own series or state, or by lines that name no other service or host: "OOM command not allowed
    ... redis://cache:6379" is the cache's memory, "https://api.example.io failed: certificate has expired"
    that host's certificate, told by their caller."""
    kind = candidate.kind or ""
    if kind.split(".")[0] in INTRINSIC_FAMILIES:
        return True
    if kind not in INTRINSIC_KINDS:
        return False
    faults = candidate.faults
    if any(s.source == "kube" or (s.source in ("metric", "placed") and s.kind in _OWN_RESOURCES) for s in faults):
        return True
    others = evidence.services() - {candidate.service}
    return not any(s.source == "log" and s.refs and (any(named_in(s.refs[0].excerpt, evidence, others))
                                                     or outside_hosts(s.refs[0].excerpt)) for s in faults)


def gone_unexplained(top: Candidate, evidence: Evidence) -> bool:
    """It went away (its series stopped, its ``up`` fell) with no line of its own or change before it saying why,
    and no query asked for its Kubernetes state, which says why: crashed, killed, evicted, never scheduled,
    scaled to zero."""
    own = [s for s in top.faults if s.source not in ("named", "placed")]
    return (bool(own) and all(s.kind == "stopped" or s.text == "up" for s in own)
            and not (top.kind or "").startswith("change.") and top.service not in evidence.kube_asked)


# A lookup the resolver did not answer (EAI_AGAIN, SERVFAIL, a resolver at :53 that refuses or times out), as
# resolvers' clients word it; "no such host" and NXDOMAIN are answers: the name asked for does not exist.
_RESOLVER_FAILED = re.compile(r"temporary failure in name resolution|server misbehaving|servfail|eai_again|"
                              r"no servers could be reached|lookup \S+ on \S+:53: (?:read udp \S+ )?"
                              r"(?:i/o timeout|connection refused|.*?no route to host)", re.I)


def resolver_failed(top: Candidate) -> bool:
    """Its name lookups failed because the resolver did not answer: the cluster's DNS server (or the pod's
    resolver setting) is where that begins, not the service that asked."""
    return top.kind == "network.dns" and any(
        _RESOLVER_FAILED.search(text) for s in top.faults for text in [s.text, *(r.excerpt for r in s.refs[:1])])


PRECISE_ANSWERS = ("network.tls", "capacity.rate_limit")  # a peer's own answer, as its callers quote it


def seen_only_by_callers(top: Candidate, evidence: Evidence) -> bool:
    """Known only from what its callers' lines say, while no query asked for its own series: when they say it
    timed out or refused, that is their view, and its own series would say why (dropped packets, a cache at its
    limit). A certificate it presented or a rate limit it answered with is its own answer."""
    return (bool(top.faults) and all(s.source == "named" and s.kind not in PRECISE_ANSWERS for s in top.faults)
            and top.service not in evidence.metrics_asked)


# A limiter's own words for what it does to its callers (nginx's "limiting requests", Envoy's "rejecting with 429").
_LIMITING = re.compile(r"\breject|limiting (?:requests|connections)|throttling (?:requests|clients)|shedding", re.I)


def limited_by_unnamed(top: Candidate) -> bool:
    """Rate limited by whom? A rate limit is the answer of the service that limits: it shows on that one's own
    series (requests it rejected) or in the lines of callers that name it. When only the top's own lines say so,
    with no limiter's words of its own and no caller it explains, it was the one limited, by a service the
    evidence does not name."""
    return top.kind == "capacity.rate_limit" and not top.explains and not any(
        s.source == "log" and _LIMITING.search(s.text) for s in top.faults) and all(
        s.source == "log" or (s.source == "metric" and "capacity.rate_limit" not in signal_votes(s))
        for s in top.faults)


def outside_unresolved(top: Candidate, evidence: Evidence) -> list[str]:
    """The outside hosts the top's own lines name while no query read the cluster's Services, which may declare
    one as theirs (an ExternalName Service)."""
    if evidence.address_book:
        return []
    hosts = [h for s in top.faults if s.source == "log" and s.refs for h in outside_hosts(s.refs[0].excerpt)]
    return [h for h in dict.fromkeys(hosts) if h not in evidence.addresses]


def unexamined_nodes(candidate: Candidate, graph, evidence: Evidence, through: list[str] = ()) -> list[str]:
    """The nodes a service (and the services ``through``) runs on whose own series no query returned, while a
    way to read them is left untried (a node every way returned nothing for shows nothing)."""
    seen = {service_of(s.labels) for s in evidence.series}
    seen |= {evidence.node(s.labels) for s in evidence.series if not service_of(s.labels)}
    nodes = dict.fromkeys(e.callee for service in [candidate.service, *through] for e in graph.dependencies(service)
                          if e.via == "placement" and e.callee.removeprefix("node:") not in seen)
    return [node for node in nodes if node_reads(node, evidence)]


def nodes_to_examine(top: Candidate, graph, evidence: Evidence, quiet: list[str]) -> list[str]:
    """The unexamined nodes that may hold the cause: a starved top's own; for a top that is only saturated (a
    pool, a queue, requests waiting), also those of the quiet dependencies it waits on. A dependency slowed by
    its node shows nothing of its own; its caller's pool fills with the requests that wait for it."""
    if starved(top):
        return unexamined_nodes(top, graph, evidence)
    if quiet and (top.kind == "resource.pool" or symptom_only(top)):
        return unexamined_nodes(top, graph, evidence, quiet)
    if symptom_only(top) and (top.kind in GENERIC or not kind_named(top.kind, top.kind_votes)):
        # Only slower or failing, with nothing of its own that says why (at most a passing word): the node it
        # runs on may be short of memory or CPU.
        return unexamined_nodes(top, graph, evidence)
    return []


def node_reads(node: str, evidence: Evidence, why: str = "") -> list[NextCheck]:
    """The ways to read a node's series not tried yet: by its ``node`` label (the kubelet, cAdvisor, exporters
    relabelled by node name), by node exporter's ``instance`` (the node's IP, with the port) once a pod on
    it gave that IP as its hostIP, else that pod's own state, which gives it."""
    name = node.removeprefix("node:")
    asked = {word for expression in evidence.expressions for word in re.split(r"[^\w.\-]+", expression)}
    ips = [ip for ip, named in evidence.node_names.items() if named == name]
    selectors = []
    if name not in asked:
        selectors.append(f'{{node="{name}"}}')
    if ips and not set(ips) & asked:
        selectors.append('{instance=~"(%s)(:[0-9]+)?"}' % "|".join(ips))
    # Both ways in one query when both are known: one call, one round trip.
    reads = [NextCheck("query_metrics", {"query": " or ".join(selectors)}, why)] if selectors else []
    pod = next((p.pod for p in evidence.placements if p.node == name and p.pod), None)
    if not ips and pod and pod not in evidence.queried:
        reads.append(NextCheck("query_kubernetes", {"kind": "pod", "name": pod}, f"the address of {name}"))
    return reads


def next_checks(top: Candidate, graph, evidence: Evidence) -> list[NextCheck]:
    """What to examine next: a starved top's node first; else the unexamined dependencies and unresolved
    addresses below it, then the nodes its quiet dependencies run on."""
    quiet, unexamined = beyond(top, graph, evidence, {})
    nodes, own_node_first = _node_checks(top, graph, evidence, quiet), starved(top)
    checks = list(nodes) if own_node_first else []
    if gone_unexplained(top, evidence):
        checks.append(NextCheck("query_kubernetes", {"kind": "deployment", "name": top.service}, "why it went away"))
    if seen_only_by_callers(top, evidence):
        checks.append(NextCheck("query_metrics", {"service": top.service}, "only its callers' lines show it"))
    for host in outside_unresolved(top, evidence)[:1]:
        checks.append(NextCheck("query_kubernetes", {"kind": "service"}, f"whether a Service of the cluster is {host}"))
    for callee in unexamined:
        if not callee.startswith("node:"):
            checks.append(NextCheck("query_logs", {"service": callee}, f"{top.service} depends on it"))
            checks.append(NextCheck("query_metrics", {"service": callee}, f"{top.service} depends on it"))
    for address, _ref in [a for s in [top.service, *quiet] for a in graph.unresolved.get(s, [])][:2]:
        name = service_in_address(address)
        if name is None:  # an IP: the cluster's Services (cluster IPs, endpoint pod IPs) say who answers there
            if not any(c.tool == "query_kubernetes" and "name" not in c.arguments for c in checks):
                checks.append(NextCheck("query_kubernetes", {"kind": "service"}, f"which Service answers at {address}"))
            continue
        # Kubernetes DNS names a Service by its first label (<service>.<namespace>.svc.cluster.local).
        checks.append(NextCheck("query_logs", {"service": name}, f"{top.service} calls {address}"))
        checks.append(NextCheck("query_metrics", {"service": name}, f"{top.service} calls {address}"))
        checks.append(NextCheck("query_kubernetes", {"kind": "service", "name": name}, f"which pods answer at {address}"))
    return checks if own_node_first else checks + nodes


def _node_checks(top: Candidate, graph, evidence: Evidence, quiet: list[str]) -> list[NextCheck]:
    nodes = nodes_to_examine(top, graph, evidence, quiet)[:1]
    return [c for node in nodes for c in node_reads(node, evidence, f"{top.service} depends on {node.removeprefix('node:')}")]


def service_in_address(address: str) -> str | None:
    """The Service an in-cluster address names, or None for an IP."""
    if re.fullmatch(r"[\d.]+", address):
        return None
    name = address.split(".", 1)[0]
    return name if re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) else None


def errors_point_below(evidence: Evidence, subject: list[str], known: set[str]) -> tuple[str, list[NextCheck]]:
    """Why "nothing wrong" cannot be said of the asked services though nothing deviates: an error line of theirs
    (or of a dependency it names that shows nothing itself, and so on down the chain) names a service whose
    telemetry no query returned, or an address nothing resolves. Returns the reason and the checks, or ("", [])."""
    seen, examined = set(subject), evidence.examined()
    frontier = list(subject)
    while frontier:  # to the chain's end: each service once
        following = []
        for record in evidence.logs:
            if record.service not in frontier or not at_least(record.level, "ERROR"):
                continue
            targets, unresolved = named_in(record.message, evidence, known - {record.service})
            for address in unresolved:
                name = service_in_address(address)
                if name is None and evidence.address_book:
                    continue  # the cluster's Services were read and none answers there (a pod since replaced)
                if name is None:
                    return "address_not_resolved", [NextCheck("query_kubernetes", {"kind": "service"},
                                                              f"which Service answers at {address}")]
                return "address_not_resolved", [NextCheck("query_logs", {"service": name}, f"{record.service} calls {address}"),
                                                 NextCheck("query_metrics", {"service": name}, f"{record.service} calls {address}")]
            for target in targets:
                if target not in examined:
                    return "dependency_not_examined", [
                        NextCheck("query_logs", {"service": target}, f"{record.service}'s errors name it"),
                        NextCheck("query_metrics", {"service": target}, f"{record.service}'s errors name it")]
                if target not in seen:
                    seen.add(target)
                    following.append(target)
        frontier = following
    return "", []
