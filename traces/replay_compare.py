"""Two runs claim by claim (a run and its replay, or any two runs): the data behind
`GET /api/runs/{a}/diff/{b}` and the regression report of `manage.py regress`.

Built on the console's run diff (`traces.diff`): the same facts, plus what a regression gate needs —
claims kept, added and lost, the root cause of each side and whether they agree, a verdict drop,
unsupported citations, tokens, cost (with a price table) and latency.
"""

from __future__ import annotations

import re
from typing import Any

from diagnosis.contracts import INVOCATION_REF_RE, SelfEvaluation, StructuredDiagnosis
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from traces.diff import run_facts, runs_diff

ROOT_CLAIM_RE = re.compile(r"^\s*(?:root cause|根因)", re.I)
ROOT_KEY_RE = re.compile(r"^\s*Root cause \((?P<cause>[^)]+)\):\s*(?P<service>\S+)")
NOTHING_RE = re.compile(r"^\s*No anomaly found", re.I)
VERDICT_RANK = {"PASS": 3, "LOW_CONFID": 2, "REJECT": 1, "": 0}


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def root_cause(run: DiagnosisRun, verified_claims: list[str]) -> dict:
    """The run's root cause: from its structured diagnosis where it has one, else from its verified
    root-cause claims. `key` is what two runs are compared on (None: no root cause named)."""
    cause = StructuredDiagnosis.read(getattr(run, "diagnosis", None)).root_cause
    if cause:
        parts = [str(cause.get(k)) for k in ("cause", "service") if cause.get(k)]
        text = str(cause.get("summary") or " ".join(parts))
        key = ":".join(parts).lower() or text.strip().lower()
        return {"source": "structured_diagnosis", "text": text, "key": key}
    for claim in verified_claims:
        if ROOT_CLAIM_RE.match(claim):
            match = ROOT_KEY_RE.match(claim)
            key = f"{match['cause']}:{match['service']}".lower() if match else claim.strip().lower()
            return {"source": "claims", "text": claim, "key": key}
    nothing = any(NOTHING_RE.match(c) for c in verified_claims)
    return {"source": "claims", "text": "no anomaly found" if nothing else None, "key": "nothing_wrong" if nothing else None}


def unsupported_citations(run: DiagnosisRun) -> int:
    """Invocation ids the answer cites that are not verified evidence of the run: must stay 0."""
    verified = SelfEvaluation.read(run.self_evaluation).verifier.verified_evidence
    verified_ids = {e.get("source_invocation_id") for e in verified}
    return len(set(INVOCATION_REF_RE.findall(run.answer or "")) - verified_ids)


def run_cost(run: DiagnosisRun, prices: dict | None) -> float | None:
    """USD from a price table {model: {"prompt": per_million, "completion": per_million}}; None without one
    or when a model the run used has no price."""
    if not prices:
        return None
    total = 0.0
    for model, prompt_tokens, completion_tokens in AgentStep.objects.filter(run_id=run.pk).values_list(
            "model_name", "prompt_tokens", "completion_tokens"):
        if not (prompt_tokens or completion_tokens):
            continue
        price = prices.get(model) or prices.get("*")
        if not isinstance(price, dict):
            return None
        total += prompt_tokens * float(price.get("prompt", 0)) / 1e6 + completion_tokens * float(price.get("completion", 0)) / 1e6
    return round(total, 6)


def _side(run: DiagnosisRun, facts, prices: dict | None) -> dict:
    cause = root_cause(run, facts.claims_verified)
    return {
        "runId": run.run_id, "status": run.status, "verdict": run.effective_verdict or None, "degraded": run.degraded,
        "model": run.model_name, "promptVersion": run.prompt_version, "rootCause": cause["text"],
        "rootCauseSource": cause["source"], "claimsVerified": facts.claims_verified,
        "claimsRejected": facts.claims_rejected, "unsupportedClaims": unsupported_citations(run),
        "tools": facts.tools, "promptTokens": facts.prompt_tokens, "completionTokens": facts.completion_tokens,
        "tokens": facts.tokens, "costUsd": run_cost(run, prices), "latencyMs": run.duration_ms,
        "replayOf": run.replay_of.run_id if run.replay_of_id else None,
    }


def _minus(items: list[str], other: list[str]) -> list[str]:
    left = list(other)
    out = []
    for item in items:
        if item in left:
            left.remove(item)
        else:
            out.append(item)
    return out


def compare_runs(left: DiagnosisRun, right: DiagnosisRun, *, prices: dict | None = None) -> dict:
    """`left` is the reference (the recorded run), `right` the candidate (its replay)."""
    facts = [run_facts(r, list(ToolInvocation.objects.filter(run_id=r.pk).only("tool_name", "retrieval_details").order_by("id")))
             for r in (left, right)]
    diff = runs_diff(*facts)
    a, b = (_side(r, f, prices) for r, f in zip((left, right), facts))
    key_a = root_cause(left, facts[0].claims_verified)["key"]
    key_b = root_cause(right, facts[1].claims_verified)["key"]
    verdict_a, verdict_b = left.effective_verdict or "", right.effective_verdict or ""
    return {
        "left": a, "right": b,
        "verdict": {"left": verdict_a or None, "right": verdict_b or None, "changed": verdict_a != verdict_b,
                    "dropped": VERDICT_RANK.get(verdict_b, 0) < VERDICT_RANK.get(verdict_a, 0)},
        "rootCause": {"left": a["rootCause"], "right": b["rootCause"], "agree": key_a == key_b},
        "claims": {
            "verified": len(b["claimsVerified"]), "rejected": len(b["claimsRejected"]),
            "kept": [c for c in b["claimsVerified"] if c in a["claimsVerified"]],
            "added": _minus(b["claimsVerified"], a["claimsVerified"]),
            "lost": _minus(a["claimsVerified"], b["claimsVerified"]),
            "newlyRejected": _minus(b["claimsRejected"], a["claimsRejected"]),
        },
        "tools": {"added": _minus(b["tools"], a["tools"]), "removed": _minus(a["tools"], b["tools"])},
        "tokens": {"left": a["tokens"], "right": b["tokens"], "delta": b["tokens"] - a["tokens"]},
        "latencyMs": {"left": a["latencyMs"], "right": b["latencyMs"]},
        "answer": [{"tag": line.tag, "left": line.left, "right": line.right} for line in diff.answer if line.tag != "equal"],
        "answerChanged": any(line.tag != "equal" for line in diff.answer),
        "changed": diff.changed,
    }
