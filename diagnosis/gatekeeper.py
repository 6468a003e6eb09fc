# size: a citation's checks run in one documented order over shared helpers; splitting them would scatter it.
"""The evidence Gatekeeper (SPEC §5): deterministic checks of every claim citation against the tool
output really recorded in *this* run, and the projection of what passed for the Verifier and Composer.

Stdlib only; the database is reached through the ``InvocationLookup`` protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any, Protocol

from diagnosis.contracts import (  # noqa: F401 - the audit's shapes, owned by contracts, used with the checks
    BINDING_FIELDS, EXECUTOR_EVIDENCE_VERSION, GATEKEEPER_VERSION, KNOWLEDGE_TOOLS, RANKING_TOOL, BindingAudit,
    BindingReason, ClaimAudit, EvidenceClaim, ExecutorEvidence, GatekeeperResult, Verdict,
)
from diagnosis.jsonpath import NOT_FOUND, JsonPathError, Segment, parse, resolve_segments
from diagnosis.model_text import cap_text, foreign_citations, normalise_model_text

INVOCATION_SUCCESS = "SUCCESS"

# Minimum excerpt length after whitespace normalisation; CJK characters count double, so 6 CJK
# characters pass. The floor keeps a one-character excerpt failing whatever the caller passes.
DEFAULT_MIN_EXCERPT_CHARS = 12
MIN_EXCERPT_CHARS_FLOOR = 2
# The part of every tool result that records what was asked (arguments, query, service, notes
# about them): the model's own words, never evidence.
REQUEST_KEY = "request"


class ClaimReason(StrEnum):
    VERIFIED = "verified"
    NO_VERIFIED_BINDING = "no_verified_binding"
    NO_BINDINGS = "no_bindings"
    # not an object; claim_id or statement not a non-empty string; evidence not a list
    MALFORMED_CLAIM = "malformed_claim"
    DUPLICATE_CLAIM_ID = "duplicate_claim_id"  # a later claim reusing an earlier claim_id
    # the statement carries an id-like token that is not a canonical citation of its own verified
    # bindings, or repeats a system prompt: it would put unchecked words in front of the reader
    STATEMENT_NOT_ALLOWED = "statement_not_allowed"


class OutcomeReason(StrEnum):
    """Why the run got its verdict (usable as the gatekeeper node's orchestration reason_code)."""

    ALL_CLAIMS_VERIFIED = "all_claims_verified"
    SOME_CLAIMS_VERIFIED = "some_claims_verified"
    NO_CLAIM_VERIFIED = "no_claim_verified"
    NO_CLAIMS = "no_claims"
    KNOWLEDGE_ONLY = "knowledge_only"  # every verified citation is a runbook or a past case: LOW_CONFID at most
    MALFORMED_OUTPUT = "malformed_output"
    UNSUPPORTED_VERSION = "unsupported_version"


@dataclass(frozen=True)
class InvocationRecord:
    """One stored tool invocation, as the Gatekeeper needs it (``result`` is the decoded stored JSON)."""

    invocation_id: str
    run_id: str
    tool_name: str
    status: str
    result: Any


class InvocationLookup(Protocol):
    def lookup(self, invocation_ids: Collection[str]) -> Iterable[InvocationRecord]:
        """Every stored invocation with one of these ids, from any run, in one batch."""
        ...


# --- excerpt matching --------------------------------------------------------------------------

_WIDE_CHARS = re.compile(
    "[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7a3"
    "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\U00020000-\U0003fffd]"
)


def normalise_whitespace(text: str) -> str:
    """Collapse every run of (Unicode) whitespace to one space and trim the ends."""
    return " ".join(text.split())


def excerpt_length(text: str) -> int:
    """Length of an already normalised excerpt, counting CJK / full-width characters double."""
    return len(text) + len(_WIDE_CHARS.findall(text))


def _string_form(value: Any) -> str:
    """What an excerpt is matched against for the value at ``raw_path``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return str(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except TypeError:  # not pure JSON (a datetime from a careless lookup): still compare its text
        pass
    except (ValueError, RecursionError):
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        return ""


def _string_leaves(value: Any) -> Iterable[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


_ASCII_WORD = re.compile(r"[0-9A-Za-z]")


@lru_cache(maxsize=1024)
def _excerpt_pattern(needle: str) -> re.Pattern[str]:
    """A normalised excerpt as a regex whose spaces match any whitespace run.

    Searching the raw value with it is the same as a substring test on the normalised value, without
    normalising (copying) a multi-megabyte value first. Only literals and ``\\s+``: no backtracking blow-up.
    An excerpt must begin and end on token boundaries: one that starts (ends) with a letter or digit
    may not continue a word of the value ("ment-serv" does not match inside "payment-service").
    """
    body = r"\s+".join(re.escape(token) for token in needle.split(" "))
    head = r"(?<![0-9A-Za-z])" if needle and _ASCII_WORD.match(needle[0]) else ""
    tail = r"(?![0-9A-Za-z])" if needle and _ASCII_WORD.match(needle[-1]) else ""
    return re.compile(head + body + tail)


def _echo_key(text: str) -> str:
    return " ".join(normalise_model_text(text).casefold().split())


class EchoSources:
    """The run's inputs an excerpt may not merely repeat: the question, the tool arguments, the prompts."""

    def __init__(self, texts: Iterable[Any] = ()) -> None:
        self._texts = [_echo_key(t) for t in texts if isinstance(t, str) and t.strip()]

    def echoes(self, needle: str) -> bool:
        key = _echo_key(needle)
        return bool(key) and any(key in text for text in self._texts)


class _Haystacks:
    """The text of each cited value, built once per (invocation, path) and only on demand.

    For an object or list the excerpt may lie inside one of its string values, or else match its
    JSON text: JSON escapes quotes and newlines, so a log message quoted verbatim while citing the
    whole record would never match the JSON text alone. The string values are joined with NUL, which
    a matching excerpt may not contain, so a match never spans two values.
    """

    def __init__(self) -> None:
        self._text: dict[tuple[str, tuple[Segment, ...]], str] = {}
        self._leaves: dict[tuple[str, tuple[Segment, ...]], str] = {}

    def contains(self, key: tuple[str, tuple[Segment, ...]], value: Any, needle: str) -> bool:
        pattern = _excerpt_pattern(needle)
        # Inside a container, most excerpts quote a string value: search those first, they are
        # cheaper to build than the JSON text of a multi-megabyte result.
        if isinstance(value, (Mapping, list, tuple)) and "\x00" not in needle:
            leaves = self._leaves.get(key)
            if leaves is None:
                leaves = self._leaves[key] = "\x00".join(_string_leaves(value))
            if pattern.search(leaves):
                return True
        text = self._text.get(key)
        if text is None:
            text = self._text[key] = _string_form(value)
        return pattern.search(text) is not None


# --- verification --------------------------------------------------------------------------------


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


AUDIT_TEXT_MAX_CHARS = 2000


def _audit_value(value: Any) -> Any:
    """Keep what the executor sent in the audit, but always JSON-serialisable and bounded (a cut
    string carries a marker saying how much was cut)."""
    if isinstance(value, str):
        return cap_text(value, AUDIT_TEXT_MAX_CHARS)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        text = repr(type(value))
    return text[:200]


def _binding_audit(binding: Any, reason: BindingReason) -> BindingAudit:
    fields = binding if isinstance(binding, Mapping) else {}
    return BindingAudit(
        **{name: _audit_value(fields.get(name)) for name in BINDING_FIELDS},
        verified=reason is BindingReason.VERIFIED,
        reason_code=reason,
    )


def _well_formed_binding(binding: Any) -> bool:
    if not isinstance(binding, Mapping):
        return False
    ids = (binding.get("source_invocation_id"), binding.get("tool_name"), binding.get("raw_path"))
    return all(_is_text(v) for v in ids) and isinstance(binding.get("evidence_excerpt"), str)


def _claim_shape(claim: Any) -> tuple[ClaimReason | None, list[Any]]:
    """(None, bindings) for a well-formed claim, else (reason, whatever bindings can be audited)."""
    if not isinstance(claim, Mapping):
        return ClaimReason.MALFORMED_CLAIM, []
    evidence = claim.get("evidence")
    if not isinstance(evidence, (list, tuple)):
        return ClaimReason.MALFORMED_CLAIM, []
    if not (_is_text(claim.get("claim_id")) and _is_text(claim.get("statement"))):
        return ClaimReason.MALFORMED_CLAIM, list(evidence)
    return None, list(evidence)


class _BindingChecker:
    def __init__(self, run_id: str, records: Mapping[str, list[Any]], min_chars: int, echoes: EchoSources) -> None:
        self._run_id = run_id
        self._records = records
        self._min_chars = min_chars
        self._echoes = echoes
        self._haystacks = _Haystacks()

    def check(self, binding: Any) -> BindingReason:
        if not _well_formed_binding(binding):
            return BindingReason.MALFORMED_BINDING
        invocation_id = binding["source_invocation_id"]
        candidates = self._records.get(invocation_id)
        if not candidates:
            return BindingReason.INVOCATION_NOT_FOUND
        # Invocation ids are unique per run only: pick this run's record among all the runs'.
        record = next((r for r in candidates if r.run_id == self._run_id), None)
        if record is None:
            return BindingReason.INVOCATION_OTHER_RUN
        if record.tool_name == RANKING_TOOL or binding["tool_name"] == RANKING_TOOL:
            return BindingReason.RANKING_NOT_EVIDENCE  # a hint of where to look: claims cite the records it names
        if record.tool_name != binding["tool_name"]:
            return BindingReason.TOOL_MISMATCH
        if record.status != INVOCATION_SUCCESS:
            return BindingReason.INVOCATION_FAILED
        try:
            segments = parse(binding["raw_path"])
        except JsonPathError:
            return BindingReason.PATH_MALFORMED
        if segments and segments[0] == REQUEST_KEY:
            return BindingReason.PATH_NOT_EVIDENCE
        value = resolve_segments(observed_part(record.result), segments)
        if value is NOT_FOUND:
            return BindingReason.PATH_NOT_FOUND
        needle = normalise_whitespace(binding["evidence_excerpt"])
        if excerpt_length(needle) < self._min_chars:
            return BindingReason.EXCERPT_TOO_SHORT
        if self._echoes.echoes(needle):
            return BindingReason.EXCERPT_ECHOES_INPUT
        if not self._haystacks.contains((invocation_id, segments), value, needle):
            return BindingReason.EXCERPT_MISMATCH
        return BindingReason.VERIFIED


def observed_part(result: Any) -> Any:
    """A tool result without its ``request`` part: what citations resolve against."""
    if isinstance(result, Mapping) and REQUEST_KEY in result:
        return {k: v for k, v in result.items() if k != REQUEST_KEY}
    return result


def _rejected(run_id: str, reason: OutcomeReason) -> GatekeeperResult:
    return GatekeeperResult(
        run_id=run_id, verdict=Verdict.REJECT, reason_code=reason, verified_binding_count=0,
        total_binding_count=0, verified_claim_count=0, total_claim_count=0,
    )


def _fetch_records(lookup: InvocationLookup, ids: set[str]) -> dict[str, list[Any]]:
    records: dict[str, list[Any]] = {}
    if not ids:
        return records
    for record in lookup.lookup(tuple(sorted(ids))):
        invocation_id = getattr(record, "invocation_id", None)
        if invocation_id in ids:
            records.setdefault(invocation_id, []).append(record)
    return records


def verify_bindings(
    *,
    executor_output: Any,
    run_id: str,
    lookup: InvocationLookup,
    min_excerpt_chars: int = DEFAULT_MIN_EXCERPT_CHARS,
    echo_sources: Iterable[Any] = (),
    statement_echoes: Callable[[str], bool] | None = None,
) -> GatekeeperResult:
    """Check every claim citation of an ``executor_evidence_v2`` output against this run's invocations.

    ``echo_sources`` are the run's inputs (question, tool arguments, system prompts): an excerpt
    occurring in one of them proves nothing and fails with ``excerpt_echoes_input``. A claim whose
    statement carries an id-like token other than a canonical citation of its own verified bindings,
    or for which ``statement_echoes`` (the prompt-echo guard) is true, is not verified
    (``statement_not_allowed``).

    Never raises on a malformed executor output (it yields REJECT or failing bindings); errors of
    the lookup itself (the database) propagate to the caller.

    Why it is long: the audit in its order: the output's shape, one lookup of every cited invocation, each
    claim's bindings, then the verdict from the counts; split, the counts and the verdict could be read from
    different passes."""
    if not _is_text(run_id):
        raise ValueError("run_id must be a non-empty string")
    min_chars = max(MIN_EXCERPT_CHARS_FLOOR, int(min_excerpt_chars))
    if not isinstance(executor_output, Mapping):
        return _rejected(run_id, OutcomeReason.MALFORMED_OUTPUT)
    if executor_output.get("version") != EXECUTOR_EVIDENCE_VERSION:
        return _rejected(run_id, OutcomeReason.UNSUPPORTED_VERSION)
    raw_claims = executor_output.get("claims")
    if not isinstance(raw_claims, (list, tuple)):
        return _rejected(run_id, OutcomeReason.MALFORMED_OUTPUT)
    if not raw_claims:
        return _rejected(run_id, OutcomeReason.NO_CLAIMS)

    shaped: list[tuple[Any, ClaimReason | None, list[Any]]] = []
    seen_ids: set[str] = set()
    for claim in raw_claims:
        problem, bindings = _claim_shape(claim)
        if problem is None:
            if claim["claim_id"] in seen_ids:
                problem = ClaimReason.DUPLICATE_CLAIM_ID
            seen_ids.add(claim["claim_id"])
        shaped.append((claim, problem, bindings))

    wanted = {
        b["source_invocation_id"]
        for _, problem, bindings in shaped
        if problem is None
        for b in bindings
        if _well_formed_binding(b)
    }
    checker = _BindingChecker(run_id, _fetch_records(lookup, wanted), min_chars, EchoSources(echo_sources))

    audits: list[ClaimAudit] = []
    for claim, problem, bindings in shaped:
        fields = claim if isinstance(claim, Mapping) else {}
        claim_id, statement = _audit_value(fields.get("claim_id")), _audit_value(fields.get("statement"))
        if problem is not None:
            binding_audits = tuple(_binding_audit(b, BindingReason.MALFORMED_CLAIM) for b in bindings)
            audits.append(ClaimAudit(claim_id, statement, False, problem, binding_audits))
            continue
        binding_audits = tuple(_binding_audit(b, checker.check(b)) for b in bindings)
        verified = any(b.verified for b in binding_audits)
        own_ids = {b.source_invocation_id for b in binding_audits if b.verified}
        if verified and (foreign_citations(claim["statement"], own_ids)
                         or (statement_echoes is not None and statement_echoes(claim["statement"]))):
            verified, reason = False, ClaimReason.STATEMENT_NOT_ALLOWED
        elif verified:
            reason = ClaimReason.VERIFIED
        else:
            reason = ClaimReason.NO_VERIFIED_BINDING if binding_audits else ClaimReason.NO_BINDINGS
        audits.append(ClaimAudit(claim_id, statement, verified, reason, binding_audits))

    verified_claims = sum(1 for c in audits if c.verified)
    verified_tools = {b.tool_name for c in audits for b in c.bindings if b.verified}
    if verified_claims and verified_tools <= KNOWLEDGE_TOOLS:
        # Runbooks and past cases are knowledge, not observations of this incident.
        verdict, outcome = Verdict.LOW_CONFID, OutcomeReason.KNOWLEDGE_ONLY
    elif verified_claims == len(audits):
        verdict, outcome = Verdict.PASS, OutcomeReason.ALL_CLAIMS_VERIFIED
    elif verified_claims:
        verdict, outcome = Verdict.LOW_CONFID, OutcomeReason.SOME_CLAIMS_VERIFIED
    else:
        verdict, outcome = Verdict.REJECT, OutcomeReason.NO_CLAIM_VERIFIED
    return GatekeeperResult(
        run_id=run_id,
        verdict=verdict,
        reason_code=outcome,
        verified_binding_count=sum(1 for c in audits for b in c.bindings if b.verified),
        total_binding_count=sum(len(c.bindings) for c in audits),
        verified_claim_count=verified_claims,
        total_claim_count=len(audits),
        claims=tuple(audits),
    )


# --- projection and verdicts ------------------------------------------------------------------------


def _executor_citations(executor_output: Any) -> set[tuple[Any, ...]]:
    """Every (claim_id, statement, *binding fields) the executor really emitted."""
    citations: set[tuple[Any, ...]] = set()
    claims = executor_output.get("claims") if isinstance(executor_output, Mapping) else None
    for claim in claims if isinstance(claims, (list, tuple)) else []:
        if not isinstance(claim, Mapping) or not isinstance(claim.get("evidence"), (list, tuple)):
            continue
        # Compared with the audit's own (JSON-serialisable, hashable) form of each value: a claim whose
        # statement is a list or an object is malformed and never verified, but must not crash here.
        claim_id, statement = _audit_value(claim.get("claim_id")), _audit_value(claim.get("statement"))
        for b in claim["evidence"]:
            if _well_formed_binding(b):
                citations.add((claim_id, statement, *(_audit_value(b[name]) for name in BINDING_FIELDS)))
    return citations


def project_verified_input(
    *,
    executor_output: Any,
    gatekeeper_result: GatekeeperResult | Mapping[str, Any],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Only the verified claims, each with only its verified bindings, plus the flat evidence list.

    The projection is built from the audit, never from free text: the executor's ``summary`` is
    replaced by a neutral note and ``open_questions`` is emptied, because neither was verified.
    ``gatekeeper_result`` may be the result or its ``to_dict()`` form. Raises ValueError when the
    result verified a citation that ``executor_output`` does not contain (a wiring error).
    """
    result = gatekeeper_result
    if not isinstance(result, GatekeeperResult):
        result = GatekeeperResult.from_dict(result)
    emitted = _executor_citations(executor_output)
    claims: list[EvidenceClaim] = []
    evidence: list[dict[str, Any]] = []
    for claim in result.claims:
        kept = [b for b in claim.bindings if b.verified]
        if not claim.verified or not kept:
            continue
        for b in kept:
            if (claim.claim_id, claim.statement, *b.binding().values()) not in emitted:
                raise ValueError(f"gatekeeper result does not match executor_output (claim {claim.claim_id!r})")
        bindings = [b.binding() for b in kept]
        claims.append(EvidenceClaim(claim_id=claim.claim_id, statement=claim.statement, evidence=tuple(bindings)))
        evidence.extend({"claim_id": claim.claim_id, **b.binding()} for b in kept)
    summary = (
        f"Verified by {result.version}: {result.verified_claim_count} of {result.total_claim_count} claims and "
        f"{result.verified_binding_count} of {result.total_binding_count} citations matched this run's tool output. "
        "The executor's own summary and open questions are withheld because they are unverified."
    )
    return ExecutorEvidence(summary=summary, claims=tuple(claims)).to_dict(), evidence
