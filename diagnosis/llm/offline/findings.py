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
from string import Formatter
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


_WORD = r"\S+"  # a field's shape unless said otherwise: one word


def _pattern(template: str, shapes: Mapping[str, str]) -> re.Pattern[str]:
    """The regex that reads back a filled ``template``: its text as is, each field a named group."""
    parts = [re.escape(text) + (f"(?P<{name}>{shapes.get(name, _WORD)})" if name else "")
             for text, name, _, _ in Formatter().parse(template)]
    return re.compile("^" + "".join(parts) + "$", re.S)


@dataclass(frozen=True)
class Sentence(Finding):
    """A finding that is one sentence template: its statement fills the template, and its pattern is drawn
    from the same template, so what is written and what is read back cannot drift apart."""

    TEMPLATE: ClassVar[str]  # str.format fields, one per dataclass field
    SHAPES: ClassVar[Mapping[str, str]] = {}  # a field's regex when it is not one word

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "TEMPLATE" in cls.__dict__:
            cls.PATTERN = _pattern(cls.TEMPLATE, cls.SHAPES)

    def statement(self) -> str:
        return self.TEMPLATE.format(**{f.name: getattr(self, f.name) for f in fields(self)})


# The sentences below differ only in their words, each declared once: its fields, its template and the
# shape of the fields that are not one word.
_REST = {"rest": ".*"}


@dataclass(frozen=True)
class QuietLogs(Sentence):
    service: str
    quiet: str  # "no ERROR or WARN lines" | "no ERROR lines"
    count: str
    rest: str

    TEMPLATE = "Logs of {service}: {quiet} among {count} lines{rest}"
    SHAPES = {"quiet": r"no ERROR(?: or WARN)? lines", "count": r"\d+", **_REST}


@dataclass(frozen=True)
class LogPattern(Sentence):
    service: str
    count: str
    level: str
    rest: str

    TEMPLATE = "Logs of {service}: {count} {level} {rest}"
    SHAPES = {"count": r"\d+", "level": r"[A-Z]+", "rest": r"lines? like .*"}


@dataclass(frozen=True)
class HealthyMetrics(Sentence):
    service: str
    names: str

    TEMPLATE = "Metrics of {service} stay near baseline: {names}."
    SHAPES = {"names": ".+"}

    @property
    def metric_names(self) -> list[str]:
        return [n.strip() for n in self.names.split(",") if n.strip()]


@dataclass(frozen=True)
class AlertFiring(Sentence):
    name: str
    state: str
    service: str
    rest: str

    TEMPLATE = "Alert {name} is {state} for {service}{rest}"
    SHAPES = {"state": r"\w+", **_REST}


@dataclass(frozen=True)
class RunbookMismatch(Sentence):
    title: str
    cause: str
    metric: str
    service: str
    rest: str

    TEMPLATE = "Runbook \"{title}\" points to {cause}, but {metric} of {service} stays near baseline{rest}"
    SHAPES = {"title": r'[^"]*', "cause": r"[a-z_]+", **_REST}


@dataclass(frozen=True)
class RunbookAdvice(Sentence):
    title: str
    advice: str

    TEMPLATE = "Runbook \"{title}\" advises: {advice}"
    SHAPES = {"title": r'[^"]*', "advice": ".*"}


@dataclass(frozen=True)
class Change(Sentence):
    service: str
    at: str
    rest: str

    TEMPLATE = "Change in {service} at {at}: {rest}"
    SHAPES = _REST


@dataclass(frozen=True)
class NoTelemetry(Sentence):
    service: str
    rest: str

    TEMPLATE = "No telemetry of {service} was found: {rest}"
    SHAPES = _REST


@dataclass(frozen=True)
class Other(Sentence):
    text: str

    TEMPLATE = "{text}"
    SHAPES = {"text": ".*"}


# Order matters: the more specific shape first (quiet logs before log patterns, a mismatch before advice).
KINDS: tuple[type[Finding], ...] = (RootCause, NothingWrong, MetricMove, QuietLogs, LogPattern, HealthyMetrics,
                                    AlertFiring, RunbookMismatch, RunbookAdvice, Change, NoTelemetry)


def read_finding(statement: str) -> Finding:
    """The typed finding a statement was rendered from (``Other`` for a sentence of another writer)."""
    for kind in KINDS:
        found = kind.read(statement)
        if found is not None:
            return found
    return Other(statement)


def finding_of(claim: Mapping) -> Finding:
    return read_finding(str(claim.get("statement", "")))
