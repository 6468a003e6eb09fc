"""Two runs side by side: what changed between them (route, tools, claims, verdict, answer, cost).

Framework-light on purpose: `run_facts` reads a run and its rows into plain data, `runs_diff` compares
two such facts and knows nothing about Django, HTTP or templates, so a replay or diff API can reuse
both (for example the same question before and after a prompt or model change).
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from diagnosis.contracts import SelfEvaluation, StoredAudit, orchestration_trace_read


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class RunFacts:
    run_id: str
    question: str
    flow: str
    strategy: str
    status: str
    verdict: str
    degraded: bool
    error_code: str
    answer: str
    model: str
    prompt_version: str
    prompt_tokens: int
    completion_tokens: int
    duration_ms: int | None
    steps: int
    route: list[str]  # "from → to (reason)" in order; supervisor decisions for an alert analysis
    tools: list[str]  # tool names in call order
    claims_verified: list[str]
    claims_rejected: list[str]
    cases: list[str] = field(default_factory=list)  # "case-12 v3 (published)": the case versions it used

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _claims(audit: StoredAudit | None) -> tuple[list[str], list[str]]:
    verified, rejected = [], []
    for claim in audit.claims if audit else ():
        if isinstance(claim.statement, str):
            (verified if claim.verified else rejected).append(claim.statement.strip())
    return verified, rejected


def run_facts(run: Any, invocations: list[Any]) -> RunFacts:
    """The facts of `run` (anything with DiagnosisRun's attributes) and its tool invocations (in call order)."""
    evaluation = SelfEvaluation.read(run.self_evaluation)
    trace = orchestration_trace_read(run.orchestration_trace) or {}
    route = [
        f"{t.get('from')} → {t.get('to')} ({t.get('reason_code', '')})"
        for t in _list(trace.get("transitions")) if isinstance(t, dict)
    ]
    verified, rejected = _claims(evaluation.verifier.gatekeeper_audit)
    aiops = evaluation.aiops_audit
    if aiops:
        route = route or [f"{d.get('decision')} {d.get('task_id') or ''}".strip()
                          for d in _list(aiops.get("decisions")) if isinstance(d, dict)]
        for task in _list(aiops.get("tasks")):
            more_verified, more_rejected = _claims(StoredAudit.read(_dict(task).get("gatekeeper")))
            verified += more_verified
            rejected += more_rejected
    return RunFacts(
        run_id=run.run_id, question=run.question or "", flow=run.agent_flow, strategy=run.strategy, status=run.status,
        verdict=run.effective_verdict or "", degraded=bool(run.degraded), error_code=run.error_code or "",
        answer=run.answer or "", model=run.model_name or "", prompt_version=run.prompt_version or "",
        prompt_tokens=run.prompt_tokens or 0, completion_tokens=run.completion_tokens or 0,
        duration_ms=run.duration_ms, steps=run.step_count or 0,
        route=route, tools=[i.tool_name for i in invocations], claims_verified=verified, claims_rejected=rejected,
        cases=cases_used(invocations),
    )


def cases_used(invocations: list[Any]) -> list[str]:
    """The case versions a run's knowledge lookups returned, with their status then ("withdrawn" in a replay
    of a run that used a case since withdrawn)."""
    used = []
    for invocation in invocations:
        details = _dict(getattr(invocation, "retrieval_details", None))
        for case in _list(details.get("cases")):
            if isinstance(case, dict) and isinstance(case.get("caseId"), str):
                used.append(f"{case['caseId']} v{case.get('version')} ({case.get('status') or 'published'})")
    return list(dict.fromkeys(used))


@dataclass(frozen=True)
class ScalarDiff:
    label: str
    left: Any
    right: Any
    changed: bool
    delta: str = ""  # "+12%" for numbers


@dataclass(frozen=True)
class ListDiff:
    label: str
    left: list[tuple[str, str]]  # (item, "same" | "removed"): items of the left run
    right: list[tuple[str, str]]  # (item, "same" | "added"): items of the right run
    changed: bool


@dataclass(frozen=True)
class LineDiff:
    left: str | None
    right: str | None
    tag: str  # equal | replace | delete | insert


@dataclass
class RunDiff:
    left: RunFacts
    right: RunFacts
    scalars: list[ScalarDiff] = field(default_factory=list)
    lists: list[ListDiff] = field(default_factory=list)
    answer: list[LineDiff] = field(default_factory=list)

    @property
    def changed(self) -> list[str]:
        """Labels of everything that differs, in display order."""
        labels = [s.label for s in self.scalars if s.changed] + [d.label for d in self.lists if d.changed]
        return labels + (["answer"] if any(line.tag != "equal" for line in self.answer) else [])


def _delta(left: Any, right: Any) -> str:
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)) or left == right:
        return ""
    if not left:
        return f"+{right:,}"
    return f"{(right - left) / left * 100:+.0f}%"


def _list_diff(label: str, left: list[str], right: list[str]) -> ListDiff:
    """Items as multisets: an item called twice on one side and once on the other shows once as changed."""
    left_left, right_left = Counter(left), Counter(right)
    left_marked, right_marked = [], []
    for item in left:
        keep = right_left[item] > 0
        right_left[item] -= 1 if keep else 0
        left_marked.append((item, "same" if keep else "removed"))
    for item in right:
        keep = left_left[item] > 0
        left_left[item] -= 1 if keep else 0
        right_marked.append((item, "same" if keep else "added"))
    return ListDiff(label, left_marked, right_marked, left != right)


def _answer_diff(left: str, right: str) -> list[LineDiff]:
    a, b = left.splitlines(), right.splitlines()
    lines: list[LineDiff] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        span = max(i2 - i1, j2 - j1)
        for k in range(span):
            lines.append(LineDiff(a[i1 + k] if i1 + k < i2 else None, b[j1 + k] if j1 + k < j2 else None, tag))
    return lines


def runs_diff(left: RunFacts, right: RunFacts) -> RunDiff:
    """Compare two runs field by field; every entry says whether it changed."""
    diff = RunDiff(left=left, right=right)
    for label, attr in (
        ("question", "question"), ("flow", "flow"), ("strategy", "strategy"), ("status", "status"),
        ("verdict", "verdict"), ("degraded", "degraded"), ("error code", "error_code"), ("model", "model"),
        ("prompt version", "prompt_version"), ("tokens", "tokens"), ("prompt tokens", "prompt_tokens"),
        ("completion tokens", "completion_tokens"), ("latency (ms)", "duration_ms"), ("steps", "steps"),
    ):
        a, b = getattr(left, attr), getattr(right, attr)
        diff.scalars.append(ScalarDiff(label, a, b, a != b, _delta(a, b)))
    diff.lists = [
        _list_diff("route", left.route, right.route),
        _list_diff("tools called", left.tools, right.tools),
        _list_diff("claims verified", left.claims_verified, right.claims_verified),
        _list_diff("claims rejected", left.claims_rejected, right.claims_rejected),
        _list_diff("cases used", left.cases, right.cases),
    ]
    diff.answer = _answer_diff(left.answer, right.answer)
    return diff
