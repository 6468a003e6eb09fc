"""The verifier role: checks each verified claim (a root cause against what its kind of fault needs to show,
localisation.kinds) and sets the verdict.

It reads claims as typed findings (``findings.read_finding``), never by matching their sentences, and
returns a typed ``VerifierReport`` (verifier_v1 as a dict at the boundary).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from diagnosis.llm.offline.findings import (
    AlertFiring,
    Change,
    HealthyMetrics,
    LogPattern,
    MetricMove,
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
V = {  # what the verifier says, in the language of the question (the composer quotes it)
    "pass": {"en": "The root cause ({cause} in {service}) is supported by evidence from {tools}, checked against the "
                   "patterns of its category.",
             "zh": "根因（{service} 的 {cause}）得到 {tools} 的证据支持，且证据符合该类故障的特征。"},
    "fallback": {"en": "the evidence shows where {service} broke but not the kind of fault",
                 "zh": "证据显示了 {service} 出错的位置，但没有显示故障类型"},
    "single": {"en": "the root cause in {service} is supported only by {tools}",
               "zh": "{service} 的根因只有 {tools} 的证据支持"},
    "gap_metrics": {"en": "{service}'s metrics would confirm or refute the root cause.",
                    "zh": "需要 {service} 的指标来证实或否定该根因。"},
    "gap_logs": {"en": "{service}'s logs would confirm or refute the root cause.",
                 "zh": "需要 {service} 的日志来证实或否定该根因。"},
    "healthy": {"en": "Metrics near baseline and logs without errors support that nothing is wrong.",
                "zh": "指标保持在基线附近、日志中没有错误，支持“未发现异常”的结论。"},
    "healthy_thin": {"en": "the no-anomaly finding rests on a single kind of telemetry",
                     "zh": "“未发现异常”的结论只有一种遥测数据支持"},
    "unexplained": {"en": "some observations are supported, but no verified claim explains the incident",
                    "zh": "部分观察结果得到支持，但没有经过校验的结论能解释本次故障"},
    "gap_errors": {"en": "No verified root cause; the error lines of {service} may name it.",
                   "zh": "尚无经过校验的根因；{service} 的错误日志可能指明原因。"},
    "reject": {"en": "No claim is supported by its evidence.", "zh": "没有任何结论得到其证据的支持。"},
    "capped": {"en": " Capped at the gatekeeper ceiling {ceiling}.", "zh": "（受校验上限 {ceiling} 限制。）"},
}


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
    language = si.get("language") if si.get("language") in ("en", "zh") else "en"

    def say(key: str, **values: Any) -> str:
        return V[key][language].format(**values)

    output = si.get("verified_executor_output") or {}
    claims = [c for c in output.get("claims") or [] if isinstance(c, Mapping)]
    ceiling = si.get("verdict_ceiling") if si.get("verdict_ceiling") in ("PASS", "LOW_CONFID", "REJECT") else "REJECT"
    checks, supported = [], {}
    for claim in claims:
        ok, why = _check_claim(claim)
        supported[claim.get("claim_id")] = ok
        checks.append(ClaimCheck(
            claim.get("claim_id"), ok, why,
            [{"claim_id": claim.get("claim_id"), "source_invocation_id": b.get("source_invocation_id"),
              "tool_name": b.get("tool_name"), "raw_path": b.get("raw_path")}
             for b in claim.get("evidence") or [] if isinstance(b, Mapping)],
        ))
    findings = {c.get("claim_id"): finding_of(c) for c in claims}
    roots = [c for c in claims if isinstance(findings[c.get("claim_id")], RootCause) and supported.get(c.get("claim_id"))]
    nothing = [c for c in claims if isinstance(findings[c.get("claim_id")], NothingWrong) and supported.get(c.get("claim_id"))]
    gaps: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    if roots:
        root = findings[roots[0].get("claim_id")]
        service = root.service
        evidence = [b for b in roots[0].get("evidence") or [] if isinstance(b, Mapping)]
        tools = {b.get("tool_name") for b in evidence} & (set(TELEMETRY_TOOLS) | INDEPENDENT_VIEWS)
        listed = ", ".join(sorted(tools)) or "lookup_knowledge"
        # Logs and metrics are independent views of a service: a cause both show is corroborated.
        corroborated = {"query_logs", "query_metrics"} <= tools or (
            root.cause in CAUSE_KIND_BY_ID and len(tools & INDEPENDENT_VIEWS) >= 2)
        facts.append({"fact": f"The root-cause service {service} appears in the cited evidence.",
                      "consistent": any(service in str(b.get("evidence_excerpt", "")) for b in evidence)})
        facts.append({"fact": f"The root cause is supported by logs and metrics (tools: {listed}).", "consistent": corroborated})
        if root.cause not in CAUSE_KIND_BY_ID:
            # Where it broke without the kind of fault: never more than LOW_CONFID.
            verdict, rationale = "LOW_CONFID", say("fallback", service=service)
        elif corroborated:
            verdict, rationale = "PASS", say("pass", cause=root.cause, service=service, tools=listed)
        else:
            verdict, rationale = "LOW_CONFID", say("single", service=service, tools=listed)
            missing = "query_metrics" if "query_metrics" not in tools else "query_logs"
            arguments = {"service": service} if missing == "query_metrics" else {"service": service, "limit": LOG_LIMIT}
            gaps.append({"gap": say("gap_metrics" if missing == "query_metrics" else "gap_logs", service=service),
                         "suggested_query": {"tool": missing, "arguments": arguments}})
    elif nothing:
        tools = {b.get("tool_name") for c in claims if supported.get(c.get("claim_id")) for b in c.get("evidence") or []}
        verdict = "PASS" if {"query_logs", "query_metrics"} <= tools else "LOW_CONFID"
        rationale = say("healthy" if verdict == "PASS" else "healthy_thin")
        facts.append({"fact": "No anomaly was found in the verified evidence.", "consistent": True})
    elif any(supported.values()):
        verdict, rationale = "LOW_CONFID", say("unexplained")
        service = next((f.subject for f in findings.values()
                        if isinstance(f, (MetricMove, LogPattern, AlertFiring, Change)) and f.subject), None)
        if service:
            gaps.append({"gap": say("gap_errors", service=service),
                         "suggested_query": {"tool": "query_logs", "arguments": {"service": service, "query": "level:ERROR,WARN",
                                                                                 "limit": LOG_LIMIT}}})
    else:
        verdict, rationale = "REJECT", say("reject")
    rank = {"REJECT": 0, "LOW_CONFID": 1, "PASS": 2}
    if rank[verdict] > rank[ceiling]:
        rationale += say("capped", ceiling=ceiling)
        verdict = ceiling
    score = {"PASS": 0.9, "LOW_CONFID": 0.55, "REJECT": 0.1}[verdict]
    if claims:
        score = round(score * (0.8 + 0.2 * sum(supported.values()) / len(claims)), 3)
    return VerifierReport(verdict, score, checks, facts, gaps, rationale)


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
