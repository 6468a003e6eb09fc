# size: one reader per tool result (logs, metrics, alerts, Kubernetes, traces, changes) and the naming conventions they share.
"""Tool results read into typed evidence records, each keeping where it came from.

The localiser reads what the recorded tools returned (``query_logs``, ``query_metrics``,
``query_alerts``, ``query_kubernetes``, ``query_traces``, ``query_changes``), whatever backend
served them. Every record keeps a ``Ref``: the invocation, the JSON path of the value and an excerpt
of it, so that anything the localiser concludes can be cited from the raw records.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from collections.abc import Iterable, Mapping  # the ABC itself: ``typing.Mapping`` checks cost 5x as much
from typing import Any

from diagnosis.localisation.levels import level_of


@dataclass(frozen=True, slots=True)
class Ref:
    """Where a record sits: the invocation, the JSON path of the value, and that value (an excerpt)."""

    invocation_id: str
    tool: str
    raw_path: str
    excerpt: str


def ref_of(invocation_id: str, tool: str, raw_path: str, excerpt: str) -> Ref:
    """``Ref(...)`` for the thousands a run reads: a frozen dataclass sets each field through
    ``object.__setattr__``; its slots' own setters give the same record at 60 % of the cost."""
    ref = _NEW(Ref)
    _SET_INVOCATION(ref, invocation_id)
    _SET_TOOL(ref, tool)
    _SET_PATH(ref, raw_path)
    _SET_EXCERPT(ref, excerpt)
    return ref


_NEW = object.__new__
_SET_INVOCATION, _SET_TOOL = Ref.invocation_id.__set__, Ref.tool.__set__  # type: ignore[attr-defined]
_SET_PATH, _SET_EXCERPT = Ref.raw_path.__set__, Ref.excerpt.__set__  # type: ignore[attr-defined]


@dataclass(slots=True)
class LogRecord:
    ref: Ref
    ts: float
    service: str
    level: str  # FATAL ERROR WARN INFO DEBUG
    message: str


@dataclass(slots=True)
class MetricSeries:
    ref: Ref
    labels: dict[str, str]
    times: list[float]
    values: list[float]

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")


@dataclass
class AlertRecord:
    ref: Ref
    name: str
    service: str
    state: str
    severity: str
    since: float | None


@dataclass
class KubeFact:
    """A typed Kubernetes fact: a container state or an event, with its reason and time."""

    ref: Ref
    service: str
    reason: str
    ts: float | None
    message: str
    warning: bool
    last: float | None = None  # an event's last report (its ``ts`` is the first)


@dataclass
class ChangeRecord:
    ref: Ref
    service: str
    ts: float | None
    kind: str
    what: str


@dataclass
class TraceCall:
    """One call between two services seen in a trace: a span whose parent is in another service."""

    ref: Ref
    caller: str
    callee: str
    ts: float
    duration_ms: float
    error: bool


@dataclass
class Placement:
    """A pod of a workload, its node and its IP (from Kubernetes)."""

    service: str
    pod: str
    node: str | None
    ip: str | None


# A field list of lists, alike in shape to the composer's AnswerPlan: no logic to share.
@dataclass
class Evidence:
    logs: list[LogRecord] = field(default_factory=list)
    series: list[MetricSeries] = field(default_factory=list)
    alerts: list[AlertRecord] = field(default_factory=list)
    kube: list[KubeFact] = field(default_factory=list)
    changes: list[ChangeRecord] = field(default_factory=list)
    calls: list[TraceCall] = field(default_factory=list)
    placements: list[Placement] = field(default_factory=list)
    addresses: dict[str, str] = field(default_factory=dict)  # IP, cluster DNS name or Service name -> service
    queried: list[str] = field(default_factory=list)  # the services asked of a tool, in order
    expressions: list[str] = field(default_factory=list)  # the metric queries asked (a node's series by label)
    kube_asked: set[str] = field(default_factory=set)  # the workloads whose Kubernetes state a query asked for
    metrics_asked: set[str] = field(default_factory=set)  # the services whose series a query asked for
    address_book: bool = False  # whether a query read all of the cluster's Services
    declarations: dict[str, Ref] = field(default_factory=dict)  # workload -> the Service record that declares it
    empty: set[str] = field(default_factory=set)  # services a query named that returned nothing at all
    window: tuple[float, float] | None = None
    log_windows: dict[str, tuple[float, float]] = field(default_factory=dict)  # service -> span its logs cover
    external: set[str] = field(default_factory=set)  # ExternalName Services: stand-ins for outside APIs
    node_names: dict[str, str] = field(default_factory=dict)  # a node's IP (a pod's hostIP) -> the node's name

    def node(self, labels: Mapping[str, str]) -> str:
        """The node a series without a service describes, by its name when a pod on it gave its IP: node
        exporter labels a node by ``instance`` (its IP), the kubelet and Kubernetes by its name."""
        node = node_of(labels)
        return self.node_names.get(node, node)

    def services(self) -> set[str]:
        names = {r.service for r in self.logs} | {a.service for a in self.alerts if a.service}
        names |= {k.service for k in self.kube} | {c.service for c in self.changes}
        return self._with_series(names)

    def examined(self) -> set[str]:
        """The services whose own telemetry (logs, series, Kubernetes state) a query returned or was asked for:
        an alert or a change record names a service without examining it."""
        return self._with_series({r.service for r in self.logs} | {k.service for k in self.kube} | set(self.queried))

    def _with_series(self, names: set[str]) -> set[str]:
        names = names | {service_of(s.labels) for s in self.series if "persistentvolumeclaim" not in s.labels} - {""}
        # A volume's series last: its claim is read against the workloads the rest of the evidence names.
        return names | {service_of(s.labels, names) for s in self.series if "persistentvolumeclaim" in s.labels} - {""}


# --------------------------------------------------------------------------- names

_POD_SUFFIX = re.compile(r"-(?:[a-z0-9]{9,10}-[a-z0-9]{5}|[a-z0-9]{5}|\d+)$")
_KUBE_ALPHABET = re.compile(r"^[bcdfghjklmnpqrstvwxz2456789]+$")


def workload_of(pod: str) -> str:
    """The workload a pod name belongs to: Deployment pods end in ``-<hash>-<5>``, StatefulSet pods in ``-<n>``."""
    parts = pod.split("-")
    if len(parts) >= 3 and len(parts[-1]) == 5 and _KUBE_ALPHABET.match(parts[-1]) and 6 <= len(parts[-2]) <= 10:
        return "-".join(parts[:-2])
    if len(parts) >= 2 and len(parts[-1]) == 5 and _KUBE_ALPHABET.match(parts[-1]):
        return "-".join(parts[:-1])
    if len(parts) >= 2 and parts[-1].isdigit():
        return "-".join(parts[:-1])
    return pod


def replica_set_owner(name: str) -> str:
    """The Deployment a ReplicaSet belongs to: its name is the Deployment's with ``-<pod-template-hash>``."""
    head, _, tail = name.rpartition("-")
    return head if head and 6 <= len(tail) <= 10 and _KUBE_ALPHABET.match(tail) else name


def claim_owner(claim: str, known: Iterable[str] = ()) -> str:
    """The StatefulSet a PersistentVolumeClaim belongs to: its claims are ``<volumeClaimTemplate>-<name>-<ordinal>``
    (``data-orders-db-0``). A template name may hold dashes itself, so the longest of the ``known`` workloads the
    claim names before its ordinal is the owner; without one, the template is taken to be the first word. A claim
    of another shape names no workload."""
    head, _, ordinal = claim.rpartition("-")
    if not ordinal.isdigit() or "-" not in head:
        return ""
    owners = [name for name in known if name and head.endswith(f"-{name}")]
    return max(owners, key=len) if owners else head.split("-", 1)[1]


_SERVICE_LABELS = ("service", "service_name", "app", "application", "app_kubernetes_io_name", "app.kubernetes.io/name",
                   "k8s-app", "job", "container", "destination_workload", "dst_deployment", "deployment", "workload")


def service_of(labels: Mapping[str, str], known: Iterable[str] = ()) -> str:
    """The service a series describes, by the label conventions of Prometheus, Kubernetes, Istio and Linkerd:
    a service label, else the workload of its pod, else the StatefulSet of its volume's claim (the kubelet labels
    a volume by claim only; ``known``: the workloads to read the claim against, see ``claim_owner``)."""
    for key in _SERVICE_LABELS:
        value = labels.get(key)
        if value and key != "job":
            return value
    if labels.get("pod"):
        return workload_of(labels["pod"])
    if labels.get("persistentvolumeclaim"):
        return claim_owner(labels["persistentvolumeclaim"], known) or labels.get("job", "")
    return labels.get("job", "")


def node_of(labels: Mapping[str, str]) -> str:
    """The node a series without a service describes (node-exporter ``instance``, kubelet ``node``)."""
    node = labels.get("node") or labels.get("instance") or labels.get("kubernetes_node") or ""
    return node.rsplit(":", 1)[0] if re.search(r":\d+$", node) else node


# --------------------------------------------------------------------------- times

def parse_time(value: Any) -> float | None:
    if type(value) is not str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, str):
            return None
    if not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


_INFINITE = (float("inf"), float("-inf"))


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number or number in _INFINITE else number


# --------------------------------------------------------------------------- reading

def read_evidence(results: Iterable[Mapping[str, Any]]) -> Evidence:
    """Every successful tool result of a run, read into typed records.

    ``results`` are the run's invocations: ``{invocation_id, tool_name, arguments, result}`` (a result
    that is a string is parsed as JSON; one that cannot be read is skipped)."""
    evidence = Evidence()
    lows, highs = [], []
    for item in results:
        result = item.get("result")
        if isinstance(result, str):
            try:
                result = json.loads(result)
            except ValueError:
                continue
        if not isinstance(result, Mapping):
            continue
        tool = str(item.get("tool_name") or "")
        inv = str(item.get("invocation_id") or "")
        arguments = item.get("arguments") if isinstance(item.get("arguments"), Mapping) else {}
        asked = arguments.get("service") or arguments.get("name")
        if isinstance(asked, str) and asked and tool in ("query_logs", "query_metrics", "query_kubernetes"):
            evidence.queried.append(asked)
        if tool == "query_metrics" and isinstance(arguments.get("query"), str):
            evidence.expressions.append(arguments["query"])
        if tool == "query_metrics" and isinstance(arguments.get("service"), str):
            evidence.metrics_asked.add(arguments["service"])
        if tool == "query_kubernetes":
            if isinstance(asked, str) and asked:
                evidence.kube_asked.add(asked)
            elif str(arguments.get("kind") or "").lower() == "service":
                evidence.address_book = True
        low, high = _window(result)
        if low is not None and high is not None and tool in ("query_logs", "query_metrics"):
            lows.append(low)
            highs.append(high)
        reader = _READERS.get(tool)
        if reader is not None:
            found = reader(evidence, inv, result)
            if not found and isinstance(asked, str) and asked and tool in ("query_logs", "query_metrics"):
                evidence.empty.add(asked)
    if lows:
        evidence.window = (min(lows), max(highs))
    evidence.queried = list(dict.fromkeys(evidence.queried))
    return evidence


def _window(result: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The time range a result covers: its own ``start``/``end``, or those of the ``request`` the tool box
    keeps the call's arguments under."""
    request = result.get("request") if isinstance(result.get("request"), Mapping) else {}
    return (parse_time(result.get("start") or request.get("start")),
            parse_time(result.get("end") or request.get("end")))


def _read_logs(evidence: Evidence, inv: str, result: Mapping[str, Any]) -> int:
    count = 0
    append = evidence.logs.append
    for i, record in enumerate(result.get("records") or []):
        if type(record) is not dict and not isinstance(record, Mapping):
            continue
        message = record.get("message")
        if type(message) is not str:
            message = str(message or "")
        ts = parse_time(record.get("timestamp"))
        if ts is None or not message:
            continue
        service = record.get("service")
        if type(service) is not str:
            service = str(service or "")
        append(LogRecord(ref_of(inv, "query_logs", f"$.records[{i}].message", message), ts, service,
                         level_of(record.get("level"), message), message))
        count += 1
    stamps = [r.ts for r in evidence.logs[len(evidence.logs) - count:]]
    low, high = _window(result)
    if stamps and low is not None and high is not None:
        # The newest ``limit`` records were returned: the logs only tell what happened since the oldest.
        low = min(stamps) if result.get("truncated") else low
        for service in {r.service for r in evidence.logs[len(evidence.logs) - count:]}:
            known = evidence.log_windows.get(service)
            evidence.log_windows[service] = (min(low, known[0]), max(high, known[1])) if known else (low, high)
    return count


def _read_metrics(evidence: Evidence, inv: str, result: Mapping[str, Any]) -> int:
    count = 0
    for i, series in enumerate(result.get("series") or []):
        if type(series) is not dict and not isinstance(series, Mapping):
            continue
        labels = series.get("labels") or series.get("metric") or {}
        if type(labels) is not dict and not isinstance(labels, Mapping):
            continue
        points = series.get("values") or []
        try:  # the wire shape: [[unix_seconds, "value"], ...]
            columns = list(zip(*points))
            if len(columns) != 2 or sum(map(len, points)) != 2 * len(points):
                raise ValueError("not pairs")  # every point must be [t, v]
            times, values = list(map(float, columns[0])), list(map(float, columns[1]))
            # A sum of finite values is finite unless it overflows; then each value is checked.
            if not math.isfinite(sum(values)) and not all(map(math.isfinite, values)):
                raise ValueError("not finite")
        except (TypeError, ValueError):
            times, values = [], []
            for point in points:
                if isinstance(point, (list, tuple)) and len(point) == 2:
                    t, v = _number(point[0]), _number(point[1])
                    if t is not None and v is not None:
                        times.append(t)
                        values.append(v)
        if not times:
            continue
        clean = {str(k): str(v) for k, v in labels.items()}
        text = series.get("description") if isinstance(series.get("description"), str) else None
        path = f"$.series[{i}].description" if text else f"$.series[{i}].labels"
        excerpt = text or json.dumps(clean, ensure_ascii=False, sort_keys=True)
        evidence.series.append(MetricSeries(ref_of(inv, "query_metrics", path, excerpt), clean, times, values))
        count += 1
    return count


def _read_alerts(evidence: Evidence, inv: str, result: Mapping[str, Any]) -> int:
    for i, alert in enumerate(result.get("alerts") or []):
        if not isinstance(alert, Mapping):
            continue
        labels = alert.get("labels") if isinstance(alert.get("labels"), Mapping) else {}
        name = str(labels.get("alertname") or "")
        service = service_of({str(k): str(v) for k, v in labels.items()})
        state = str(alert.get("state") or alert.get("status") or "firing").lower()
        evidence.alerts.append(AlertRecord(Ref(inv, "query_alerts", f"$.alerts[{i}].labels.alertname", name), name,
                                           service, state, str(labels.get("severity") or ""),
                                           parse_time(alert.get("activeAt") or alert.get("startsAt"))))
    return len(result.get("alerts") or [])


# EC2's private DNS names, which EKS and kops give their nodes, spell the node's IP: ip-10-20-7-31.ec2.internal.
_EC2_NODE_NAME = re.compile(r"ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})(?:\.|$)")


def _placed(evidence: Evidence, placement: Placement) -> None:
    """A placement; a node named by its IP (EC2's names) also says which IP node exporter labels it by."""
    evidence.placements.append(placement)
    spelled = _EC2_NODE_NAME.match(placement.node or "")
    if spelled:
        evidence.node_names.setdefault(".".join(spelled.groups()), str(placement.node))


def _place(evidence: Evidence, pod: Mapping[str, Any], name: str, service: str) -> None:
    """Where a pod runs and the addresses that stand for its service: its name, its IP, and its node's IP."""
    _placed(evidence, Placement(service, name, pod.get("node"), pod.get("podIP")))
    if pod.get("podIP"):
        evidence.addresses[str(pod["podIP"])] = service
    if pod.get("hostIP") and pod.get("node"):
        evidence.node_names[str(pod["hostIP"])] = str(pod["node"])
    evidence.addresses[name] = service


def _read_kubernetes(evidence: Evidence, inv: str, result: Mapping[str, Any]) -> int:
    """Pods, then events (their objects are named through the pods' addresses), then Services."""
    return (_read_pods(evidence, inv, result.get("pods") or []) + _read_events(evidence, inv, result.get("events") or [])
            + _read_services(evidence, inv, result.get("services") or []))


def _read_pods(evidence: Evidence, inv: str, pods: list[Any]) -> int:
    count = 0
    for i, pod in enumerate(pods):
        if not isinstance(pod, Mapping):
            continue
        name = str(pod.get("name") or "")
        labels = pod.get("labels") if isinstance(pod.get("labels"), Mapping) else {}
        service = str(labels.get("app") or labels.get("app.kubernetes.io/name") or workload_of(name))
        _place(evidence, pod, name, service)
        if pod.get("reason"):
            text = str(pod["reason"])
            evidence.kube.append(KubeFact(Ref(inv, "query_kubernetes", f"$.pods[{i}]", json_item("reason", pod["reason"])),
                                          service, text, None, str(pod.get("message") or ""), True))
        for j, container in enumerate(pod.get("containers") or []):
            if isinstance(container, Mapping):
                _read_container(evidence, inv, f"$.pods[{i}].containers[{j}]", service, container)
        count += 1
    return count


def json_item(key: str, value: Any) -> str:
    """``"key": value`` exactly as it appears in the JSON text of its object (``json.dumps`` defaults)."""
    return f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"


def state_quote(state: Mapping[str, Any]) -> str:
    """A container state's reason as its object's JSON text shows it, with the exit code when it follows
    (``"reason": "OOMKilled", "exitCode": 137``). A bare reason is a word or two, too short to be cited;
    quoted from the state's text, it is long enough and still says only what the record says."""
    items = [(k, json_item(k, v)) for k, v in state.items()]
    at = next(n for n, (k, _) in enumerate(items) if k == "reason")
    if at + 1 < len(items) and items[at + 1][0] == "exitCode":
        return ", ".join(text for _, text in items[at:at + 2])
    return items[at][1]


def _read_container(evidence: Evidence, inv: str, path: str, service: str, container: Mapping[str, Any]) -> None:
    """A container's state and last state (each with a reason) and its restarts; ``path`` is its JSON path.
    Both are cited by their object's text (``state_quote``, ``json_item``): a reason or a count alone is too
    short for a citation."""
    for key in ("state", "lastState"):
        state = container.get(key)
        if not isinstance(state, Mapping) or not state.get("reason"):
            continue
        reason = str(state["reason"])
        # The last termination's time says when it last happened, not when the trouble began.
        ts = None if key == "lastState" else parse_time(state.get("finishedAt") or state.get("startedAt"))
        evidence.kube.append(KubeFact(Ref(inv, "query_kubernetes", f"{path}.{key}", state_quote(state)), service, reason,
                                      ts, str(state.get("message") or ""), reason not in ("Completed",)))
    restarts = container.get("restartCount")
    if isinstance(restarts, int) and restarts > 0:
        evidence.kube.append(KubeFact(Ref(inv, "query_kubernetes", path, json_item("restartCount", restarts)), service,
                                      "Restarted", None, "", False))


def _read_events(evidence: Evidence, inv: str, events: list[Any]) -> int:
    count = 0
    for i, event in enumerate(events):
        if not isinstance(event, Mapping):
            continue
        obj = str(event.get("object") or event.get("involvedObject") or "")
        kind, _, target = obj.rpartition("/")
        service = evidence.addresses.get(target) or (replica_set_owner(target) if kind.lower() == "replicaset"
                                                      else workload_of(target))
        message = str(event.get("message") or "")
        reason = str(event.get("reason") or "")
        ts = parse_time(event.get("firstTimestamp") or event.get("eventTime") or event.get("lastTimestamp"))
        last = parse_time(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp"))
        evidence.kube.append(KubeFact(Ref(inv, "query_kubernetes", f"$.events[{i}].message", message), service, reason,
                                      ts, message, str(event.get("type") or "") == "Warning", last))
        count += 1
    return count


def service_target(service: Mapping[str, Any]) -> str:
    """The workload a Kubernetes Service stands for: the one its selector picks, by the labels ``service_of``
    reads, else the Service's own name (an ExternalName Service, a Service without a selector)."""
    selector = service.get("selector") if isinstance(service.get("selector"), Mapping) else {}
    return service_of({str(k): str(v) for k, v in selector.items()}) or str(service.get("name") or "")


def _read_services(evidence: Evidence, inv: str, services: list[Any]) -> int:
    """The address book: each Service's names, ExternalName target, cluster IP and endpoint IPs -> its workload,
    and the nodes its endpoints run on. Each workload keeps the Service that declares it as a citable record
    (``declarations``): what links a caller's line that names an address to the service it names."""
    count = 0
    for i, service in enumerate(services):
        if not isinstance(service, Mapping) or not service.get("name"):
            continue
        target = service_target(service)
        evidence.declarations.setdefault(target, Ref(inv, "query_kubernetes", f"$.services[{i}]",
                                                     json_item("name", service["name"])))
        namespace = service.get("namespace")
        for key in _service_names(str(service["name"]), namespace):
            evidence.addresses[key] = target
        if service.get("externalName"):  # an ExternalName Service stands for the outside host it names
            evidence.addresses[str(service["externalName"]).rstrip(".")] = target
            evidence.external.add(target)
        if service.get("clusterIP") and service["clusterIP"] != "None":
            evidence.addresses[str(service["clusterIP"])] = target
        for endpoint in service.get("endpoints") or []:
            if isinstance(endpoint, Mapping) and endpoint.get("ip"):
                evidence.addresses[str(endpoint["ip"])] = target
                if endpoint.get("node"):  # an EndpointSlice says on which node each endpoint runs
                    _placed(evidence, Placement(target, str(endpoint.get("pod") or ""), str(endpoint["node"]),
                                                str(endpoint["ip"])))
        count += 1
    return count


def _service_names(name: str, namespace: Any) -> list[str]:
    names = [name]
    if isinstance(namespace, str) and namespace:
        names += [f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]
    return names


def _read_traces(evidence: Evidence, inv: str, result: Mapping[str, Any]) -> int:
    spans = [s for s in result.get("spans") or [] if isinstance(s, Mapping)]
    by_id = {(s.get("trace_id"), s.get("span_id")): s for s in spans}
    for i, span in enumerate(result.get("spans") or []):
        if not isinstance(span, Mapping):
            continue
        parent = by_id.get((span.get("trace_id"), span.get("parent_span_id")))
        callee = str(span.get("service") or "")
        caller = str(parent.get("service") or "") if parent else ""
        attributes = span.get("attributes") if isinstance(span.get("attributes"), Mapping) else {}
        if span.get("kind") == "client" and attributes.get("peer.service"):
            caller, callee = callee, str(attributes["peer.service"])
        elif not parent or caller == callee:
            continue
        ts = parse_time(span.get("start"))
        duration = _number(span.get("duration_ms")) or 0.0
        if ts is None or not caller or not callee:
            continue
        text = str(span.get("description") or "")
        evidence.calls.append(TraceCall(Ref(inv, "query_traces", f"$.spans[{i}].description", text), caller, callee,
                                        ts, duration, str(span.get("status") or "").lower() == "error"))
    return len(spans)


def _read_changes(evidence: Evidence, inv: str, result: Mapping[str, Any]) -> int:
    for i, change in enumerate(result.get("changes") or []):
        if not isinstance(change, Mapping):
            continue
        text = str(change.get("description") or change.get("what") or "")
        evidence.changes.append(ChangeRecord(Ref(inv, "query_changes", f"$.changes[{i}].description", text),
                                             str(change.get("service") or ""), parse_time(change.get("at")),
                                             str(change.get("kind") or ""), str(change.get("what") or "")))
    return len(result.get("changes") or [])


_READERS = {
    "query_logs": _read_logs,
    "query_metrics": _read_metrics,
    "query_alerts": _read_alerts,
    "query_kubernetes": _read_kubernetes,
    "query_traces": _read_traces,
    "query_changes": _read_changes,
}
