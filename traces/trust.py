"""The trust line of a run, for its page and its row in the list: the service asked about against the
root cause's service (flagged when they differ or when the asked service had no data), the verdict, an
undetermined or nothing-wrong diagnosis, and for an alert analysis its coverage (alerts analysed of
those received).

Plain data in, plain data out. The structured diagnosis is read defensively: ``subject``
(``services``, ``withoutData``), ``candidates`` and ``undetermined`` may be missing on runs stored
before they existed; the asked service then comes from the question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from diagnosis.contracts import SelfEvaluation

# A service as people name one in a question: a lowercase hyphenated word (payment-service, ledger-db).
SERVICE_WORD = re.compile(r"(?<![\w-])([a-z][a-z0-9]*(?:-[a-z0-9]+)+)(?![\w-])")
# An alert analysis's question lists "alertname (service)".
ALERT_SERVICE = re.compile(r"(?<=\s)\(([A-Za-z0-9][\w.-]*)\)")
AI_OPS = "AI_OPS"


@dataclass(frozen=True)
class TrustLine:
    asked: tuple[str, ...] = ()
    asked_source: str = ""  # "diagnosis" (its subject) or "question"
    root_service: str = ""
    verdict: str = ""
    verdict_source: str = ""  # "run", or "audit" when derived from a stored alert-analysis audit
    state: str = ""  # "undetermined" | "nothingWrong" | ""
    without_data: tuple[str, ...] = ()
    coverage: tuple[int, int] | None = None  # (analysed, received), alert analyses only
    flags: tuple[str, ...] = field(default=())

    @property
    def mismatch(self) -> bool:
        return bool(self.root_service and self.asked and self.root_service not in self.asked)

    @property
    def partial_coverage(self) -> bool:
        return self.coverage is not None and self.coverage[0] < self.coverage[1]


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(dict.fromkeys(str(v) for v in value if isinstance(v, str) and v.strip()))


def asked_services(question: str, flow: str) -> tuple[str, ...]:
    """The services a question names: for an alert analysis the alerts' services, otherwise its hyphenated
    lowercase words."""
    pattern = ALERT_SERVICE if flow == AI_OPS else SERVICE_WORD
    return tuple(dict.fromkeys(m for m in pattern.findall(question or "") if m != "-"))


def _audit_verdict(self_evaluation: Any) -> str:
    """An alert analysis's verdict from its stored rule figures, the rule of `AiOpsAgent.verdict`: REJECT
    with no verified claim, PASS when every claim is verified and every alert analysed, else LOW_CONFID."""
    rules = SelfEvaluation.read(self_evaluation).aiops_rule_evaluation
    verified, total = rules.get("claims_verified"), rules.get("claims_total")
    if not isinstance(verified, int) or not isinstance(total, int) or rules.get("degraded"):
        return ""
    if not verified:
        return "REJECT"
    analysed, received = rules.get("alerts_analysed"), rules.get("alerts_total")
    partial = isinstance(analysed, int) and isinstance(received, int) and analysed < received
    return "PASS" if verified == total and not partial else "LOW_CONFID"


def _coverage(diagnosis: dict, self_evaluation: Any) -> tuple[int, int] | None:
    coverage = _dict(diagnosis.get("coverage"))
    analysed, received = coverage.get("alertsAnalysed"), coverage.get("alertsReceived")
    if isinstance(analysed, int) and isinstance(received, int):
        return analysed, received
    rules = SelfEvaluation.read(self_evaluation).aiops_rule_evaluation
    analysed, received = rules.get("alerts_analysed"), rules.get("alerts_total")
    if isinstance(analysed, int) and isinstance(received, int):
        return analysed, received
    return None


def trust_line(*, flow: str, question: str, verdict: str, diagnosis: Any, degraded: bool = False,
               self_evaluation: Any = None) -> TrustLine:
    """The trust line of one run (`self_evaluation` only where it is loaded: the run page)."""
    diagnosis = _dict(diagnosis)
    subject = _dict(diagnosis.get("subject"))
    asked, source = _names(subject.get("services")), "diagnosis"
    if not asked:
        asked, source = asked_services(question, flow), "question"
    root = _dict(diagnosis.get("rootCause"))
    root_service = str(root.get("service") or "")  # a ranked `candidates` list is not a chosen root cause
    state = ""
    if diagnosis.get("nothingWrong") is True:
        state = "nothingWrong"
    elif flow != AI_OPS and diagnosis.get("undetermined") is True:  # an alert analysis has no single root
        state = "undetermined"
    verdict_source = "run" if verdict else ""
    if not verdict and flow == AI_OPS and not degraded:
        verdict = _audit_verdict(self_evaluation)
        verdict_source = "audit" if verdict else ""
    without = tuple(s for s in _names(subject.get("withoutData")) if not asked or s in asked)
    line = TrustLine(
        asked=asked if asked else (), asked_source=source if asked else "", root_service=root_service,
        verdict=verdict, verdict_source=verdict_source, state=state, without_data=without,
        coverage=_coverage(diagnosis, self_evaluation) if flow == AI_OPS else None,
    )
    flags = []
    if line.mismatch:
        flags.append("root cause on another service")
    if without:
        flags.append("no data for " + ", ".join(without))
    if line.partial_coverage:
        flags.append("not every alert analysed")
    return TrustLine(**{**line.__dict__, "flags": tuple(flags)})
