"""What lies below a candidate that no query examined: the dependencies and hops its evidence leads to, the
nodes it runs on, the addresses nothing resolves, and the checks that would examine them.

``localise`` reads it twice: to doubt a root whose trouble may come from further down (``beyond``), and to
say what to check next when it is undetermined (``next_checks``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diagnosis.localisation.graph import named_in
from diagnosis.localisation.levels import at_least
from diagnosis.localisation.ranking import Candidate, starved
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


def unexamined_nodes(candidate: Candidate, graph, evidence: Evidence) -> list[str]:
    """The nodes a starved service runs on whose own series no query returned."""
    seen = {service_of(s.labels) for s in evidence.series}
    seen |= {evidence.node(s.labels) for s in evidence.series if not service_of(s.labels)}
    return [e.callee for e in graph.dependencies(candidate.service)
            if e.via == "placement" and e.callee.removeprefix("node:") not in seen]


def next_checks(top: Candidate, graph, evidence: Evidence) -> list[NextCheck]:
    checks = []
    for node in (unexamined_nodes(top, graph, evidence) if starved(top) else [])[:1]:
        name = node.removeprefix("node:")
        checks.append(NextCheck("query_metrics", {"query": f'{{node="{name}"}}'}, f"{top.service} runs on {name}"))
    quiet, unexamined = beyond(top, graph, evidence, {})
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
    return checks


def service_in_address(address: str) -> str | None:
    """The Service an in-cluster address names, or None for an IP."""
    if re.fullmatch(r"[\d.]+", address):
        return None
    name = address.split(".", 1)[0]
    return name if re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) else None


def errors_point_below(evidence: Evidence, subject: list[str], known: set[str]) -> tuple[str, list[NextCheck]]:
    """Why "nothing wrong" cannot be said of the asked services though nothing deviates: an error line of theirs
    (or of a dependency it names that shows nothing itself, ``QUIET_HOPS`` deep) names a service whose telemetry
    no query returned, or an address nothing resolves. Returns the reason and the checks, or ("", [])."""
    seen, examined = set(subject), evidence.examined()
    frontier = list(subject)
    for _depth in range(QUIET_HOPS + 1):
        following = []
        for record in evidence.logs:
            if record.service not in frontier or not at_least(record.level, "ERROR"):
                continue
            targets, unresolved = named_in(record.message, evidence, known - {record.service})
            for address in unresolved:
                name = service_in_address(address)
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
