"""Reads and validates the shipped demo incident scenarios (logs, metrics, alerts, runbooks, ground truth).

Each scenario is a folder under ``scenarios/``: ``scenario.json``, ``logs.jsonl``, ``metrics.json``,
``alerts.json``, ``ground_truth.json`` and ``runbooks/*.md``. Times are stored relative to "now"
(``offset_seconds`` <= 0) so a backend can shift them to the moment it loads. Stdlib only.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from diagnosis.demo.traces_changes import EvidenceFileError, load_changes, load_traces

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
LOG_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR", "FATAL")
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
    """``ground_truth.json``: root_cause_service (null when nothing is wrong), root_cause,
    cause_keywords, key_evidence, expected_nothing_wrong, plus optional evaluation hints."""
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
    return truth


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
        offset = record.get("offset_seconds")
        _require(isinstance(offset, int) and not isinstance(offset, bool) and offset <= 0, where,
                 "'offset_seconds' must be an integer <= 0")
        _require(isinstance(record.get("service"), str) and record["service"] != "", where, "'service' is missing")
        _require(record.get("level") in LOG_LEVELS, where, f"'level' must be one of {', '.join(LOG_LEVELS)}")
        _require(isinstance(record.get("message"), str) and record["message"] != "", where, "'message' is missing")
        records.append(record)
    return tuple(records)


def _load_series(file: Path) -> tuple[dict[str, Any], ...]:
    data = _read_json(file)
    _require(isinstance(data, dict) and isinstance(data.get("series"), list), file, "expected {\"series\": [...]}")
    out = []
    for i, series in enumerate(data["series"]):
        where = f"{file}: series[{i}]"
        _require(isinstance(series, dict), where, "expected a JSON object")
        labels = series.get("labels")
        _require(isinstance(labels, dict) and all(isinstance(v, str) for v in labels.values()), where,
                 "'labels' must map label names to strings")
        _require(_METRIC_NAME_RE.match(labels.get("__name__", "")) is not None, where,
                 "labels need a valid '__name__'")
        _require(bool(labels.get("service")), where, "labels need a 'service'")
        _require(all(_LABEL_NAME_RE.match(k) for k in labels if k != "__name__"), where, "invalid label name")
        step = series.get("step_seconds")
        _require(isinstance(step, int) and not isinstance(step, bool) and step > 0, where,
                 "'step_seconds' must be a positive integer")
        values = series.get("values")
        _require(isinstance(values, list) and values and all(_is_number(v) for v in values), where,
                 "'values' must be a non-empty list of finite numbers")
        out.append(series)
    return tuple(out)


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


def _load_traces_and_changes(path: Path) -> dict[str, Any]:
    try:
        return {"traces": load_traces(path / "traces.json"), "changes": load_changes(path / "changes.json")}
    except EvidenceFileError as exc:
        raise ScenarioError(str(exc)) from None


def _load_kubernetes(file: Path) -> dict[str, Any]:
    """``{"namespace", "pods": [...], "events": [...]}`` in the tool's shape, times as ``*_offset_seconds``."""
    if not file.is_file():
        return {}
    data = _read_json(file)
    _require(isinstance(data, dict) and isinstance(data.get("namespace"), str), file, "expected {\"namespace\", \"pods\", \"events\"}")
    pods, events = data.get("pods", []), data.get("events", [])
    _require(isinstance(pods, list) and all(isinstance(p, dict) and isinstance(p.get("name"), str) for p in pods),
             file, "'pods' must be a list of objects with a 'name'")
    _require(isinstance(events, list) and all(
        isinstance(e, dict) and isinstance(e.get("object"), str) and isinstance(e.get("message"), str)
        and _is_number(e.get("last_offset_seconds")) for e in events),
        file, "'events' must be objects with 'object', 'message' and 'last_offset_seconds'")
    return {"namespace": data["namespace"], "pods": pods, "events": events}


def runbook_files(scenario_dirs: Iterable[Path | str] | None = None) -> list[Path]:
    """Every ``runbooks/*.md`` of the given scenario folders (default: all shipped), sorted."""
    dirs = shipped_scenarios() if scenario_dirs is None else [Path(d) for d in scenario_dirs]
    return sorted(md for d in dirs for md in (d / "runbooks").glob("*.md"))
