"""Reads and validates the shipped demo incident scenarios (logs, metrics, alerts, runbooks, ground truth).

Each scenario is a folder under ``scenarios/``: ``scenario.json``, ``logs.jsonl``, ``metrics.json``,
``alerts.json``, ``ground_truth.json`` and ``runbooks/*.md``. Times are stored relative to "now"
(``offset_seconds`` <= 0) so a backend can shift them to the moment it loads. Stdlib only.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from diagnosis.demo.timestamps import TIMESTAMP_LAYOUTS, placeholder_names
from diagnosis.demo.traces_changes import EvidenceFileError, load_changes, load_traces
from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID

__all__ = [
    "SCENARIOS_DIR",
    "REQUIRED_FILES",
    "LOG_LEVELS",
    "ScenarioError",
    "Scenario",
    "shipped_scenarios",
    "scenario_dir",
    "load_scenario",
    "load_scenario_meta",
    "load_ground_truth",
    "runbook_files",
]

SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"
REQUIRED_FILES = ("scenario.json", "logs.jsonl", "metrics.json", "alerts.json", "ground_truth.json")
# Every level name real formats write (syslog, Logback/Log4j, Python logging, Go zap/zerolog, PostgreSQL);
# a record may also leave its level out, as a Loki stream without a level label does.
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY",
              "FATAL", "PANIC")
ALERT_STATES = ("pending", "firing")
_METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class ScenarioError(ValueError):
    """A scenario folder that is missing a file or holds data of the wrong shape."""


@dataclass(frozen=True)
class Scenario:
    """One incident scenario as stored on disk, times still relative to "now"."""

    name: str
    path: Path
    title: str
    services: tuple[str, ...]
    description: str
    default_question: dict[str, str]
    logs: tuple[dict[str, Any], ...]
    series: tuple[dict[str, Any], ...]
    alerts: tuple[dict[str, Any], ...]
    ground_truth: dict[str, Any]
    runbooks: tuple[Path, ...]
    kubernetes: dict[str, Any] = field(default_factory=dict)  # optional kubernetes.json: pods and events
    traces: tuple[dict[str, Any], ...] = ()  # optional traces.json: trace templates (traces_changes.py)
    changes: tuple[dict[str, Any], ...] = ()  # optional changes.json: change records (traces_changes.py)


def shipped_scenarios() -> list[Path]:
    """The scenario folders shipped with the code, sorted by name."""
    return sorted(p for p in SCENARIOS_DIR.iterdir() if p.is_dir() and (p / "scenario.json").is_file())


def scenario_dir(name: str) -> Path:
    """The shipped folder of scenario ``name``; ``ScenarioError`` lists the known names otherwise."""
    for path in shipped_scenarios():
        if path.name == name:
            return path
    known = ", ".join(p.name for p in shipped_scenarios())
    raise ScenarioError(f"unknown demo scenario {name!r}; shipped scenarios: {known}")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"{path}: file is missing") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: invalid JSON ({exc})") from None


def _require(cond: bool, where: Path | str, problem: str) -> None:
    if not cond:
        raise ScenarioError(f"{where}: {problem}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def load_scenario_meta(path: Path | str) -> dict[str, Any]:
    """``scenario.json``: name, title, services, description, default_question {en, zh}."""
    file = Path(path) / "scenario.json"
    meta = _read_json(file)
    _require(isinstance(meta, dict), file, "expected a JSON object")
    for key in ("name", "title", "description"):
        _require(isinstance(meta.get(key), str) and meta[key].strip() != "", file,
                 f"'{key}' must be a non-empty string")
    services = meta.get("services")
    _require(isinstance(services, list) and services and all(isinstance(s, str) and s for s in services),
             file, "'services' must be a non-empty list of names")
    question = meta.get("default_question")
    _require(isinstance(question, dict) and all(isinstance(question.get(k), str) and question[k] for k in ("en", "zh")),
             file, "'default_question' needs non-empty 'en' and 'zh' strings")
    return meta


def load_ground_truth(path: Path | str) -> dict[str, Any]:
    """``ground_truth.json``: root_cause_service (null when nothing is wrong), root_cause, cause_kind
    (a taxonomy id, absent when nothing is wrong) and also_accepted_kinds, cause_keywords, key_evidence,
    expected_nothing_wrong, plus optional evaluation hints."""
    file = Path(path) / "ground_truth.json"
    truth = _read_json(file)
    _require(isinstance(truth, dict), file, "expected a JSON object")
    nothing_wrong = truth.get("expected_nothing_wrong")
    _require(isinstance(nothing_wrong, bool), file, "'expected_nothing_wrong' must be true or false")
    service = truth.get("root_cause_service")
    _require(service is None if nothing_wrong else isinstance(service, str) and service != "",
             file, "'root_cause_service' must be a service name (null only when nothing is wrong)")
    _require(isinstance(truth.get("root_cause"), str) and truth["root_cause"] != "", file,
             "'root_cause' must be a non-empty string")
    for key in ("cause_keywords", "key_evidence"):
        items = truth.get(key)
        _require(isinstance(items, list) and items and all(isinstance(i, str) and i for i in items),
                 file, f"'{key}' must be a non-empty list of strings")
    kind = truth.get("cause_kind")
    _require(kind is None if nothing_wrong else kind in CAUSE_KIND_BY_ID, file,
             "'cause_kind' must be a kind of diagnosis/localisation/taxonomy.py (absent only when nothing is wrong)")
    also = truth.get("also_accepted_kinds", [])
    _require(isinstance(also, list) and all(k in CAUSE_KIND_BY_ID and k != kind for k in also), file,
             "'also_accepted_kinds' must list other kinds of the taxonomy")
    for i, spec in enumerate(truth.get("anomalous_metrics") or []):
        _require(isinstance(spec, dict) and all(isinstance(spec.get(k), str) and spec[k] for k in ("metric", "service"))
                 and spec.get("direction") in ("up", "down", "change"), f"{file}: anomalous_metrics[{i}]",
                 "needs 'metric', 'service' and 'direction' (up, down or change)")
        _require(spec.get("query") is None or isinstance(spec["query"], str) and spec["query"].strip() != "",
                 f"{file}: anomalous_metrics[{i}]", "'query' must be a PromQL expression (where a counter or "
                 "histogram moves, e.g. histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m]))))")
    return truth


def _is_offset(value: Any) -> bool:
    """Seconds before "now": a number <= 0 with at most millisecond precision."""
    return _is_number(value) and value <= 0 and abs(value * 1000 - round(value * 1000)) < 1e-6


def _load_logs(file: Path) -> tuple[dict[str, Any], ...]:
    records = []
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ScenarioError(f"{file}: file is missing") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"{where}: invalid JSON ({exc})") from None
        _require(isinstance(record, dict), where, "expected a JSON object")
        _require(_is_offset(record.get("offset_seconds")), where,
                 "'offset_seconds' must be a number <= 0 (seconds before now, at most 3 decimals)")
        _require(isinstance(record.get("service"), str) and record["service"] != "", where, "'service' is missing")
        if "level" in record:
            _require(record["level"] in LOG_LEVELS, where,
                     f"'level' must be one of {', '.join(LOG_LEVELS)}; leave it out when only the line tells the level")
        _require(isinstance(record.get("message"), str) and record["message"] != "", where, "'message' is missing")
        unknown = [n for n in placeholder_names(record["message"]) if n not in TIMESTAMP_LAYOUTS]
        _require(not unknown, where, f"unknown timestamp placeholder {{ts:{unknown[0] if unknown else ''}}}; "
                                     f"known layouts: {', '.join(TIMESTAMP_LAYOUTS)}")
        records.append(record)
    return tuple(records)


def format_series(labels: dict[str, Any]) -> str:
    """``name{a="1",b="2"}``, as Prometheus prints a series (used to name one in an error)."""
    name = str(labels.get("__name__", ""))
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inner}}}" if inner or not name else name


def _series_name(labels: Any) -> str:
    return format_series(labels) if isinstance(labels, dict) else "?"


def _load_series(file: Path) -> tuple[dict[str, Any], ...]:
    data = _read_json(file)
    _require(isinstance(data, dict) and isinstance(data.get("series"), list), file, "expected {\"series\": [...]}")
    out = []
    seen: dict[tuple, int] = {}
    for i, series in enumerate(data["series"]):
        where = f"{file}: series[{i}]"
        _require(isinstance(series, dict), where, "expected a JSON object")
        labels = series.get("labels")
        _require(isinstance(labels, dict) and all(isinstance(v, str) and v != "" for v in labels.values()), where,
                 "'labels' must map label names to non-empty strings (an empty label is the same as none)")
        where = f"{file}: series[{i}] {_series_name(labels)}"
        _require(_METRIC_NAME_RE.match(labels.get("__name__", "")) is not None, where,
                 "labels need a valid '__name__' ([a-zA-Z_:][a-zA-Z0-9_:]*)")
        bad = [k for k in labels if k != "__name__" and (not _LABEL_NAME_RE.match(k) or k.startswith("__"))]
        _require(not bad, where, f"invalid label name {bad[0] if bad else ''!r} (use [a-zA-Z_][a-zA-Z0-9_]*, "
                                 "no leading '__')")
        key = tuple(sorted(labels.items()))
        _require(key not in seen, where, f"the same labels as series[{seen.get(key)}]; every series needs its own label set")
        seen[key] = i
        step = series.get("step_seconds")
        _require(isinstance(step, int) and not isinstance(step, bool) and step > 0, where,
                 "'step_seconds' must be a positive integer")
        values = series.get("values")
        _require(isinstance(values, list) and values and all(v is None or _is_number(v) for v in values), where,
                 "'values' must be a non-empty list of finite numbers, null where a sample is missing")
        _require(any(v is not None for v in values), where, "'values' holds no sample; leave the series out")
        name = labels["__name__"]
        if name.endswith(_CUMULATIVE_SUFFIXES):
            _require(all(v is None or v >= 0 for v in values), where,
                     f"a {name.rsplit('_', 1)[-1]} series is cumulative and never negative")
        if name.endswith("_bucket"):
            _require(_parse_le(labels.get("le")) is not None, where,
                     "a _bucket series needs an 'le' label holding its upper bound (a number or +Inf)")
        else:
            _require("le" not in labels, where, "'le' belongs to _bucket series only")
        out.append(series)
    _check_histograms(file, out)
    return tuple(out)


_CUMULATIVE_SUFFIXES = ("_total", "_bucket", "_count")


def _parse_le(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _check_histograms(file: Path, series: list[dict[str, Any]]) -> None:
    """Classic histograms as Prometheus stores them: per family (the labels without ``le``) the buckets
    share one time grid, include ``le="+Inf"``, never decrease with ``le``, reset together, and
    ``_count`` (when present) equals the ``+Inf`` bucket."""
    families: dict[tuple, list[dict[str, Any]]] = {}
    counts: dict[tuple, dict[str, Any]] = {}
    for s in series:
        labels = s["labels"]
        name = labels["__name__"]
        if name.endswith("_bucket"):
            base = name[: -len("_bucket")]
            rest = tuple(sorted((k, v) for k, v in labels.items() if k not in ("__name__", "le")))
            families.setdefault((base, rest), []).append(s)
        elif name.endswith("_count"):
            rest = tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))
            counts[(name[: -len("_count")], rest)] = s
    for (base, rest), buckets in families.items():
        where = f"{file}: histogram {format_series({'__name__': base + '_bucket', **dict(rest)})}"
        grids = {(b["step_seconds"], len(b["values"])) for b in buckets}
        _require(len(grids) == 1, where, "every bucket needs the same 'step_seconds' and number of values")
        buckets = sorted(buckets, key=lambda b: _parse_le(b["labels"]["le"]))
        bounds = [_parse_le(b["labels"]["le"]) for b in buckets]
        _require(bounds[-1] == math.inf, where, "the buckets need one with le=\"+Inf\" (it counts every observation)")
        _require(len(set(bounds)) == len(bounds), where, "two buckets have the same 'le'")
        length = len(buckets[0]["values"])
        for t in range(length):
            column = [b["values"][t] for b in buckets]
            present = [v for v in column if v is not None]
            _require(len(present) in (0, len(column)), where,
                     f"sample {t} is missing in some buckets only; a scrape writes every bucket or none")
            _require(all(a <= b for a, b in zip(present, present[1:])), where,
                     f"sample {t}: bucket counts must not decrease as 'le' grows (they are cumulative)")
        inf = buckets[-1]["values"]
        previous = None
        for t in range(length):
            if inf[t] is None:
                continue
            if previous is not None:
                reset = inf[t] < inf[previous]
                for b in buckets:
                    dropped = b["values"][t] < b["values"][previous]
                    _require(not dropped or reset, where,
                             f"sample {t}: bucket le=\"{b['labels']['le']}\" decreases while +Inf does not; a "
                             "counter only decreases when the whole histogram resets")
            previous = t
        count = counts.get((base, rest))
        if count is not None:
            _require(count["step_seconds"] == buckets[0]["step_seconds"] and len(count["values"]) == length, where,
                     f"{base}_count needs the buckets' 'step_seconds' and number of values")
            _require(all(c == v for c, v in zip(count["values"], inf)), where,
                     f"{base}_count must equal the le=\"+Inf\" bucket at every sample (both null when missing)")


def _load_alerts(file: Path) -> tuple[dict[str, Any], ...]:
    data = _read_json(file)
    _require(isinstance(data, dict) and isinstance(data.get("alerts"), list), file, "expected {\"alerts\": [...]}")
    for i, alert in enumerate(data["alerts"]):
        where = f"{file}: alerts[{i}]"
        _require(isinstance(alert, dict), where, "expected a JSON object")
        labels = alert.get("labels")
        _require(isinstance(labels, dict) and all(isinstance(labels.get(k), str) and labels[k]
                                                  for k in ("alertname", "service", "severity")),
                 where, "labels need alertname, service and severity")
        annotations = alert.get("annotations")
        _require(isinstance(annotations, dict) and all(isinstance(annotations.get(k), str)
                                                       for k in ("summary", "description")),
                 where, "annotations need summary and description")
        _require(alert.get("state") in ALERT_STATES, where, "'state' must be pending or firing")
        offset = alert.get("offset_seconds")
        _require(isinstance(offset, int) and not isinstance(offset, bool) and offset <= 0, where,
                 "'offset_seconds' must be an integer <= 0")
        _require(isinstance(alert.get("value"), str), where, "'value' must be a string, as Prometheus sends it")
    return tuple(data["alerts"])


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate one scenario folder; ``ScenarioError`` names the file and the problem."""
    path = Path(path)
    _require(path.is_dir(), path, "not a scenario folder")
    for name in REQUIRED_FILES:
        _require((path / name).is_file(), path / name, "file is missing")
    meta = load_scenario_meta(path)
    runbook_dir = path / "runbooks"
    runbooks = tuple(sorted(runbook_dir.glob("*.md"))) if runbook_dir.is_dir() else ()
    return Scenario(
        name=meta["name"],
        path=path,
        title=meta["title"],
        services=tuple(meta["services"]),
        description=meta["description"],
        default_question=dict(meta["default_question"]),
        logs=_load_logs(path / "logs.jsonl"),
        series=_load_series(path / "metrics.json"),
        alerts=_load_alerts(path / "alerts.json"),
        ground_truth=load_ground_truth(path),
        runbooks=runbooks,
        kubernetes=_load_kubernetes(path / "kubernetes.json"),
        **_load_traces_and_changes(path),
    )


def _ip(value: Any) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return isinstance(value, str)


SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_DNS_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # a Service name (RFC 1035 label)
_PORT_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$")  # an IANA service name, as targetPort


def _is_port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _load_traces_and_changes(path: Path) -> dict[str, Any]:
    try:
        return {"traces": load_traces(path / "traces.json"), "changes": load_changes(path / "changes.json")}
    except EvidenceFileError as exc:
        raise ScenarioError(str(exc)) from None


def _load_kubernetes(file: Path) -> dict[str, Any]:
    """``{"namespace", "pods": [...], "services": [...], "events": [...]}`` in the tool's shape, times as
    ``*_offset_seconds``. Pods may carry ``podIP``/``hostIP``; a Service's ``endpoints`` default to the
    pods its selector picks that have a ``podIP``, as the endpoints controller builds them.

    Why it is long: one check per section of the file (pods, services, events), each with the message that
    names what is wrong."""
    if not file.is_file():
        return {}
    data = _read_json(file)
    _require(isinstance(data, dict) and isinstance(data.get("namespace"), str), file,
             "expected {\"namespace\", \"pods\", \"services\", \"events\"}")
    pods, events, services = data.get("pods", []), data.get("events", []), data.get("services", [])
    _require(isinstance(pods, list) and all(isinstance(p, dict) and isinstance(p.get("name"), str) for p in pods),
             file, "'pods' must be a list of objects with a 'name'")
    _require(isinstance(events, list) and all(
        isinstance(e, dict) and isinstance(e.get("object"), str) and isinstance(e.get("message"), str)
        and _is_number(e.get("last_offset_seconds")) for e in events),
        file, "'events' must be objects with 'object', 'message' and 'last_offset_seconds'")
    pod_ips: dict[str, str] = {}
    for pod in pods:
        where = f"{file}: pod {pod['name']}"
        for key in ("podIP", "hostIP"):
            _require(pod.get(key) is None or _ip(pod[key]), where, f"'{key}' must be an IP address such as 10.244.2.31")
        if pod.get("podIP"):
            _require(pod["podIP"] not in pod_ips.values(), where,
                     f"podIP {pod['podIP']} is also the IP of pod {next((n for n, i in pod_ips.items() if i == pod['podIP']), '')}")
            pod_ips[pod["name"]] = pod["podIP"]
    _require(isinstance(services, list) and all(isinstance(x, dict) for x in services), file,
             "'services' must be a list of objects")
    cluster_ips: dict[str, str] = {}
    for i, svc in enumerate(services):
        where = f"{file}: services[{i}] {svc.get('name', '')}".rstrip()
        _require(isinstance(svc.get("name"), str) and _DNS_LABEL_RE.match(svc["name"]) is not None, where,
                 "'name' must be a DNS label: lower-case letters, digits and '-', at most 63 characters")
        kind = svc.get("type", "ClusterIP")
        _require(kind in SERVICE_TYPES, where, f"'type' must be one of {', '.join(SERVICE_TYPES)}")
        if kind == "ExternalName":
            _require(isinstance(svc.get("externalName"), str) and svc["externalName"] != "", where,
                     "an ExternalName Service needs 'externalName' (the DNS name it aliases)")
        else:
            ip = svc.get("clusterIP")
            _require(ip == "None" or _ip(ip), where, "'clusterIP' must be an IP address, or \"None\" for a headless Service")
            if ip != "None":
                _require(ip not in cluster_ips.values(), where, f"clusterIP {ip} is taken by another Service")
                cluster_ips[svc["name"]] = ip
        ports = svc.get("ports", [])
        _require(isinstance(ports, list) and all(
            isinstance(p, dict) and _is_port(p.get("port"))
            and (p.get("targetPort") is None or _is_port(p["targetPort"])
                 or isinstance(p["targetPort"], str) and _PORT_NAME_RE.match(p["targetPort"]) is not None)
            and p.get("protocol", "TCP") in ("TCP", "UDP", "SCTP") for p in ports), where,
            "'ports' must be objects {name?, port: 1-65535, targetPort?: a port or a port name, protocol?: TCP|UDP|SCTP}")
        selector = svc.get("selector", {})
        _require(isinstance(selector, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items()),
                 where, "'selector' must map label names to values")
        endpoints = svc.get("endpoints")
        if endpoints is not None:
            _require(isinstance(endpoints, list) and all(isinstance(e, dict) and _ip(e.get("ip")) for e in endpoints),
                     where, "'endpoints' must be objects with an 'ip' (and optionally 'pod', 'node', 'ready')")
            for e in endpoints:
                if e.get("pod") is not None:
                    _require(pod_ips.get(e["pod"]) == e["ip"], where,
                             f"endpoint {e['ip']} names pod {e['pod']!r}, whose podIP is {pod_ips.get(e['pod'])}; "
                             "give the pod that IP in 'pods' or fix the endpoint")
                _require(e.get("ready", True) in (True, False), where, "an endpoint's 'ready' is true or false")
    return {"namespace": data["namespace"], "pods": pods, "services": services, "events": events}


def runbook_files(scenario_dirs: Iterable[Path | str] | None = None) -> list[Path]:
    """Every ``runbooks/*.md`` of the given scenario folders (default: all shipped), sorted."""
    dirs = shipped_scenarios() if scenario_dirs is None else [Path(d) for d in scenario_dirs]
    return sorted(md for d in dirs for md in (d / "runbooks").glob("*.md"))
