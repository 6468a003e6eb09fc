# size: one owner for every cross-layer shape is this module's purpose; each shape is a few lines.
"""The shapes that cross layers, each declared once: ids, versions, verdicts, reason codes, the Gatekeeper
audit, executor evidence, self-evaluation, the orchestration trace and the run result.

Framework-free (stdlib only): the graph engine, the Gatekeeper, the agents, the services and the read side
all import from here. What a run stores in its JSON columns is parsed back once, here (`*.read`), and
the read side (trace API, console, evaluation, feedback) uses the typed result: no second parser.
A `read` never raises on odd stored data: it keeps what is well formed and drops the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# --------------------------------------------------------------------------- versions

TRACE_VERSION = "stategraph-v1"  # the orchestration trace
GATEKEEPER_VERSION = "gatekeeper-v1"  # the Gatekeeper audit
EXECUTOR_EVIDENCE_VERSION = "executor_evidence_v2"  # the executor's claims with citations
ANSWER_PLAN_VERSION = "answer_plan_v1"  # the composer's plan the server renders

# --------------------------------------------------------------------------- tools

# The localiser's ranking offered to a model as a tool: a hint of where to look, never evidence.
# The tool box runs it; the Gatekeeper refuses a citation of it (`ranking_not_evidence`).
RANKING_TOOL = "rank_root_causes"
# Tools whose results are runbook text, not observations of the incident: a claim citing only them is
# documentation, answered on the labelled path, never a diagnosis.
KNOWLEDGE_TOOLS = frozenset({"lookup_knowledge"})

# --------------------------------------------------------------------------- ids

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
RUN_ID_PATTERN = r"^run-[0-9a-f]{32}$"
INVOCATION_ID_BODY = r"inv-[0-9a-f]{8}"  # the short id a claim cites
INVOCATION_ID_PATTERN = rf"^{INVOCATION_ID_BODY}$"

SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
RUN_ID_RE = re.compile(RUN_ID_PATTERN)
INVOCATION_ID_RE = re.compile(INVOCATION_ID_PATTERN)
# An invocation id inside text, as a whole word ("see inv-0a1b2c3d").
INVOCATION_REF_RE = re.compile(rf"\b{INVOCATION_ID_BODY}\b")
# A citation token that is not part of a longer identifier (stricter than \b about "_").
CANONICAL_CITATION_RE = re.compile(rf"(?<![0-9A-Za-z_]){INVOCATION_ID_BODY}(?![0-9A-Za-z_])")
# A bracketed citation in rendered Markdown: "[inv-0a1b2c3d]".
BRACKETED_CITATION_RE = re.compile(rf"\[({INVOCATION_ID_BODY})\]")

# --------------------------------------------------------------------------- verdicts


class Verdict(StrEnum):
    """How far the evidence supports the answer (REJECT < LOW_CONFID < PASS)."""

    PASS = "PASS"
    LOW_CONFID = "LOW_CONFID"
    REJECT = "REJECT"


VERDICT_RANK = {Verdict.REJECT: 0, Verdict.LOW_CONFID: 1, Verdict.PASS: 2}
_BY_RANK = (Verdict.REJECT, Verdict.LOW_CONFID, Verdict.PASS)


def known_verdict(value: Any) -> Verdict | None:
    """The verdict if `value` is exactly one, else None (never raises on odd input)."""
    if isinstance(value, str):
        try:
            return Verdict(value)
        except ValueError:
            return None
    return None


def min_verdict(*verdicts: Any) -> Verdict:
    """The weakest of the verdicts; anything unknown counts as REJECT (and no verdict at all is REJECT)."""
    if not verdicts:
        return Verdict.REJECT
    return _BY_RANK[min(VERDICT_RANK.get(known_verdict(v), 0) for v in verdicts)]


def effective_verdict(model_verdict: Any, ceiling: Any) -> Verdict | None:
    """min(the Verifier's verdict, the Gatekeeper ceiling).

    - No readable model verdict (missing, not exactly PASS / LOW_CONFID / REJECT): None. The verifier gave
      no verdict, and none is invented: the topology routes it to the fallback (`unknown_verdict`) and the
      run's verdict stays null.
    - No readable ceiling: the verdict is capped at REJECT. Without a Gatekeeper verdict nothing is verified.
    """
    if known_verdict(model_verdict) is None:
        return None
    return min_verdict(model_verdict, ceiling)


# --------------------------------------------------------------------------- reason codes


class ReasonCode(StrEnum):
    """Why a node's run led where it did; stored per orchestration event and per trace transition.

    completed              node finished normally and moved on (composer: to END)
    invalid_output         INVALID_OUTPUT: retried (planner/verifier/composer) or, for the executor, fallback
    retryable_failed       RETRYABLE_FAILED with the technical retry still available: the node runs again
    retry_exhausted        a technical failure after the one retry was used: fallback
    non_retryable_failed   NON_RETRYABLE_FAILED: fallback
    tool_blocked           executor called a tool outside the allow-list: fallback
    failed                 executor FAILED: fallback
    missing_status         the node returned no status (or no gatekeeper verdict): fallback
    unknown_status         a status (or gatekeeper verdict) this node's table does not know: fallback
    gatekeeper_pass        gatekeeper PASS: verified_input
    gatekeeper_low_confid  gatekeeper LOW_CONFID with >= 1 verified binding: verified_input
    no_verified_binding    gatekeeper LOW_CONFID with zero verified bindings: fallback
    gatekeeper_reject      gatekeeper REJECT: fallback
    verdict_pass           verifier effective verdict PASS: composer
    verdict_reject         verifier effective verdict REJECT: composer (which makes no root-cause claim)
    evidence_gap           verifier LOW_CONFID with every evidence-retry guard met: evidence_retry
    evidence_retry_exhausted  LOW_CONFID, but the one evidence retry was already used: composer
    ceiling_below_pass     LOW_CONFID, but the gatekeeper ceiling no longer allows PASS: composer
    no_critical_gap        LOW_CONFID, but the verifier named no critical evidence gap: composer
    unknown_verdict        verifier COMPLETED without a readable verdict: fallback
    evidence_gap_only      evidence_retry prepared the EVIDENCE_GAP_ONLY planner phase: planner
    fallback_completed     fallback wrote the safe answer: END
    """

    COMPLETED = "completed"
    INVALID_OUTPUT = "invalid_output"
    RETRYABLE_FAILED = "retryable_failed"
    RETRY_EXHAUSTED = "retry_exhausted"
    NON_RETRYABLE_FAILED = "non_retryable_failed"
    TOOL_BLOCKED = "tool_blocked"
    FAILED = "failed"
    MISSING_STATUS = "missing_status"
    UNKNOWN_STATUS = "unknown_status"
    GATEKEEPER_PASS = "gatekeeper_pass"
    GATEKEEPER_LOW_CONFID = "gatekeeper_low_confid"
    NO_VERIFIED_BINDING = "no_verified_binding"
    GATEKEEPER_REJECT = "gatekeeper_reject"
    VERDICT_PASS = "verdict_pass"
    VERDICT_REJECT = "verdict_reject"
    EVIDENCE_GAP = "evidence_gap"
    EVIDENCE_RETRY_EXHAUSTED = "evidence_retry_exhausted"
    CEILING_BELOW_PASS = "ceiling_below_pass"
    NO_CRITICAL_GAP = "no_critical_gap"
    UNKNOWN_VERDICT = "unknown_verdict"
    EVIDENCE_GAP_ONLY = "evidence_gap_only"
    FALLBACK_COMPLETED = "fallback_completed"


class BindingReason(StrEnum):
    """Why one citation (binding) did or did not verify; the Gatekeeper's checks run in this order."""

    VERIFIED = "verified"
    MALFORMED_CLAIM = "malformed_claim"  # the claim around the binding is malformed or a duplicate
    MALFORMED_BINDING = "malformed_binding"  # not an object, or a field missing / not a string / empty
    INVOCATION_NOT_FOUND = "invocation_not_found"
    INVOCATION_OTHER_RUN = "invocation_other_run"  # the id exists, but only in another run
    RANKING_NOT_EVIDENCE = "ranking_not_evidence"  # it cites the `rank_root_causes` hint, never evidence
    TOOL_MISMATCH = "tool_mismatch"
    INVOCATION_FAILED = "invocation_failed"  # status is ERROR or BLOCKED (anything but SUCCESS)
    PATH_MALFORMED = "path_malformed"  # raw_path is outside the supported JSONPath subset
    PATH_NOT_EVIDENCE = "path_not_evidence"  # raw_path points into the result's `request` (an echo)
    PATH_NOT_FOUND = "path_not_found"
    EXCERPT_TOO_SHORT = "excerpt_too_short"
    EXCERPT_ECHOES_INPUT = "excerpt_echoes_input"  # it occurs in the question, a tool argument or a prompt
    EXCERPT_MISMATCH = "excerpt_mismatch"  # not in the cited value, or not on token boundaries


# --------------------------------------------------------------------------- lenient reading helpers


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _dicts(value: Any) -> tuple[dict, ...]:
    return tuple(item for item in _list(value) if isinstance(item, dict))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json(value: Any) -> Any:
    """A JSON column as stored; a string (an older driver's JSON text) is decoded."""
    if isinstance(value, (str, bytes)):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


# --------------------------------------------------------------------------- Gatekeeper audit

BINDING_FIELDS = ("source_invocation_id", "tool_name", "raw_path", "evidence_excerpt")


@dataclass(frozen=True)
class BindingAudit:
    source_invocation_id: Any
    tool_name: Any
    raw_path: Any
    evidence_excerpt: Any
    verified: bool
    reason_code: str

    def binding(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in BINDING_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        return {**self.binding(), "verified": self.verified, "reason_code": str(self.reason_code)}

    @classmethod
    def read(cls, data: dict) -> BindingAudit:
        return cls(**{name: data.get(name) for name in BINDING_FIELDS}, verified=data.get("verified") is True,
                   reason_code=str(data.get("reason_code") or ""))


@dataclass(frozen=True)
class ClaimAudit:
    claim_id: Any
    statement: Any
    verified: bool
    reason_code: str
    bindings: tuple[BindingAudit, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "statement": self.statement,
            "verified": self.verified,
            "reason_code": str(self.reason_code),
            "bindings": [b.to_dict() for b in self.bindings],
        }

    @classmethod
    def read(cls, data: dict) -> ClaimAudit:
        return cls(claim_id=data.get("claim_id"), statement=data.get("statement"), verified=data.get("verified") is True,
                   reason_code=str(data.get("reason_code") or ""),
                   bindings=tuple(BindingAudit.read(b) for b in _dicts(data.get("bindings"))))


@dataclass(frozen=True)
class GatekeeperResult:
    """The Gatekeeper's audit of one executor output (SPEC §5); `to_dict` is its stored form."""

    run_id: str
    verdict: Verdict
    reason_code: str
    verified_binding_count: int
    total_binding_count: int
    verified_claim_count: int
    total_claim_count: int
    claims: tuple[ClaimAudit, ...] = ()
    version: str = GATEKEEPER_VERSION
    verdict_ceiling: Verdict = field(init=False)
    citation_validity: float = field(init=False)

    def __post_init__(self) -> None:
        # The Verifier may never conclude more than the evidence allows: the ceiling is the verdict.
        object.__setattr__(self, "verdict_ceiling", self.verdict)
        validity = self.verified_binding_count / self.total_binding_count if self.total_binding_count else 0.0
        object.__setattr__(self, "citation_validity", validity)

    @property
    def audit(self) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.claims]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, for graph state and ``self_evaluation``; ``from_dict`` reverses it."""
        return {
            "version": self.version,
            "run_id": self.run_id,
            "verdict": str(self.verdict),
            "verdict_ceiling": str(self.verdict_ceiling),
            "reason_code": str(self.reason_code),
            "verified_binding_count": self.verified_binding_count,
            "total_binding_count": self.total_binding_count,
            "verified_claim_count": self.verified_claim_count,
            "total_claim_count": self.total_claim_count,
            "citation_validity": self.citation_validity,
            "audit": self.audit,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GatekeeperResult:
        """Rebuild a result stored with ``to_dict`` strictly (the write side); raise ValueError when it is not one."""
        try:
            claims = tuple(
                ClaimAudit(
                    claim_id=c["claim_id"], statement=c["statement"], verified=bool(c["verified"]),
                    reason_code=c["reason_code"],
                    bindings=tuple(
                        BindingAudit(**{name: b[name] for name in BINDING_FIELDS},
                                     verified=bool(b["verified"]), reason_code=b["reason_code"])
                        for b in c["bindings"]
                    ),
                )
                for c in data["audit"]
            )
            return cls(
                run_id=data["run_id"], verdict=Verdict(data["verdict"]), reason_code=data["reason_code"],
                verified_binding_count=int(data["verified_binding_count"]),
                total_binding_count=int(data["total_binding_count"]),
                verified_claim_count=int(data["verified_claim_count"]),
                total_claim_count=int(data["total_claim_count"]),
                claims=claims, version=data.get("version", GATEKEEPER_VERSION),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a stored gatekeeper result: {exc!r}") from exc


@dataclass(frozen=True)
class StoredAudit:
    """A stored Gatekeeper audit as the read side shows it, whatever its age: counts may be missing."""

    verdict: str = ""
    reason_code: str = ""
    version: str = ""
    claims: tuple[ClaimAudit, ...] = ()
    verified_claim_count: int | None = None
    total_claim_count: int | None = None
    verified_binding_count: int | None = None
    total_binding_count: int | None = None
    citation_validity: float | None = None

    @classmethod
    def read(cls, value: Any) -> StoredAudit | None:
        data = _dict(_json(value))
        if not data:
            return None
        validity = data.get("citation_validity")
        return cls(
            verdict=str(data.get("verdict") or ""), reason_code=str(data.get("reason_code") or ""),
            version=str(data.get("version") or ""),
            claims=tuple(ClaimAudit.read(c) for c in _dicts(data.get("audit"))),
            verified_claim_count=_int(data.get("verified_claim_count")), total_claim_count=_int(data.get("total_claim_count")),
            verified_binding_count=_int(data.get("verified_binding_count")),
            total_binding_count=_int(data.get("total_binding_count")),
            citation_validity=float(validity) if isinstance(validity, (int, float)) and not isinstance(validity, bool) else None,
        )


# --------------------------------------------------------------------------- executor evidence


# The executor's answer is parsed once, where it enters the graph (`ExecutorEvidence.parse`, called by the node
# adapter); the state, the Gatekeeper and the projection carry its `to_dict()` form, and a run's stored copy
# is read back with `ExecutorEvidence.read`. The wire schema sent to the model (diagnosis.llm.schemas) is
# generated with the same fields (tests/architecture/test_single_owners.py compares them).
EXECUTOR_SUMMARY_CHARS = 2000
EXECUTOR_MAX_CLAIMS = 50
EXECUTOR_MAX_OPEN_QUESTIONS = 20
EVIDENCE_CLAIM_FIELDS = ("claim_id", "statement", "evidence")
EXECUTOR_EVIDENCE_FIELDS = ("version", "summary", "claims", "open_questions")


class EvidenceShapeError(ValueError):
    """An executor answer that is not an `executor_evidence_v2` object; `field` names the first bad part."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class EvidenceClaim:
    """One claim of an `executor_evidence_v2` output: its id, its statement and its citations (binding dicts).

    As parsed from the executor (`ExecutorEvidence.parse`) a claim has a string id and a list of citations,
    and keeps whatever statement and citations the model wrote: the Gatekeeper audits each and names what is
    malformed. As read back from a run (`ExecutorEvidence.read`) only claims with a statement are kept, and
    only citations that are objects."""

    claim_id: Any
    statement: Any  # a str once read back; as parsed, what the model wrote
    evidence: tuple[Any, ...] = ()  # binding dicts once read back; as parsed, what the model wrote

    def to_dict(self) -> dict[str, Any]:
        return {"claim_id": self.claim_id, "statement": self.statement, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class ExecutorEvidence:
    """An `executor_evidence_v2` output: a summary, claims with citations and open questions."""

    version: str = EXECUTOR_EVIDENCE_VERSION
    summary: str = ""
    claims: tuple[EvidenceClaim, ...] = ()
    open_questions: tuple[str, ...] = ()

    @classmethod
    def parse(cls, value: Any) -> ExecutorEvidence:
        """The executor's answer where it enters the graph; EvidenceShapeError when it is not one. The summary,
        the claims and the open questions are bounded (EXECUTOR_*)."""
        if not isinstance(value, dict) or value.get("version") != EXECUTOR_EVIDENCE_VERSION:
            raise EvidenceShapeError(f"executor output must be an {EXECUTOR_EVIDENCE_VERSION} object", "version")
        if not isinstance(value.get("claims"), list):
            raise EvidenceShapeError("executor output needs a 'claims' list", "claims")
        for i, claim in enumerate(value["claims"]):
            if not isinstance(claim, dict) or not isinstance(claim.get("claim_id"), str) \
                    or not isinstance(claim.get("evidence"), list):
                raise EvidenceShapeError(f"claims[{i}] needs a claim_id and an evidence list", f"claims[{i}]")
        claims = tuple(EvidenceClaim(claim_id=c["claim_id"], statement=c.get("statement"), evidence=tuple(c["evidence"]))
                       for c in value["claims"][:EXECUTOR_MAX_CLAIMS])
        questions = tuple(q for q in _list(value.get("open_questions")) if isinstance(q, str))
        return cls(summary=str(value.get("summary", ""))[:EXECUTOR_SUMMARY_CHARS], claims=claims,
                   open_questions=questions[:EXECUTOR_MAX_OPEN_QUESTIONS])

    @classmethod
    def read(cls, value: Any) -> ExecutorEvidence:
        """A stored copy (never raises): claims with a statement, their citations that are objects."""
        data = _dict(_json(value))
        claims = tuple(
            EvidenceClaim(claim_id=c.get("claim_id"), statement=c["statement"], evidence=_dicts(c.get("evidence")))
            for c in _dicts(data.get("claims")) if isinstance(c.get("statement"), str) and c["statement"].strip()
        )
        summary = data.get("summary")
        return cls(version=str(data.get("version") or EXECUTOR_EVIDENCE_VERSION),
                   summary=summary if isinstance(summary, str) else "", claims=claims,
                   open_questions=tuple(q for q in _list(data.get("open_questions")) if isinstance(q, str)))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the graph state carries and a run stores."""
        return {"version": self.version, "summary": self.summary, "claims": [c.to_dict() for c in self.claims],
                "open_questions": list(self.open_questions)}


# --------------------------------------------------------------------------- self-evaluation


@dataclass(frozen=True)
class VerifierEvaluation:
    """`self_evaluation.verifier_evaluation` of a diagnosis run."""

    model_verdict: str | None = None
    effective_verdict: str | None = None
    verdict_ceiling: str | None = None
    gatekeeper_audit: StoredAudit | None = None
    verified_executor_output: ExecutorEvidence = field(default_factory=ExecutorEvidence)
    verified_evidence: tuple[dict, ...] = ()
    claim_checks: tuple[dict, ...] = ()
    suggestions: tuple[str, ...] = ()  # the served answer's advice that was not checked against evidence
    advice: tuple[dict, ...] = ()  # every next step served, with its flags (verified, destructive)
    raw: dict = field(default_factory=dict)

    @classmethod
    def read(cls, value: Any) -> VerifierEvaluation:
        data = _dict(value)
        text = lambda key: data[key] if isinstance(data.get(key), str) else None  # noqa: E731
        return cls(model_verdict=text("model_verdict"), effective_verdict=text("effective_verdict"),
                   verdict_ceiling=text("verdict_ceiling"), gatekeeper_audit=StoredAudit.read(data.get("gatekeeper_audit")),
                   verified_executor_output=ExecutorEvidence.read(data.get("verified_executor_output")),
                   verified_evidence=_dicts(data.get("verified_evidence")), claim_checks=_dicts(data.get("claim_checks")),
                   suggestions=tuple(s for s in _list(_dict(data.get("answer_render")).get("suggestions"))
                                     if isinstance(s, str)),
                   advice=advice_read(_dict(data.get("answer_render")).get("advice")),
                   raw=data)


def advice_read(value: Any) -> tuple[dict, ...]:
    """Served next steps as stored: ``{text, verified, destructive, claimId}`` each."""
    return tuple({"text": a["text"], "verified": a.get("verified") is True, "destructive": a.get("destructive") is True,
                  "claimId": a.get("claimId") if isinstance(a.get("claimId"), str) else None}
                 for a in _dicts(value) if isinstance(a.get("text"), str))


@dataclass(frozen=True)
class SelfEvaluation:
    """A run's `self_evaluation` column: the rule evaluation (chat) or the alert analysis's, the verifier's
    evaluation with the Gatekeeper audit, the alert analysis's audit and the prompt audit."""

    rule_evaluation: dict = field(default_factory=dict)
    verifier: VerifierEvaluation = field(default_factory=VerifierEvaluation)
    aiops_rule_evaluation: dict = field(default_factory=dict)
    aiops_audit: dict = field(default_factory=dict)
    prompt_audit: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)

    @classmethod
    def read(cls, value: Any) -> SelfEvaluation:
        data = _dict(_json(value))
        return cls(rule_evaluation=_dict(data.get("rule_evaluation")),
                   verifier=VerifierEvaluation.read(data.get("verifier_evaluation")),
                   aiops_rule_evaluation=_dict(data.get("aiops_rule_evaluation")), aiops_audit=_dict(data.get("aiops_audit")),
                   prompt_audit=_dict(data.get("prompt_audit")), raw=data)

    @property
    def served_suggestions(self) -> tuple[str, ...]:
        """The labelled, unchecked advice of what was served: the answer's, or the alert report's."""
        if self.verifier.suggestions:
            return self.verifier.suggestions
        render = _dict(self.aiops_audit.get("report_render"))
        return tuple(s for s in _list(render.get("suggestions")) if isinstance(s, str))

    @property
    def served_advice(self) -> tuple[dict, ...]:
        return self.verifier.advice or advice_read(_dict(self.aiops_audit.get("report_render")).get("advice"))

    @property
    def stored_verdict(self) -> Verdict | None:
        """The verdict of what was served, as computed once when the run finished and stored beside its
        column: the chat answer's (`verifier_evaluation.effective_verdict`) or the alert report's
        (`aiops_rule_evaluation.verdict`); None when neither was stored (a degraded answer, an older run)."""
        return known_verdict(self.verifier.effective_verdict) or known_verdict(self.aiops_rule_evaluation.get("verdict"))

    @property
    def verified_claims(self) -> tuple[EvidenceClaim, ...]:
        """The claims the Gatekeeper verified (with their verified citations only)."""
        return self.verifier.verified_executor_output.claims


# --------------------------------------------------------------------------- structured diagnosis


@dataclass(frozen=True)
class StructuredDiagnosis:
    """A run's `diagnosis` column: {rootCause: {service, cause, summary, startedAt, claimIds} | null,
    nothingWrong, undetermined, symptoms}, and the localiser's view kept beside it (a hint:
    diagnosis.ranking_view): candidates, localisation, agreement; `ranked` is false for runs recorded
    before it was kept."""

    root_cause: dict | None = None
    nothing_wrong: bool = False
    undetermined: bool = False
    symptoms: tuple[dict, ...] = ()
    ranked: bool = False
    candidates: tuple[dict, ...] = ()
    localisation: dict | None = None
    agreement: str | None = None

    @classmethod
    def read(cls, value: Any) -> StructuredDiagnosis:
        data = _dict(_json(value))
        root = data.get("rootCause")
        localisation = data.get("localisation")
        return cls(root_cause=root if isinstance(root, dict) else None, nothing_wrong=data.get("nothingWrong") is True,
                   undetermined=bool(data.get("undetermined")), symptoms=_dicts(data.get("symptoms")),
                   ranked="candidates" in data, candidates=_dicts(data.get("candidates")),
                   localisation=localisation if isinstance(localisation, dict) else None,
                   agreement=data.get("agreement") if isinstance(data.get("agreement"), str) else None)


# --------------------------------------------------------------------------- orchestration trace


def orchestration_trace_read(value: Any) -> dict | None:
    """The stored orchestration trace when it is a `stategraph-v1` object; None for anything else."""
    value = _json(value)
    if isinstance(value, dict) and value.get("version") == TRACE_VERSION:
        return value
    return None


# --------------------------------------------------------------------------- progress events derived from rows
# The SSE payloads of a step's start and end and of a tool call, built from the row's fields both when
# the event is pushed live and when it is read back: one shape, whichever way a client receives it.


def step_started_event(*, step_index: int, node: str, attempt: int) -> dict[str, Any]:
    return {"stepIndex": step_index, "node": node, "attempt": attempt, "status": "RUNNING"}


def step_finished_event(*, step_id: int, status: str, duration_ms: int | None, has_tool_call: bool) -> dict[str, Any]:
    return {"stepId": step_id, "status": status, "durationMs": duration_ms, "hasToolCall": has_tool_call}


def tool_event(*, invocation_id: str, tool_name: str, status: str, duration_ms: int | None, replay: bool,
               replay_mode: str) -> dict[str, Any]:
    """`replayMode` only in a replay: how the recorded call served it, None when none did."""
    event = {"invocationId": invocation_id, "toolName": tool_name, "status": status, "durationMs": duration_ms}
    if replay:
        event["replayMode"] = replay_mode or None
    return event


# --------------------------------------------------------------------------- run result


@dataclass(frozen=True)
class RunCounts:
    """What a run used: steps, tool calls, tokens, the models and the prompt catalog."""

    step_count: int = 0
    tool_count: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_name: str = ""
    prompt_version: str = ""


@dataclass(frozen=True)
class RunResult:
    """What an executed run hands to persistence: the answer and its audit (SPEC §7). A failed run keeps
    the partial audit that really exists (answer empty)."""

    answer: str = ""
    degraded: bool = False
    effective_verdict: Verdict | None = None  # null when the degraded fallback answer is served
    diagnosis: dict | None = None
    self_evaluation: dict | None = None
    orchestration_trace: dict | None = None
