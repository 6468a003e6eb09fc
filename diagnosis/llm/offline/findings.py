"""Typed findings: what each claim of the executor states, as data.

The executor builds a ``Finding`` and renders its statement from it; the verifier and the composer get
the same ``Finding`` back with ``read_finding``. Between the roles the run carries only verified claims
(``claim_id``, ``statement``, ``evidence``: the Gatekeeper passes nothing else on), so the statement is
the wire format: every sentence shape is written and read here, in one place, and
``tests/offline/test_findings.py`` holds each shape to a round trip. No other module reads a statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import ClassVar, Mapping


@dataclass(frozen=True)
class Finding:
    """One statement of the executor, typed. Subclasses define its sentence and how to read it back."""

    PATTERN: ClassVar[re.Pattern[str]]

    def statement(self) -> str:
        raise NotImplementedError

    @classmethod
    def read(cls, statement: str) -> Finding | None:
        match = cls.PATTERN.match(statement)
        if not match:
            return None
        names = {f.name for f in fields(cls)}
        return cls(**{k: v or "" for k, v in match.groupdict().items() if k in names})

    @property
    def subject(self) -> str:
        """The service the finding is about ("" when none)."""
        return str(getattr(self, "service", "") or "")


@dataclass(frozen=True)
class RootCause(Finding):
    service: str
    cause: str  # a cause-kind id of the taxonomy ("network.dns"), or "unclassified" when none
    label: str
    affected: str = ""  # comma-separated services it explains
    trigger: str = ""  # the change it began after (quoted)
    error: str = ""  # the last error named by the fallback (quoted)
    asked: str = ""  # the service asked about, when the root is another one it depends on
    path: str = ""  # the dependency chain from the asked service to the root ("a → b → root")

    PATTERN = re.compile(r"^Root cause \((?P<cause>[a-z_.]+)\): (?P<service>\S+) — (?P<label>.+?)"
                         r"(?:: \"(?P<error>.*?)\")?\.(?: Affected: (?P<affected>[^.]+)\.)?"
                         r"(?: (?P<asked>\S+) is affected because of \S+, through (?P<path>\S+(?: → \S+)+)\.)?"
                         r"(?: It began after: \"(?P<trigger>.*)\"\.)?$", re.S)

    def statement(self) -> str:
        text = f"Root cause ({self.cause}): {self.service} — {self.label}"
        text += f": \"{self.error}\"." if self.error else "."
        if self.affected:
            text += f" Affected: {self.affected}."
        if self.asked and self.path:
            text += f" {self.asked} is affected because of {self.service}, through {self.path}."
        if self.trigger:
            text += f" It began after: \"{self.trigger}\"."
        return text

    @property
    def affected_services(self) -> list[str]:
        return [s.strip() for s in self.affected.split(",") if s.strip()]


@dataclass(frozen=True)
class NothingWrong(Finding):
    services: str

    PATTERN = re.compile(r"^No anomaly found for (?P<services>[^:]+):")

    def statement(self) -> str:
        return (f"No anomaly found for {self.services}: metrics stay near baseline, no error log lines, no firing alert. "
                "Nothing wrong was found.")


@dataclass(frozen=True)
class MetricMove(Finding):
    metric: str
    service: str
    direction: str  # up | down | saturated | changed
    detail: str

    PATTERN = re.compile(r"^Metric (?P<metric>\S+) of (?P<service>\S+) (?:is anomalous \((?P<direction>\w+)\): "
                         r"|(?P<changed>changed) )(?P<detail>.*)$", re.S)

    @classmethod
    def read(cls, statement: str) -> Finding | None:
        match = cls.PATTERN.match(statement)
        if not match:
            return None
        direction = match.group("direction") or "changed"
        return cls(match.group("metric"), match.group("service"), direction, match.group("detail"))

    def statement(self) -> str:
        if self.direction == "changed":
            return f"Metric {self.metric} of {self.service} changed {self.detail}"
        return f"Metric {self.metric} of {self.service} is anomalous ({self.direction}): {self.detail}"


@dataclass(frozen=True)
class QuietLogs(Finding):
    service: str
    quiet: str  # "no ERROR or WARN lines" | "no ERROR lines"
    count: str
    rest: str

    PATTERN = re.compile(r"^Logs of (?P<service>\S+): (?P<quiet>no ERROR(?: or WARN)? lines) among (?P<count>\d+) lines"
                         r"(?P<rest>.*)$", re.S)

    def statement(self) -> str:
        return f"Logs of {self.service}: {self.quiet} among {self.count} lines{self.rest}"


# Each finding is its fields, the pattern that reads its statement and the statement: alike in shape by design.
@dataclass(frozen=True)
class LogPattern(Finding):
    service: str
    count: str
    level: str
    rest: str

    PATTERN = re.compile(r"^Logs of (?P<service>\S+): (?P<count>\d+) (?P<level>[A-Z]+) (?P<rest>lines? like .*)$", re.S)

    def statement(self) -> str:
        return f"Logs of {self.service}: {self.count} {self.level} {self.rest}"


@dataclass(frozen=True)
class HealthyMetrics(Finding):
    service: str
    names: str

    PATTERN = re.compile(r"^Metrics of (?P<service>\S+) stay near baseline: (?P<names>.+)\.$", re.S)

    def statement(self) -> str:
        return f"Metrics of {self.service} stay near baseline: {self.names}."

    @property
    def metric_names(self) -> list[str]:
        return [n.strip() for n in self.names.split(",") if n.strip()]


@dataclass(frozen=True)
class AlertFiring(Finding):
    name: str
    state: str
    service: str
    rest: str

    PATTERN = re.compile(r"^Alert (?P<name>\S+) is (?P<state>\w+) for (?P<service>\S+)(?P<rest>.*)$", re.S)

    def statement(self) -> str:
        return f"Alert {self.name} is {self.state} for {self.service}{self.rest}"


@dataclass(frozen=True)
class RunbookMismatch(Finding):
    title: str
    cause: str
    metric: str
    service: str
    rest: str

    PATTERN = re.compile(r"^Runbook \"(?P<title>[^\"]*)\" points to (?P<cause>[a-z_]+), but (?P<metric>\S+) of "
                         r"(?P<service>\S+) stays near baseline(?P<rest>.*)$", re.S)

    def statement(self) -> str:
        return f"Runbook \"{self.title}\" points to {self.cause}, but {self.metric} of {self.service} stays near baseline{self.rest}"


@dataclass(frozen=True)
class RunbookAdvice(Finding):
    title: str
    advice: str

    PATTERN = re.compile(r"^Runbook \"(?P<title>[^\"]*)\" advises: (?P<advice>.*)$", re.S)

    def statement(self) -> str:
        return f"Runbook \"{self.title}\" advises: {self.advice}"


@dataclass(frozen=True)
class Change(Finding):
    service: str
    at: str
    rest: str

    PATTERN = re.compile(r"^Change in (?P<service>\S+) at (?P<at>\S+): (?P<rest>.*)$", re.S)

    def statement(self) -> str:
        return f"Change in {self.service} at {self.at}: {self.rest}"


@dataclass(frozen=True)
class Other(Finding):
    text: str

    PATTERN = re.compile(r"^(?P<text>.*)$", re.S)

    def statement(self) -> str:
        return self.text


# Order matters: the more specific shape first (quiet logs before log patterns, a mismatch before advice).
KINDS: tuple[type[Finding], ...] = (RootCause, NothingWrong, MetricMove, QuietLogs, LogPattern, HealthyMetrics,
                                    AlertFiring, RunbookMismatch, RunbookAdvice, Change)


def read_finding(statement: str) -> Finding:
    """The typed finding a statement was rendered from (``Other`` for a sentence of another writer)."""
    for kind in KINDS:
        found = kind.read(statement)
        if found is not None:
            return found
    return Other(statement)


def finding_of(claim: Mapping) -> Finding:
    return read_finding(str(claim.get("statement", "")))
