"""Candidates, explained away along the dependency graph, and ranked.

The candidates are the services (and nodes) with fault signals. A candidate is explained away by a
dependency that is itself a candidate, began no later than it (within ``TOLERANCE_S``), and is linked
to it by an edge of the graph: then the candidate's trouble is a symptom. Saturation and timeouts on
a caller are symptoms exactly when something it depends on is anomalous. What is left are the roots,
ranked by onset (earliest first), then by how many other candidates they explain, then by strength.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from diagnosis.localisation.graph import Edge, DependencyGraph
from diagnosis.localisation.kinds import GENERIC, own_words, role_of, signal_votes, typed_reason, word_votes
from diagnosis.localisation.signals import Signal

TOLERANCE_S = 150.0  # two scrape steps and a half: onsets closer than this are simultaneous
# When the candidate's own lines name the dependency, a line already tells that it was failing: the onset
# found in its metrics (the first sample beyond the noise band) may lag by a few more steps.
NAMED_TOLERANCE_S = 300.0
RESOURCE = {"cpu", "memory", "disk", "OOMKilled", "Evicted", "latency", "restart", "stopped"}


@dataclass
class Candidate:
    service: str
    signals: list[Signal]
    onset: float | None
    strength: float
    explained_by: str | None = None
    edge: Edge | None = None
    explains: list[str] = field(default_factory=list)
    kind: str | None = None
    kind_votes: Counter = field(default_factory=Counter)
    role: str | None = None  # dependency.database | dependency.cache | dependency.queue, when the evidence says

    @property
    def faults(self) -> list[Signal]:
        return [s for s in self.signals if s.fault]

    def evidence(self) -> list[Signal]:
        """Its signals, strongest first (the records that show it)."""
        return sorted(self.faults, key=lambda s: (-s.strength, s.onset or math.inf))


def _onset(signals: list[Signal]) -> float | None:
    """The first point of sustained deviation. Kubernetes only dates what happened last (a container's last
    termination, an event's first report after several): a service seen only there has no known onset."""
    times = [s.onset for s in signals if s.fault and s.onset is not None and s.source != "kube"]
    return min(times) if times else None


def _strength(signals: list[Signal]) -> float:
    faults = sorted((s.strength for s in signals if s.fault), reverse=True)
    return sum(w * s for w, s in zip((1.0, 0.5, 0.25, 0.15, 0.1), faults))


def candidates_of(signals: list[Signal]) -> dict[str, Candidate]:
    by_entity: dict[str, list[Signal]] = {}
    for signal in signals:
        by_entity.setdefault(signal.entity, []).append(signal)
    return {entity: Candidate(entity, sigs, _onset(sigs), _strength(sigs))
            for entity, sigs in by_entity.items() if any(s.fault for s in sigs)}


def _not_later(dependency: Candidate, candidate: Candidate, tolerance: float = TOLERANCE_S) -> bool:
    if dependency.onset is None or candidate.onset is None:
        return True  # an unknown onset cannot be later
    return dependency.onset <= candidate.onset + tolerance


def _shares_resource(candidate: Candidate, host: Candidate) -> bool:
    """Both short of the same resource, each by its own series (a node's pressure placed on a workload is
    the node's, not the workload's)."""
    def own(c: Candidate) -> set[str]:
        return {s.kind for s in c.faults if s.source != "placed"} & {"cpu", "memory", "disk"}
    return bool(own(candidate) & own(host))


_STARVED = re.compile(r"pressure|throttl|wait|steal|starv|stall", re.I)
# CFS throttling (cAdvisor's ``container_cpu_cfs_throttled_*``) is a container held at its own CPU quota, its
# limit: no neighbour took that CPU, so it is the container's own fault, not a node's.
_OWN_QUOTA = re.compile(r"cfs|quota", re.I)


def starved(candidate: Candidate) -> bool:
    """Short of CPU or memory it did not take itself: pressure, throttling, steal (not its own usage, nor
    throttling at its own quota)."""
    return any(s.source in ("metric", "placed") and s.kind in ("cpu", "memory") and _STARVED.search(s.text)
               and not _OWN_QUOTA.search(s.text) for s in candidate.faults)


# A gauge of messages waiting to be consumed: RabbitMQ's ``rabbitmq_queue_messages_ready`` and ``_unacked``,
# Kafka's ``kafka_consumergroup_lag``, NATS's ``nats_consumer_num_pending``, SQS's
# ``approximate_number_of_messages_visible``, a Redis stream's length. Not a server's own request queue.
_BACKLOG = re.compile(r"(?=.*(?:message|msgs|consumer|stream|topic|partition))"
                      r"(?=.*(?:ready|unack|visible|pending|waiting|lag|backlog|depth|length|outstanding))", re.I)


def backlog_only(candidate: Candidate) -> bool:
    """All it shows is messages piling up for its consumers to take (a broker's queue, a consumer group's lag):
    what drains them is its clients, not what it calls."""
    metrics = [s for s in candidate.faults if s.source == "metric"]
    return bool(metrics) and all(s.source in ("metric", "alert") for s in candidate.faults) \
        and all(s.kind == "saturation" and _BACKLOG.match(s.text) for s in metrics)


def busy_only(candidate: Candidate) -> bool:
    """Busier, not broken: all it shows is its own CPU use rising, below any ceiling it has, with nothing
    slower, failing, throttled or starved. Load alone (a traffic spike, a batch run) is not a fault."""
    return all(s.source == "metric" and s.kind == "cpu" and "ceiling" not in s.detail
               and not _STARVED.search(s.text) for s in candidate.faults)


def _slowed_by_node(workload: Candidate, node: Candidate, graph: DependencyGraph) -> bool:
    """A node short of memory or CPU slows every workload placed on it: a workload that shows only symptoms
    there (slower, failing, queueing) has nothing of its own that a node could not cause."""
    return node.service in graph.nodes and workload.service not in graph.nodes and starved(node) \
        and symptom_only(workload)


def only_waited_for(dependency: Candidate) -> bool:
    """Examined and deviating in nothing of its own: all it has is callers' lines that they waited for it.
    A refusal or a bad certificate names a fault of the peer; a wait does not."""
    faults = dependency.faults
    return bool(faults) and all(s.source == "named" and s.kind == "network.timeout" for s in faults)


def explain(candidates: dict[str, Candidate], graph: DependencyGraph) -> None:
    """Set each candidate's ``explained_by``: the anomalous dependency that accounts for it."""
    for candidate in candidates.values():
        options = []
        for edge in graph.dependencies(candidate.service):
            dependency = candidates.get(edge.callee)
            if dependency is None or not _not_later(dependency, candidate,
                                                    NAMED_TOLERANCE_S if edge.via == "log" else TOLERANCE_S):
                continue
            if edge.via == "placement" and not _shares_resource(candidate, dependency) \
                    and not _slowed_by_node(candidate, dependency, graph):
                continue  # a node explains starvation of what it is short of, not an application's own errors
            if edge.via != "placement" and busy_only(dependency):
                continue  # a dependency that is only busier serves its callers as before
            if only_waited_for(dependency) and any(s.kind == "saturation" for s in candidate.faults):
                continue  # callers that waited on it, while it shows nothing itself: the caller's own pool ran dry
            options.append((dependency.onset if dependency.onset is not None else math.inf,
                            -dependency.strength, dependency.service, edge))
        if not options:
            options = _through_silent(candidate, candidates, graph)
        if options:
            options.sort(key=lambda o: (o[0], o[1], o[2]))
            candidate.explained_by, candidate.edge = options[0][2], options[0][3]
    # Two candidates that explain each other began together: keep the one that is not only a symptom.
    for candidate in candidates.values():
        other = candidates.get(candidate.explained_by or "")
        if other is not None and other.explained_by == candidate.service:
            keep = _root_of_pair(candidate, other, graph.nodes)
            keep.explained_by, keep.edge = None, None


def _through_silent(candidate: Candidate, candidates: dict[str, Candidate], graph: DependencyGraph) -> list:
    """A dependency that shows nothing itself but whose own evidence (lines, caller/callee labels, traces)
    links it to an anomalous dependency passes that trouble on: the candidate's options through it (the
    edge kept is the candidate's own)."""
    options = []
    for edge in graph.dependencies(candidate.service):
        if edge.via == "placement" or edge.callee in candidates or edge.callee in graph.nodes:
            continue
        for onward in graph.dependencies(edge.callee):
            dependency = candidates.get(onward.callee)
            if dependency is None or onward.via == "placement" or dependency.service == candidate.service \
                    or busy_only(dependency) or not _not_later(dependency, candidate, TOLERANCE_S):
                continue
            options.append((dependency.onset if dependency.onset is not None else math.inf,
                            -dependency.strength, dependency.service, edge))
    return options


_SYMPTOM_KINDS = {"latency", "errors", "saturation", "traffic", "alert", "restart", "stopped", "BackOff", "Unhealthy"}


def symptom_only(candidate: Candidate) -> bool:
    """Nothing of its own but what any trouble upstream would show (its node's pressure placed on it is not its own)."""
    return all(s.kind in _SYMPTOM_KINDS or s.source == "placed" or (s.source == "log" and not s.detail.get("new"))
               for s in candidate.faults)


def _root_of_pair(a: Candidate, b: Candidate, nodes: set[str]) -> Candidate:
    for blamed, blamer in ((a, b), (b, a)):  # the one whose errors name the other as the faulty peer
        if any(s.source == "named" and s.detail.get("caller") == blamer.service for s in blamed.signals):
            return blamed
    if (a.service in nodes) != (b.service in nodes):
        return b if a.service in nodes else a  # a node is short of what a workload on it takes
    if a.onset is not None and b.onset is not None and abs(a.onset - b.onset) > 1:
        return a if a.onset < b.onset else b
    if symptom_only(a) != symptom_only(b):
        return b if symptom_only(a) else a
    return a if (a.strength, a.service) >= (b.strength, b.service) else b


def root_of(service: str, candidates: dict[str, Candidate]) -> str:
    seen = {service}
    while candidates[service].explained_by and candidates[service].explained_by not in seen:
        service = candidates[service].explained_by
        seen.add(service)
    return service


def rank(candidates: dict[str, Candidate]) -> list[Candidate]:
    """Roots first (by onset, then symptoms explained, then strength), then the explained ones."""
    for candidate in candidates.values():
        root = root_of(candidate.service, candidates)
        if root != candidate.service:
            candidates[root].explains.append(candidate.service)
    roots = [c for c in candidates.values() if c.explained_by is None]
    rest = [c for c in candidates.values() if c.explained_by is not None]

    def key(c: Candidate):
        onset = c.onset if c.onset is not None else math.inf
        return (round(onset / TOLERANCE_S) if onset != math.inf else math.inf, -len(c.explains), -c.strength,
                c.service)

    return sorted(roots, key=key) + sorted(rest, key=key)


_TOKEN = re.compile(r"[a-z][a-z0-9]{3,}")
_COMMON = frozenset({"service", "error", "errors", "request", "requests", "time", "seconds", "total", "count", "http",
                     "server", "client", "failed", "with", "from", "that", "this", "after", "ratio", "rate", "bytes",
                     "level", "info", "warn", "applied", "change", "config", "configuration", "version", "deploy",
                     "rollout", "push", "enabled", "disabled", "value", "size", "the", "was", "now", "every", "image",
                     "registry", "internal", "revision", "started", "finished", "pulled", "replicas"})


def _tokens(text: str, names) -> set[str]:
    for name in names:
        text = text.replace(name, " ")
    return set(_TOKEN.findall(text.lower().replace("_", " ").replace(".", " "))) - _COMMON


def _touches(change: Signal, candidate: Candidate, names) -> bool:
    """Whether a change names something that deviates on the candidate (a setting, a feature, a table)."""
    said = _tokens(str(change.detail.get("what") or change.text), names)
    shown = set()
    for signal in candidate.faults:
        if signal.source in ("metric", "log"):
            shown |= _tokens(signal.text + " " + " ".join(r.excerpt for r in signal.refs[:1]), names)
    return bool(said & shown)


def _dated(candidate: Candidate) -> tuple[float | None, bool]:
    """When the candidate's fault began, for placing changes before it, and whether all it shows is a
    container crashing or failing its probes. Kubernetes alone gives no onset (``_onset``), but its first
    event dates the fault no later than that: a change before it came first. Such a crash or probe failure
    says how the container fails ("connection refused" on its own port), not why: a change on it just
    before is the why."""
    if candidate.onset is not None:
        return candidate.onset, False
    kube = [s.onset for s in candidate.faults if s.source == "kube" and s.onset is not None]
    if not kube or any(s.source != "kube" for s in candidate.faults):
        return None, False
    return min(kube), True


def _one_per_series_name(signals: list[Signal]) -> list[Signal]:
    """The same metric of several pods (or of several label sets) is one piece of evidence, not one per
    series: a workload with more replicas does not make its kind more certain."""
    best: dict[tuple[str, str], Signal] = {}
    out = []
    for signal in signals:
        if signal.source != "metric":
            out.append(signal)
            continue
        key = (signal.kind, signal.text)
        if key not in best or signal.strength > best[key].strength:
            best[key] = signal
    return out + list(best.values())


# A server's own connection limit, as its callers are told of it (not a caller's client pool running dry).
_SERVER_LIMIT = re.compile(r"too many (?:connections|clients)|max_connections|remaining connection slots|"
                           r"connection limit|sorry, too many", re.I)


def _relayed_limit(candidate: Candidate, votes: Counter, role: str | None) -> str | None:
    """A server's connection limit in the lines of a service that is no datastore (no ``role``) is the server's
    answer, relayed ("FATAL: remaining connection slots are reserved", "Too many connections"): its client pool
    runs dry because the server refuses it more, so the fault is the database's, whichever that is. Returns the
    role."""
    if role is None and any(s.source == "log" and _SERVER_LIMIT.search(s.text) for s in candidate.faults):
        votes["dependency.database"] += votes.pop("resource.pool", 0.0)
    return role


# What a datastore, cache or queue shows when it is the one failing: its connections run out, its memory
# reaches the ceiling it was given (a cache's maxmemory, a broker's watermark) and it refuses writes or blocks
# publishers. Named by its role, the dependency that failed; the memory series stays its evidence.
_ROLE_SHOWS = frozenset({"resource.pool", "resource.memory"})
# A role the evidence declares (an ExternalName Service, a scheme or exporter that names the datastore) is worth
# more than one passing word: with no other vote it still names the kind of what failed there.
ROLE_VOTE = 1.5


def cause_kind(candidate: Candidate, context: list[Signal], caller_lines: list[str], texts: list[str],
               names: set[str] = frozenset(), own_lines: list[str] = (), external: set[str] = frozenset()) -> None:
    """The candidate's kind: votes of its own signals, of the lines callers wrote about it, of changes on it
    shortly before its onset, and its dependency role when the votes only say "slow" or "refused" and its own
    signals say nothing more precise."""
    votes: Counter = Counter()
    for signal in _one_per_series_name(candidate.faults):
        votes.update(signal_votes(signal, names))
    # What its own signals say more precisely than "slow" or "refused" (dropped packets, a full disk).
    observed = {k for k, v in votes.items() if v >= 1.0 and k not in GENERIC | _ROLE_SHOWS
                and not k.startswith("dependency.")}
    called: Counter = Counter()
    for text in caller_lines:  # what its callers say about it
        said = word_votes(text, names)
        if not _SERVER_LIMIT.search(text):
            said.pop("resource.pool", None)  # the caller's own client pool, filled while it waited for this one
        called.update({k: 0.5 * v for k, v in said.items()})
    if observed:  # callers call it by what it is ("mysql: dial tcp 10.0.0.5:3306"); what it shows itself says why
        called = Counter({k: v for k, v in called.items() if not k.startswith("dependency.")})
    votes.update(called)
    for text in own_lines:  # its own error shapes, also those with no rate change (a job that only fails)
        votes.update({k: 0.75 * v for k, v in own_words(text, names).items()})
    onset, crash_only = _dated(candidate)
    said = bool(votes)  # whether its own records (or its callers') already say what kind of fault it is
    for signal in context:
        if signal.source == "change" and signal.entity == candidate.service and onset is not None \
                and signal.onset is not None and onset - 3600 <= signal.onset <= onset + TOLERANCE_S:
            change_votes = signal_votes(signal, names)
            typed = any(s.source == "kube" and typed_reason(s.kind, s.text) for s in candidate.faults)
            if (crash_only or _touches(signal, candidate, names)) and not typed:
                # The change touched what deviates (the setting of the cache whose misses rose): it is the
                # cause, and what deviates is how it shows. A typed Kubernetes reason still names its own kind.
                top = max(votes.values(), default=0.0)
                votes.update({k: v + top + 0.5 for k, v in change_votes.items()})
            else:
                # A change just before counts fully where nothing else says what kind of fault it is.
                weight = 1.5 if symptom_only(candidate) or not said else 0.5
                votes.update({k: v * weight for k, v in change_votes.items()})
    own = [s.text for s in candidate.signals if s.source == "metric"]
    role = candidate.role = _relayed_limit(candidate, votes, role_of(candidate.service, texts, own, external))
    if role and observed:
        # Callers call it by what it is ("redis", "the cache"); what it shows itself says what went wrong.
        votes.pop(role, None)
    elif role and (not votes or max(votes, key=votes.get) in GENERIC | _ROLE_SHOWS):
        votes[role] += max(votes.values(), default=0) + ROLE_VOTE
    elif role and max(votes, key=votes.get) == role:
        # What it says of itself ("lock wait timeout", "slow query") and what the evidence declares it to be
        # (its exporter, its scheme) agree: the datastore itself is the dependency that failed.
        votes[role] += ROLE_VOTE
    specific = [k for k in votes if k not in GENERIC]
    if specific and max(votes[k] for k in specific) >= 1.0:
        # "Timed out" and "refused" are how most faults look from a caller: a specific kind the same
        # records show (a pool, a certificate, a quota) says more.
        for kind in GENERIC & set(votes):
            votes[kind] *= 0.6
    candidate.kind_votes = votes
    candidate.kind = max(sorted(votes), key=lambda k: votes[k]) if votes else None
    if candidate.kind in GENERIC and observed & set(votes):
        # However many callers say "refused" or "timed out", what it measured on itself says why.
        candidate.kind = max(sorted(observed & set(votes)), key=lambda k: votes[k])
