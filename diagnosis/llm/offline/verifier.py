"""The verifier role: checks each verified claim (a root cause against what its kind of fault needs to show,
localisation.kinds) and sets the verdict.

It reads claims as typed findings (``findings.read_finding``), never by matching their sentences, and
returns a typed ``VerifierReport`` (verifier_v1 as a dict at the boundary).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from diagnosis import i18n
from diagnosis.llm.offline.findings import (
    AlertFiring,
    Change,
    HealthyMetrics,
    LogPattern,
    MetricMove,
    NoTelemetry,
    NothingWrong,
    RootCause,
    finding_of,
)
from diagnosis.localisation.kinds import evident
from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID
from diagnosis.llm.offline.lexicon import LOG_LIMIT

TELEMETRY_TOOLS = ("query_logs", "query_metrics", "query_alerts")
# Views of a service that do not restate each other: a root cause two of them show is corroborated.
INDEPENDENT_VIEWS = frozenset({"query_logs", "query_metrics", "query_kubernetes", "query_traces"})
# What the verifier says, in the language of the question (the composer quotes it): English msgids,
# translated by diagnosis.i18n. A msgid a line, as answer_render and alert_render declare theirs: alike in
# shape only, each module owns the texts it writes.
PASS = i18n.mark("The root cause ({cause} in {service}) is supported by evidence from {tools}, checked against the "
                 "patterns of its category.")
FALLBACK = i18n.mark("the evidence shows where {service} broke but not the kind of fault")
SINGLE = i18n.mark("the root cause in {service} is supported only by {tools}")
GAP_METRICS = i18n.mark("{service}'s metrics would confirm or refute the root cause.")
GAP_LOGS = i18n.mark("{service}'s logs would confirm or refute the root cause.")
HEALTHY = i18n.mark("Metrics near baseline and logs without errors support that nothing is wrong.")
HEALTHY_THIN = i18n.mark("the no-anomaly finding rests on a single kind of telemetry")
NO_DATA = i18n.mark("no telemetry of {service} was found, so nothing can be concluded about it")
UNEXPLAINED = i18n.mark("some observations are supported, but no verified claim explains the incident")
GAP_ERRORS = i18n.mark("No verified root cause; the error lines of {service} may name it.")
REJECT = i18n.mark("No claim is supported by its evidence.")
CAPPED = i18n.mark(" Capped at the gatekeeper ceiling {ceiling}.")
RANK = {"REJECT": 0, "LOW_CONFID": 1, "PASS": 2}
SCORE = {"PASS": 0.9, "LOW_CONFID": 0.55, "REJECT": 0.1}


@dataclass
class ClaimCheck:
    claim_id: str
    supported: bool
    rationale: str
    evidence_refs: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"claim_id": self.claim_id, "supported": self.supported, "rationale": self.rationale,
                "evidence_refs": self.evidence_refs}


@dataclass
class VerifierReport:
    """The verifier's output: the verdict, its score, the checks and the evidence gaps to close."""

    verdict: str
    score: float
    claim_checks: list[ClaimCheck] = field(default_factory=list)
    fact_checks: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[dict[str, Any]] = field(default_factory=list)
    rationale: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "score": self.score, "claim_checks": [c.to_dict() for c in self.claim_checks],
                "fact_checks": self.fact_checks,
                "critical_evidence_gaps": self.gaps if self.verdict == "LOW_CONFID" else [], "rationale": self.rationale}


def verify(si: Mapping[str, Any]) -> VerifierReport:
    """The checks of the verified claims and the verdict they support, capped at the Gatekeeper's ceiling."""
    language = si.get("language") if si.get("language") in ("en", "zh") else "en"
    output = si.get("verified_executor_output") or {}
    claims = [c for c in output.get("claims") or [] if isinstance(c, Mapping)]
    ceiling = si.get("verdict_ceiling") if si.get("verdict_ceiling") in ("PASS", "LOW_CONFID", "REJECT") else "REJECT"
    checks = [_claim_check(claim) for claim in claims]
    supported = {check.claim_id: check.supported for check in checks}
    findings = {c.get("claim_id"): finding_of(c) for c in claims}
    def supported_of(kind: type) -> list[tuple[Mapping[str, Any], Any]]:
        return [(c, findings[c.get("claim_id")]) for c in claims
                if isinstance(findings[c.get("claim_id")], kind) and supported.get(c.get("claim_id"))]

    roots, nothing, unanswered = supported_of(RootCause), supported_of(NothingWrong), supported_of(NoTelemetry)
    if roots:
        judgement = _judge_root_cause(*roots[0], language)
    elif nothing:
        tools = {b.get("tool_name") for c in claims if supported.get(c.get("claim_id")) for b in c.get("evidence") or []}
        verdict = "PASS" if {"query_logs", "query_metrics"} <= tools else "LOW_CONFID"
        judgement = _Judgement(verdict, i18n.text(HEALTHY if verdict == "PASS" else HEALTHY_THIN, language),
                               [{"fact": "No anomaly was found in the verified evidence.", "consistent": True}])
    elif unanswered:
        service = unanswered[0][1].service
        judgement = _Judgement("LOW_CONFID", i18n.text(NO_DATA, language, service=service),
                               [{"fact": f"No log record or metric series of {service} was returned.",
                                 "consistent": True}])
    elif any(supported.values()):
        judgement = _judge_unexplained(findings, language)
    else:
        judgement = _Judgement("REJECT", i18n.text(REJECT, language))
    verdict, rationale = judgement.verdict, judgement.rationale
    if RANK[verdict] > RANK[ceiling]:
        rationale += i18n.text(CAPPED, language, ceiling=ceiling)
        verdict = ceiling
    score = SCORE[verdict]
    if claims:
        score = round(score * (0.8 + 0.2 * sum(supported.values()) / len(claims)), 3)
    return VerifierReport(verdict, score, checks, judgement.facts, judgement.gaps, rationale)


@dataclass
class _Judgement:
    """A verdict before the ceiling, its rationale, and the facts and evidence gaps behind it."""

    verdict: str
    rationale: str
    facts: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[dict[str, Any]] = field(default_factory=list)


def _claim_check(claim: Mapping[str, Any]) -> ClaimCheck:
    ok, why = _check_claim(claim)
    return ClaimCheck(
        claim.get("claim_id"), ok, why,
        [{"claim_id": claim.get("claim_id"), "source_invocation_id": b.get("source_invocation_id"),
          "tool_name": b.get("tool_name"), "raw_path": b.get("raw_path")}
         for b in claim.get("evidence") or [] if isinstance(b, Mapping)],
    )


def _judge_root_cause(claim: Mapping[str, Any], root: RootCause, language: str) -> _Judgement:
    """PASS when independent views corroborate a classified cause, else LOW_CONFID with the view to query."""
    service = root.service
    evidence = [b for b in claim.get("evidence") or [] if isinstance(b, Mapping)]
    tools = {b.get("tool_name") for b in evidence} & (set(TELEMETRY_TOOLS) | INDEPENDENT_VIEWS)
    listed = ", ".join(sorted(tools)) or "lookup_knowledge"
    # Logs and metrics are independent views of a service: a cause both show is corroborated.
    corroborated = {"query_logs", "query_metrics"} <= tools or (
        root.cause in CAUSE_KIND_BY_ID and len(tools & INDEPENDENT_VIEWS) >= 2)
    facts = [{"fact": f"The root-cause service {service} appears in the cited evidence.",
              "consistent": any(service in str(b.get("evidence_excerpt", "")) for b in evidence)},
             {"fact": f"The root cause is supported by logs and metrics (tools: {listed}).", "consistent": corroborated}]
    if root.cause not in CAUSE_KIND_BY_ID:
        # Where it broke without the kind of fault: never more than LOW_CONFID.
        return _Judgement("LOW_CONFID", i18n.text(FALLBACK, language, service=service), facts)
    if corroborated:
        return _Judgement("PASS", i18n.text(PASS, language, cause=root.cause, service=service, tools=listed), facts)
    missing = "query_metrics" if "query_metrics" not in tools else "query_logs"
    arguments = {"service": service} if missing == "query_metrics" else {"service": service, "limit": LOG_LIMIT}
    gap = {"gap": i18n.text(GAP_METRICS if missing == "query_metrics" else GAP_LOGS, language, service=service),
           "suggested_query": {"tool": missing, "arguments": arguments}}
    return _Judgement("LOW_CONFID", i18n.text(SINGLE, language, service=service, tools=listed), facts, [gap])


def _judge_unexplained(findings: Mapping[Any, Any], language: str) -> _Judgement:
    """Some observations verified, none explaining the incident: LOW_CONFID, asking for the error lines."""
    service = next((f.subject for f in findings.values()
                    if isinstance(f, (MetricMove, LogPattern, AlertFiring, Change)) and f.subject), None)
    gaps = [{"gap": i18n.text(GAP_ERRORS, language, service=service),
             "suggested_query": {"tool": "query_logs",
                                 "arguments": {"service": service, "query": "level:ERROR,WARN", "limit": LOG_LIMIT}}}
            ] if service else []
    return _Judgement("LOW_CONFID", i18n.text(UNEXPLAINED, language), [], gaps)


def _check_claim(claim: Mapping[str, Any]) -> tuple[bool, str]:
    evidence = [b for b in claim.get("evidence") or [] if isinstance(b, Mapping)]
    excerpts = " ".join(str(b.get("evidence_excerpt", "")) for b in evidence)
    if not evidence:
        return False, "No verified evidence."
    finding = finding_of(claim)
    if isinstance(finding, RootCause) and finding.cause in CAUSE_KIND_BY_ID:
        ok = len(evidence) >= 2 or evident(finding.cause, excerpts)
        return ok, ("The excerpts are the records the localisation rests on." if ok
                    else f"A single excerpt does not show a {finding.cause} fault.")
    if isinstance(finding, RootCause):
        return len(evidence) >= 2, "Unclassified root cause; supported only by the number of citations."
    if isinstance(finding, (MetricMove, HealthyMetrics)):
        names = [finding.metric] if isinstance(finding, MetricMove) else finding.metric_names
        ok = any(n and n in excerpts for n in names)
        return ok, "The cited series description matches the metric." if ok else "The cited series is another metric."
    return True, "The excerpt is quoted verbatim from the tool output."
