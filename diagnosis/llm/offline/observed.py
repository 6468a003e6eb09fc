"""The records the offline analyser reads from a run's tool results (log lines, series, alerts, runbook
chunks) and what it keeps per service; ``anomalies`` analyses them and ``observations`` reads them in."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping

from diagnosis.localisation.records import state_quote
from diagnosis.llm.offline.lexicon import (
    CAUSES,
    CAUSE_BY_KEY,
    Cause,
    MIN_RUNBOOK_EXCERPT,
    _parse_ts,
    _suspicious,
    _workload,
)


# --------------------------------------------------------------------------- what the tools returned


@dataclass
class LogLine:
    invocation_id: str
    index: int
    timestamp: str
    ts: float | None
    service: str
    level: str
    message: str
    raw_path: str | None = None  # where the message sits when it is not a log record (Kubernetes state, events)
    tool: str = "query_logs"

    @property
    def path(self) -> str:
        return self.raw_path or f"$.records[{self.index}].message"

    def binding(self) -> dict[str, str]:
        return _binding(self.invocation_id, self.tool, self.path, self.message)


class _Labelled:
    """A record named by its Prometheus labels (a series, an alert): its name and its service are labels."""

    NAME_LABEL: ClassVar[str]

    @property
    def name(self) -> str:
        return self.labels.get(self.NAME_LABEL, "")

    @property
    def service(self) -> str:
        return self.labels.get("service", "")


# Alike in shape to other record dataclasses (an id, labels, points) only: a field list, no logic to share.
@dataclass
class Series(_Labelled):
    invocation_id: str
    index: int
    labels: dict[str, str]
    points: list[tuple[float, float]]
    description: str
    baseline: float = 0.0
    noise: float = 0.0
    peak: float = 0.0
    trough: float = 0.0
    last: float = 0.0
    direction: str | None = None  # "up" | "down" | "saturated" | "changed" | None (near baseline)
    onset: float | None = None
    severity: float = 0.0
    limit: Series | None = None

    NAME_LABEL = "__name__"

    @property
    def anomalous(self) -> bool:
        return self.direction in ("up", "down", "saturated")

    def binding(self) -> dict[str, str]:
        return _binding(self.invocation_id, "query_metrics", f"$.series[{self.index}].description", self.description)


@dataclass
class Alert(_Labelled):
    invocation_id: str
    index: int
    labels: dict[str, str]
    summary: str
    description: str
    state: str
    active_at: str

    NAME_LABEL = "alertname"

    @property
    def text(self) -> str:
        return f"{self.name} {self.summary} {self.description}"

    @property
    def alarming(self) -> bool:
        """Firing, and not informational: an alert of severity ``info`` or ``none`` (kube-prometheus's
        CPUThrottlingHigh, its InfoInhibitor) reports a state worth knowing, not trouble to act on."""
        return self.state == "firing" and self.labels.get("severity", "").lower() not in ("info", "none")

    @property
    def priority(self) -> tuple:
        """Firing before pending, most severe first, oldest first."""
        severity = {"critical": 0, "page": 0, "error": 1, "warning": 2}.get(self.labels.get("severity", "").lower(), 3)
        return (0 if self.state == "firing" else 1, severity, self.active_at)

    def binding(self) -> dict[str, str]:
        return _binding(self.invocation_id, "query_alerts", f"$.alerts[{self.index}].annotations.summary", self.summary)


@dataclass
class KnowledgeChunk:
    invocation_id: str
    index: int
    title: str
    path: str
    content: str
    source_type: str

    def lines(self) -> Iterable[tuple[str, str]]:
        """(section heading, line) for every citable line of the chunk, list markers removed."""
        heading = ""
        for raw in self.content.splitlines():
            line = raw.strip()
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
                continue
            line = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", line).strip()
            if len(line) >= MIN_RUNBOOK_EXCERPT and " ".join(line.split()) in " ".join(self.content.split()):
                yield heading, line

    def binding(self, line: str) -> dict[str, str]:
        return _binding(self.invocation_id, "lookup_knowledge", f"$.results[{self.index}].content", line)


def _binding(invocation_id: str, tool: str, path: str, excerpt: str) -> dict[str, str]:
    return {"source_invocation_id": invocation_id, "tool_name": tool, "raw_path": path, "evidence_excerpt": excerpt}


@dataclass
class Pattern:
    """Repeated log lines of one service and level with the same shape."""

    service: str
    level: str
    template: str
    lines: list[LogLine]
    causes: tuple[str, ...]

    @property
    def first(self) -> LogLine:
        return self.lines[0]

    @property
    def count(self) -> int:
        return len(self.lines)


@dataclass
class Profile:
    """Everything one service showed in this run, and what it suggests."""

    service: str
    lines: list[LogLine] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)
    changes: list[LogLine] = field(default_factory=list)
    dependencies: Counter = field(default_factory=Counter)
    dependency_lines: dict[str, LogLine] = field(default_factory=dict)
    causes: Counter = field(default_factory=Counter)
    onset: float | None = None
    slow_lines: list[LogLine] = field(default_factory=list)  # lines stating a duration over the threshold

    @property
    def anomalies(self) -> list[Series]:
        # A series at its hard limit says more than any spike: it comes first.
        return sorted((s for s in self.series if s.anomalous), key=lambda s: (s.direction != "saturated", -s.severity))

    @property
    def problem_patterns(self) -> list[Pattern]:
        return [p for p in self.patterns if p.level in ("ERROR", "FATAL", "WARN")]

    @property
    def firing(self) -> list[Alert]:
        return [a for a in self.alerts if a.state in ("firing", "pending")]

    @property
    def has_signal(self) -> bool:
        """Something is wrong here: a metric moved, errors, warnings of a known failure, or an alert."""
        significant = [p for p in self.problem_patterns if p.level != "WARN" or p.causes]
        return bool(self.anomalies or significant or self.firing or self.slow)

    @property
    def slow(self) -> bool:
        """Several lines state durations over the threshold: one slow request is not a latency incident."""
        return len(self.slow_lines) >= SLOW_LINES_MIN

    def dominant_cause(self) -> Cause | None:
        if not self.causes:
            return None
        key, score = max(self.causes.items(), key=lambda kv: (kv[1], -_cause_rank(kv[0])))
        return CAUSE_BY_KEY[key] if score > 0 else None


def _cause_rank(key: str) -> int:
    return next(i for i, cause in enumerate(CAUSES) if cause.key == key)


SLOW_LINES_MIN = 3
K8S_FAILING_WAIT = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                              "CreateContainerError", "InvalidImageName", "RunContainerError"})


def kubernetes_lines(inv: str, result: Mapping[str, Any], seen: set) -> list[LogLine]:
    """Kubernetes state as log-like lines of the workload: Warning events, failing waits, last terminations.

    Each line's message is a value of the tool result, at its own path, so claims can quote it exactly.
    """
    lines: list[LogLine] = []
    for i, pod in enumerate(result.get("pods") or []):
        if not isinstance(pod, Mapping) or not isinstance(pod.get("name"), str):
            continue
        service = _workload(pod["name"])
        for j, c in enumerate(pod.get("containers") or []):
            if not isinstance(c, Mapping):
                continue
            for key, level in (("lastState", "ERROR"), ("state", "ERROR")):
                state = c.get(key)
                if not isinstance(state, Mapping) or not isinstance(state.get("reason"), str):
                    continue
                failing = state.get("state") == "terminated" and state.get("exitCode") not in (0, None)
                failing |= state.get("state") == "waiting" and state["reason"] in K8S_FAILING_WAIT
                if not failing:
                    continue
                when = state.get("finishedAt") or state.get("startedAt") or ""
                candidates = [(state_quote(state), f"$.pods[{i}].containers[{j}].{key}")]
                if isinstance(state.get("message"), str) and state["message"]:
                    candidates.append((state["message"], f"$.pods[{i}].containers[{j}].{key}.message"))
                for value, path in candidates:
                    if (service, value) not in seen and not _suspicious(value):
                        seen.add((service, value))
                        lines.append(LogLine(inv, -1, str(when), _parse_ts(when), service, level, value, path,
                                             "query_kubernetes"))
    for k, event in enumerate(result.get("events") or []):
        if not isinstance(event, Mapping) or not isinstance(event.get("message"), str) or event.get("type") != "Warning":
            continue
        target = str(event.get("object", "")).split("/", 1)[-1]
        service, message = _workload(target), event["message"]
        if (service, "event", message) in seen or _suspicious(message):
            continue
        seen.add((service, "event", message))
        when = event.get("lastTimestamp") or ""
        lines.append(LogLine(inv, -1, str(when), _parse_ts(when), service, "WARN", message, f"$.events[{k}].message",
                             "query_kubernetes"))
    return lines


def pair_limits(series: list[Series]) -> None:
    """`x_used_bytes` next to `x_max_bytes` (same other labels): saturated when the one meets the other."""
    by_key = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "__name__"))): s for s in series}
    for s in series:
        for word in ("used", "active", "in_use"):
            if f"_{word}_" not in f"_{s.name}_":
                continue
            others = tuple(sorted((k, v) for k, v in s.labels.items() if k != "__name__"))
            for limit_word in ("max", "limit", "capacity"):
                limit = by_key.get((re.sub(rf"(^|_){word}(_|$)", rf"\g<1>{limit_word}\g<2>", s.name), others))
                if limit and limit.last > 0:
                    s.limit = limit
                    if s.peak >= 0.98 * limit.last and s.baseline < 0.9 * limit.last:
                        up = s.peak - s.baseline
                        rel = up / abs(s.baseline) if s.baseline else 10.0
                        s.direction = "saturated"
                        s.onset = next((t for t, v in s.points if v >= 0.98 * limit.last), s.onset)
                        s.severity = 3 + min(up / max(s.noise, 1e-9), 60) / 10 + min(rel, 10)
