"""The offline analyser on top of the localiser: where to look next, and the claims of what it found.

The decision is the localiser's (``diagnosis.localisation``): candidates from signals, explained away
along the dependency graph the evidence names, and an honest outcome. This module only turns it into
the analyser's vocabulary: follow-up tool calls along the graph, and claims whose excerpts are the
records the localiser read.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterable, Iterator, Mapping

from diagnosis.localisation.below import service_in_address
from diagnosis.localisation.kinds import GENERIC, kind_named
from diagnosis.localisation.outcome import Localisation, localise
from diagnosis.localisation.records import Ref
from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID
from diagnosis.llm.offline.claims import alert_claims, healthy_claims, runbook_claims, service_claims
from diagnosis.llm.offline.findings import Change, NoTelemetry, RootCause
from diagnosis.llm.offline.lexicon import (
    CAUSE_BY_KEY, KNOWLEDGE_TOP_K, LOG_LIMIT, MAX_FOLLOW_UP_SERVICES, _canonical, _iso, _short, _suspicious,
    question_language,
)

MIN_EXCERPT = 12  # the Gatekeeper's floor: shorter values are not cited
MAX_ROOT_BINDINGS = 8

REASONS = {
    "not_separated": "two candidates began together and the evidence does not separate them",
    "dependency_not_examined": "its errors name a dependency whose own telemetry was not examined",
    "address_not_resolved": "its errors name an address that no examined service answers at",
    "kind_unknown": "the evidence shows where it broke but not what kind of fault it is",
    "kind_ambiguous": "the evidence fits more than one kind of fault equally well",
    "dependency_changed": "a dependency it calls changed just before it broke, without deviating itself",
    "caller_changed": "a caller whose requests it fails changed just before, and nothing of its own deviates",
    "cycle": "the anomalous services explain each other and none began first",
    "dependency_not_identified": "its errors blame a dependency that none of the examined records names",
    "no_baseline": "its error lines have too little history before them to tell an incident from routine",
    "node_not_examined": "it is short of a resource, and the node it runs on was not examined",
    "node_hosts_several": "the node it runs on is short of memory or CPU, and several workloads on it slowed down",
    "state_not_examined": "it went away, and its Kubernetes state, which says why, was not examined",
    "metrics_not_examined": "only its callers' lines show it, and its own metrics were not examined",
    "resolver_not_examined": "its name lookups failed because the resolver did not answer; the cluster's DNS server "
                             "and the pod's resolver setting were not examined",
    "dependency_quiet": "its callers say they waited for it, while its own metrics deviate in nothing",
}


def successful(results: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The results that succeeded, without the log lines that read like instructions to an AI: they are
    untrusted data, reported in the open questions, never evidence of a fault."""
    kept = []
    for item in results:
        if item.get("status", "SUCCESS") != "SUCCESS":
            continue
        result = item.get("result")
        if item.get("tool_name") == "query_logs" and isinstance(result, Mapping):
            records = result.get("records") or []
            clean = [r for r in records if not (isinstance(r, Mapping) and _suspicious(str(r.get("message") or "")))]
            if len(clean) != len(records):
                item = {**item, "result": {**result, "records": clean}}
        kept.append(item)
    return kept


class LocalisationMemo:
    """The localisations of one model's run, keyed by the evidence they read: the invocation ids and
    statuses of the tool results, in order, a digest of their content (a model reused with other results
    under the same ids localises again) and the subject. The role that plans the next queries and the role
    that writes the claims then share one localisation. Results without an invocation id are not
    remembered. Bounded: a run localises a handful of distinct evidence sets."""

    SIZE = 8

    def __init__(self) -> None:
        self._found: OrderedDict[tuple, Localisation] = OrderedDict()

    @staticmethod
    def key(results: list[Mapping[str, Any]], subject: list[str]) -> tuple | None:
        ids = tuple((r.get("invocation_id"), r.get("status", "SUCCESS")) for r in results)
        if any(not isinstance(i, str) or not i for i, _status in ids):
            return None
        try:  # a fingerprint of the content only (never loaded): lossless, so the same bytes are the same data
            content = pickle.dumps(results, protocol=5)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None
        return ids, hashlib.blake2b(content, digest_size=16).digest(), tuple(subject)

    def localise(self, results: Iterable[Mapping[str, Any]], subject: list[str]) -> Localisation:
        results = list(results)
        key = self.key(results, list(subject))
        if key is None:
            return localise(successful(results), subject)
        if key not in self._found:
            self._found[key] = localise(successful(results), subject)
            while len(self._found) > self.SIZE:
                self._found.popitem(last=False)
        self._found.move_to_end(key)
        return self._found[key]


# The memo of the model whose request is being answered (set by `remembering`, per request, never shared).
_ACTIVE: ContextVar[LocalisationMemo | None] = ContextVar("offline_localisations", default=None)


@contextmanager
def remembering(memo: LocalisationMemo) -> Iterator[None]:
    """Within the block, `localise_results` reads through `memo`."""
    token = _ACTIVE.set(memo)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def localise_results(results: Iterable[Mapping[str, Any]], subject: list[str]) -> Localisation:
    """The one entry into the localiser: successful results only, suspicious log lines left out; within a
    model's request (`remembering`), each distinct evidence is localised once per run."""
    memo = _ACTIVE.get()
    if memo is not None:
        return memo.localise(results, subject)
    return localise(successful(results), subject)


def binding(ref: Ref) -> dict[str, str] | None:
    if len(ref.excerpt.strip()) < MIN_EXCERPT:
        return None
    return {"source_invocation_id": ref.invocation_id, "tool_name": ref.tool, "raw_path": ref.raw_path,
            "evidence_excerpt": ref.excerpt}


def kind_label(kind: str | None) -> str:
    found = CAUSE_KIND_BY_ID.get(kind or "")
    return found.label_en if found else "unclassified failure"


def root_claim(loc: Localisation) -> tuple[RootCause, list[dict[str, str]]]:
    """The root-cause finding and its citations: the root's own strongest records first, then the line of
    the asked service that names it (the path), then the change it began after."""
    top = loc.top()
    assert top is not None and loc.root is not None
    own: list[Ref] = []
    for signal in top.evidence():
        own += signal.refs
    changes = loc.changes_before()
    # The records of the path and of the change keep their places: the statement names them.
    kept = [r for edge in loc.path for r in edge.refs[:1]] + [r for c in changes[-1:] for r in c.refs]
    # A root seen only through its callers' lines (which may name it by an address), or through the series of
    # the node it runs on (labelled by the node's address), also cites the Service that declares it: the record
    # that links the address to its name.
    if loc.declared is not None and all(s.source in ("named", "placed") or (
            s.source == "metric" and not any(top.service in r.excerpt for r in s.refs)) for s in top.evidence()):
        kept.append(loc.declared)
    kept_bindings = [b for b in (binding(r) for r in dict.fromkeys(kept)) if b][:MAX_ROOT_BINDINGS // 2]
    own_bindings = [b for b in (binding(r) for r in dict.fromkeys(own) if r not in kept) if b]
    bindings = own_bindings[:MAX_ROOT_BINDINGS - len(kept_bindings)] + kept_bindings
    quoted = next((s.refs[0].excerpt for s in top.evidence() if s.source in ("log", "kube") and s.refs), "")
    affected = [s for s in loc.subject if s != loc.root]
    trigger = _short(changes[-1].refs[0].excerpt, 140) if changes else ""
    # Question focus: the asked service is affected because of the root, through the edges that link them
    # (their records are cited above).
    asked = loc.path[0].caller if loc.path else ""
    chain = " → ".join([asked, *(e.callee for e in loc.path)]) if loc.path else ""
    finding = RootCause(loc.root, loc.kind or "unclassified", kind_label(loc.kind), ", ".join(affected), trigger,
                        _short(" ".join(quoted.split()), 160), asked=asked, path=chain)
    return finding, bindings


def change_claims(loc: Localisation) -> list[tuple[Change, dict[str, str]]]:
    out = []
    for signal in loc.changes_before():
        b = binding(signal.refs[0]) if signal.refs else None
        if b:
            out.append((Change(signal.entity, _iso(signal.onset), f"\"{_short(signal.refs[0].excerpt, 160)}\"."), b))
    return out


def undetermined_summary(loc: Localisation) -> str:
    top = loc.top()
    reason = REASONS.get(loc.reason, loc.reason or "the evidence does not settle it")
    text = "Undetermined"
    if top is not None:
        text += f": the first deviation is on {top.service}, but {reason}"
    checks = [f"{c.tool}({', '.join(f'{k}={v}' for k, v in c.arguments.items())})" for c in loc.next_checks[:3]]
    if checks:
        text += f". Next: {'; '.join(checks)}"
    return text + "."


def service_queries(service: str, offered: set[str], calls: set[str]) -> list[tuple[str, dict]]:
    """A service's logs and metrics, each unless already asked (``calls``: canonical calls) or not offered."""
    wanted = [("query_logs", {"service": service, "limit": LOG_LIMIT}), ("query_metrics", {"service": service})]
    return [(tool, args) for tool, args in wanted if tool in offered and _canonical(tool, args) not in calls]


def follow_ups(loc: Localisation, calls: set[str], offered: set[str], limit_services: int) -> list[tuple[str, dict]]:
    """The next queries: the cluster's address book when their error lines name an IP, the dependencies the
    evidence names for the leading candidates and the asked services that no query has examined yet, then
    the localiser's own next checks."""
    services: list[str] = []
    leading = [c.service for c in loc.candidates[:3]] + list(loc.subject)
    for check in loc.next_checks:
        service = check.arguments.get("service")
        if isinstance(service, str) and service not in services:
            services.append(service)
    for edge in loc.edges_from(leading):
        if edge.callee not in services and edge.callee not in loc.graph.nodes:
            services.append(edge.callee)
    for service in leading:
        for address, _ref in loc.graph.unresolved.get(service, []):
            name = service_in_address(address)
            if name and name not in services:
                services.append(name)
    wanted: list[tuple[str, dict]] = []
    # An IP address names no service: the cluster's Services (their cluster IPs and endpoint pod IPs) do, and
    # the next round follows the service it resolves to.
    # So does a host on the public internet that the cluster declares as its own (an ExternalName Service), and
    # a service that went away: its Kubernetes state says why.
    book = ("query_kubernetes", {"kind": "service"})
    if (book[0] in offered and _canonical(*book) not in calls
            and (any(service_in_address(a) is None for s in leading for a, _ref in loc.graph.unresolved.get(s, []))
                 or any((c.tool, c.arguments) == book for c in loc.next_checks))):
        wanted.append(book)
    wanted += [(c.tool, dict(c.arguments)) for c in loc.next_checks
               if c.tool == "query_kubernetes" and c.arguments.get("kind") == "deployment" and c.tool in offered
               and _canonical(c.tool, c.arguments) not in calls]
    for service in services:
        if len({a["service"] for _t, a in wanted if "service" in a}) >= limit_services:
            break
        wanted += service_queries(service, offered, calls)
    # A node's series, by label, and the pod whose hostIP is the node's address (a Service lookup by name is
    # left as advice): first when the localiser asks for them first (a starved top), else once no lead is left.
    nodes = [(c.tool, dict(c.arguments)) for c in loc.next_checks
             if ((c.tool == "query_metrics" and "query" in c.arguments)
                 or (c.tool == "query_kubernetes" and c.arguments.get("kind") == "pod"))
             and c.tool in offered and _canonical(c.tool, c.arguments) not in calls]
    wanted += _traced(loc, calls, offered)
    first = bool(loc.next_checks) and loc.next_checks[0].tool == "query_metrics" and "query" in loc.next_checks[0].arguments
    return nodes + wanted if first else wanted or nodes


def _traced(loc: Localisation, calls: set[str], offered: set[str]) -> list[tuple[str, dict]]:
    """The traces of an asked service that fails or slows, explained by nothing, while nothing read so far says
    what it calls or what kind of fault it is: its spans name its callees, with their errors and durations."""
    if "query_traces" not in offered:
        return []
    for candidate in loc.candidates:
        args = {"service": candidate.service}
        said = candidate.kind not in GENERIC and kind_named(candidate.kind, candidate.kind_votes)
        if (candidate.service in loc.subject and candidate.explained_by is None
                and not said and not any(service_in_address(a) for a, _ref in loc.graph.unresolved.get(candidate.service, []))
                and not any(e.via != "placement" for e in loc.graph.dependencies(candidate.service))
                and _canonical("query_traces", args) not in calls):
            return [("query_traces", args)]
    return []


def next_calls(obs, results: list, named: list[str], offered: set[str], question: str) -> list[tuple[str, dict]]:
    """Where the evidence points: the dependencies its own records name (``follow_ups``), the service the
    alerts are about when nothing names one; once no lead is left, the Kubernetes state of the leading
    candidate and runbooks for the kind of fault."""
    loc = localise_results(results, named)
    calls = follow_ups(loc, obs.calls, offered, MAX_FOLLOW_UP_SERVICES)
    for service in named:  # an asked service the first round could not query by name (read from the evidence since)
        if service not in obs.queried:
            calls[:0] = [q for q in service_queries(service, offered, obs.calls) if q not in calls]
    # When the asked service's telemetry shows nothing (or there is none), its own Kubernetes state comes first:
    # a container that restarts or never starts may leave no line and no series. Then the services the alerts
    # are about: where to look when no service is named, and when the question states a symptom that the asked
    # services' telemetry does not show at all: the firing service nobody examined yet (a caller's alert is often
    # the first sign of a root whose own telemetry shows it only faintly). A question that states no symptom
    # ("is X healthy?"), or one whose services do deviate, is not answered with another alert.
    unexplained = loc.outcome == "nothing_wrong" and obs.symptom.stated
    quiet = loc.outcome in ("nothing_wrong", "no_data")
    own_state = _state_call(named[0], offered, obs.calls) if quiet and named else None
    if own_state is not None:
        calls.append(own_state)
    elif (not named and not obs.queried) or unexplained:
        for service in [s for s in obs.alerting_services(question) if s not in obs.queried][:1]:
            calls += [q for q in service_queries(service, offered, obs.calls) if q not in calls]  # each call once
    runbooks = _runbooks_for_kind(loc, obs, named, offered, question)
    if calls:  # the leads first: the leading candidate's Kubernetes state waits for the chain's end, and so do the
        # runbooks, unless the fault is decided: its advice then comes first (a run whose budget ends on the chain
        # still has it)
        return [runbooks, *calls] if runbooks is not None and loc.decisive else calls
    top = loc.top()
    state = _state_call(top.service, offered, obs.calls) if top is not None else None
    return [call for call in (state, runbooks) if call is not None]


def _state_call(service: str, offered: set[str], calls: set[str]) -> tuple[str, dict] | None:
    """A workload's Kubernetes state (its pods, restarts, events), unless read already; a node has none."""
    args = {"kind": "deployment", "name": service}
    if service.startswith("node:") or "query_kubernetes" not in offered or _canonical("query_kubernetes", args) in calls:
        return None
    return "query_kubernetes", args


def _runbooks_for_kind(loc: Localisation, obs, named: list[str], offered: set[str], question: str):
    """The runbook lookup for the kind of fault found (its advice), unless made already or two were made."""
    lookups = sum(1 for call in obs.calls if call.startswith("lookup_knowledge:"))
    if not loc.kind or lookups >= 2 or "lookup_knowledge" not in offered:
        return None
    action = "处置 处理 建议" if question_language(question) == "zh" else "remediation fix"
    terms = " ".join(dict.fromkeys([loc.root or (named[:1] or [""])[0], kind_label(loc.kind), action])).strip()
    args = {"query": terms, "top_k": KNOWLEDGE_TOP_K + 2}
    return None if _canonical("lookup_knowledge", args) in obs.calls else ("lookup_knowledge", args)


def build_claims(obs, loc: Localisation, book, language: str, stated_symptom: bool) -> str:
    """The claims of a localisation, most important first; returns the summary."""
    with_data = [s for s in loc.subject if obs.has(s)] or [s for s in obs.queried if obs.has(s)]
    if loc.outcome == "nothing_wrong":
        firing = [a.service for a in obs.alerts if a.alarming]
        if firing and (stated_symptom or set(firing) & set(loc.subject)):
            # A symptom stated and an alert firing, or an alert on the asked service itself: trouble that the
            # telemetry read here does not show is undetermined, never healthy. Without either, quiet telemetry
            # is the answer to "why is it failing?" too.
            healthy_claims(obs, with_data, book, conclude=False)
            alert_claims(obs, firing, book)
            return (f"Alerts are firing, but the telemetry of this run shows no anomaly of "
                    f"{', '.join(with_data) or 'the service'} that explains them: undetermined.")
        return healthy_claims(obs, with_data, book)
    if loc.outcome == "no_data":
        for service in loc.without_data:  # the empty answers themselves are the evidence
            answers = obs.unanswered.get(service, [])
            views = " and ".join(dict.fromkeys("log" if b["tool_name"] == "query_logs" else "metric" for b in answers))
            book.add(NoTelemetry(service, f"its {views} queries returned nothing, so nothing can be said about it, "
                                          "and no other service is blamed in its place."), answers)
        for service in obs.queried:
            service_claims(obs.profiles.get(service), book)
        return (f"No telemetry was found for {', '.join(loc.without_data)}: nothing could be diagnosed about it, and "
                "no other service is blamed in its place.")
    if loc.outcome == "undetermined":
        services = [c.service for c in loc.candidates[:3]] or with_data
        for service in services:
            service_claims(obs.profiles.get(service), book)
        alert_claims(obs, services, book)
        return undetermined_summary(loc)
    finding, bindings = root_claim(loc)
    book.add(finding, bindings)
    order = [loc.root, *loc.subject, *(c.service for c in loc.candidates[:4])]
    for service in dict.fromkeys(s for s in order if s):
        service_claims(obs.profiles.get(service), book)
    for change, b in change_claims(loc):
        book.add(change, [b], reuse=False)
    alert_claims(obs, [s for s in order if s], book)
    cause = _lexicon_cause(loc.kind)
    if cause is not None:
        runbook_claims(obs, loc.root or "", list(loc.subject), cause, book, language)
    affected = [s for s in loc.subject if s != loc.root]
    path = " -> ".join([loc.path[0].caller, *(e.callee for e in loc.path)]) if loc.path else ""
    text = f"Root cause: {loc.root} — {kind_label(loc.kind)}"
    if affected:
        text += f"; {', '.join(affected)} is affected through its dependency on it" + (f" ({path})" if path else "")
    return text + "."


# The lexicon's cause keys by the kind of the closed taxonomy they describe: which runbook lines are advice
# for the kind the localiser named (the lexicon only picks advice here; it never decides).
CAUSE_KIND_OF = {
    "db_connection_pool_exhausted": "resource.pool", "worker_pool_exhausted": "resource.pool",
    "memory_leak_oom": "resource.memory", "gc_pauses": "resource.memory", "oom_killed": "resource.memory",
    "disk_full": "resource.disk", "inode_exhaustion": "resource.disk",
    "noisy_neighbour_cpu": "resource.cpu", "cpu_throttling": "resource.cpu",
    "slow_downstream_dependency": "dependency.database", "db_replication_lag": "dependency.database",
    "db_deadlock": "dependency.database", "db_lock_wait": "dependency.database",
    "db_too_many_connections": "dependency.database",
    "cache_memory_limit": "dependency.cache", "cache_disabled": "dependency.cache",
    "consumer_lag_rebalance": "dependency.queue", "upstream_breaking_change": "change.deploy",
    "missing_config": "change.config", "invalid_config": "change.config", "config_change": "change.config",
    "credentials_rejected": "change.secret", "image_pull": "change.image", "failed_scheduling": "scheduling.pending",
    "dns_failure": "network.dns", "tls_certificate_expired": "network.tls", "connection_refused": "network.refused",
    "upstream_rate_limited": "capacity.rate_limit",
}


def _lexicon_cause(kind: str | None):
    """The runbook vocabulary of a kind, used only to pick which runbook lines are advice for it."""
    key = next((k for k, v in CAUSE_KIND_OF.items() if v == kind), None)
    return CAUSE_BY_KEY.get(key) if key else None
