"""The evaluation harness: run the diagnosis over incident scenarios and score each answer
against its ground truth (root-cause hit, citation validity, unsupported claims, cost).

Scoring is strict and reads the run's structured diagnosis, never the prose: the root-cause service
must be the one named, and its cause kind (``rootCause.cause``, an id of the closed taxonomy) the
ground truth's ``cause_kind`` or one of its ``also_accepted_kinds``. A PASS on a wrong root cause is false confidence, the worst outcome. The old lenient figure
(service and keyword anywhere in the answer, quotes included) is kept as a secondary column."""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from django.contrib.auth import get_user_model

from diagnosis.contracts import INVOCATION_REF_RE, RANKING_TOOL, SelfEvaluation, StructuredDiagnosis, Verdict
from diagnosis.demo.loader import load_ground_truth, load_scenario_meta
from diagnosis.ids import new_session_id
from diagnosis.llm.schemas import PlannerPlan, is_valid
from diagnosis.models import AgentStep, ChatSession, DiagnosisRun
from diagnosis.services import wiring
from diagnosis.services.knowledge import knowledge_load_folder
from diagnosis.services.execution import run_execute
from diagnosis.tools.backends.demo import DemoBackend

EVAL_USER = "evaluation"


@dataclass
class ScenarioScore:
    scenario: str
    language: str
    run_id: str
    status: str
    verdict: str
    service_hit: bool
    cause_hit: bool
    root_cause_hit: bool
    nothing_wrong_correct: bool | None
    undetermined: bool
    false_confidence: bool
    lenient_hit: bool
    citation_validity: float
    claims_verified: int
    claims_total: int
    unsupported_claims: int
    fallback_used: bool
    steps: int
    tool_calls: int
    tokens: int
    latency_ms: int
    # Protocol health (what a small or local model gets wrong first): planner answers valid against
    # the plan's schema, whether the executor was reached, tool calls followed by a completed turn.
    planner_calls: int = 0
    planner_schema_valid: int = 0
    reached_executor: bool = False
    tool_round_trips: int = 0
    ranking_calls: int = 0  # successful calls of the `rank_root_causes` hint (LLM_RANKING_HINT)


def scenario_dirs(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).iterdir() if (p / "ground_truth.json").exists())


QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|「[^」]*」|'[^']{6,}'")


def _unquoted(text: str) -> str:
    """The text with every quoted excerpt removed: a quoted log line is evidence, not a diagnosis."""
    return QUOTED.sub(" ", text or "")


def cause_named(root: dict, truth: dict) -> bool:
    """The root cause's kind is the incident's (or one the same evidence legitimately supports); a ground
    truth written before the kinds existed is scored by its keywords in the summary, quotes removed."""
    if truth.get("cause_kind"):
        return root.get("cause") in {truth["cause_kind"], *truth.get("also_accepted_kinds", [])}
    said = _unquoted(str(root.get("summary") or "")) + " " + str(root.get("cause") or "").replace("_", " ")
    return any(k.lower() in said.lower() for k in truth.get("cause_keywords", []))


def score_run(run: DiagnosisRun, truth: dict) -> dict:
    answer = run.answer or ""
    evaluation = SelfEvaluation.read(run.self_evaluation)
    rules = evaluation.rule_evaluation
    verified_ids = {e.get("source_invocation_id") for e in evaluation.verifier.verified_evidence}
    diagnosis = StructuredDiagnosis.read(run.diagnosis)
    root = diagnosis.root_cause
    expected = truth.get("root_cause_service")
    healthy = bool(truth.get("expected_nothing_wrong")) or not expected
    passed = run.effective_verdict == Verdict.PASS
    if truth.get("question_kind") in ("howto", "no_data"):
        # A how-to question is answered from the runbooks and a question about a service without telemetry says
        # so: neither is ever a root cause, nor "nothing wrong" (which would claim the service was checked).
        nothing_wrong_correct = None
        service_hit = cause_hit = root is None and not diagnosis.nothing_wrong
        false_confidence = passed and (root is not None or diagnosis.nothing_wrong)
    elif healthy:
        nothing_wrong_correct = diagnosis.nothing_wrong and root is None
        service_hit = cause_hit = nothing_wrong_correct
        false_confidence = passed and root is not None
    else:
        nothing_wrong_correct = None
        service_hit = root is not None and (root.get("service") or "").lower() == expected.lower()
        cause_hit = root is not None and cause_named(root, truth)
        false_confidence = passed and (diagnosis.nothing_wrong or (root is not None and not (service_hit and cause_hit)))
    return {
        "service_hit": service_hit, "cause_hit": cause_hit, "root_cause_hit": service_hit and cause_hit,
        "nothing_wrong_correct": nothing_wrong_correct, "undetermined": diagnosis.undetermined,
        "false_confidence": false_confidence, "lenient_hit": _lenient_hit(run, truth),
        "citation_validity": float(rules.get("citation_validity_rate") or 0.0),
        "claims_verified": int(rules.get("claims_verified") or 0), "claims_total": int(rules.get("claims_total") or 0),
        # A citation in the answer to anything but verified evidence is an unsupported claim.
        "unsupported_claims": len(set(INVOCATION_REF_RE.findall(answer)) - verified_ids),
        "fallback_used": bool(rules.get("fallback_used")),
    }


def protocol_health(run: DiagnosisRun) -> dict:
    """Planner answers valid against the plan schema, executor reached, tool round trips completed, and
    how often the model called the ranking hint."""
    steps = list(AgentStep.objects.filter(run=run).order_by("step_index"))
    planner = [s for s in steps if s.agent == "planner"]
    succeeded = run.tool_invocations.filter(status="SUCCESS")
    invoked = set(succeeded.values_list("step_id", flat=True))
    round_trips = sum(1 for first, second in zip(steps, steps[1:])
                      if first.has_tool_call and first.pk in invoked and second.node == first.node
                      and second.status == "COMPLETED")
    return {"planner_calls": len(planner),
            "planner_schema_valid": sum(1 for s in planner if s.status == "COMPLETED" and _plan_valid(s)),
            "reached_executor": any(s.node == "executor" for s in steps), "tool_round_trips": round_trips,
            "ranking_calls": succeeded.filter(tool_name=RANKING_TOOL).count()}


def _plan_valid(step: AgentStep) -> bool:
    try:
        return is_valid(PlannerPlan, json.loads((step.model_output or {}).get("content") or ""))
    except ValueError:
        return False


def _lenient_hit(run: DiagnosisRun, truth: dict) -> bool:
    """The former figure, kept for comparison only: service and a keyword anywhere in the answer."""
    lowered = (run.answer or "").lower()
    service = truth.get("root_cause_service")
    service_hit = (service.lower() in lowered) if service else not _names_a_root_cause(run)
    return service_hit and any(k.lower() in lowered for k in truth.get("cause_keywords", []))


def _names_a_root_cause(run: DiagnosisRun) -> bool:
    return "root cause" in (run.answer or "").lower() and run.effective_verdict == "PASS" and "no anomaly" not in run.answer.lower()


def evaluate_scenario(*, folder: Path, language: str, user) -> ScenarioScore:
    meta, truth = load_scenario_meta(folder), load_ground_truth(folder)
    if (folder / "runbooks").is_dir():
        knowledge_load_folder(folder=folder / "runbooks", prefix="runbooks/")
    question = meta["default_question"][language]
    session = ChatSession.objects.create(session_id=new_session_id(), owner=user, title=f"eval {folder.name}")
    run = DiagnosisRun.objects.create(session=session, question=question)
    started = time.perf_counter()
    with wiring.telemetry_override(DemoBackend([folder])):
        run_execute(run_id=run.run_id)
    latency = int((time.perf_counter() - started) * 1000)
    run.refresh_from_db()
    return ScenarioScore(
        scenario=folder.name, language=language, run_id=run.run_id, status=run.status,
        verdict=run.effective_verdict or "-", steps=run.step_count, tool_calls=run.tool_count,
        tokens=run.prompt_tokens + run.completion_tokens, latency_ms=latency, **score_run(run, truth),
        **protocol_health(run),
    )


def evaluate_folder(*, folder: Path, languages=("en", "zh"), on_score=None) -> list[ScenarioScore]:
    """Every scenario × language, in order; `on_score(score)` is called as soon as each run finishes."""
    user, _ = get_user_model().objects.get_or_create(username=EVAL_USER)
    scores = []
    for scenario in scenario_dirs(folder):
        for lang in languages:
            score = evaluate_scenario(folder=scenario, language=lang, user=user)
            scores.append(score)
            if on_score is not None:
                on_score(score)
    return scores


def summary(scores: list[ScenarioScore]) -> dict:
    n = len(scores) or 1
    return {
        "runs": len(scores),
        "false_confidence": sum(s.false_confidence for s in scores),
        "root_cause_hit_rate": round(sum(s.root_cause_hit for s in scores) / n, 3),
        "root_cause_hits": sum(s.root_cause_hit for s in scores),
        "undetermined": sum(s.undetermined for s in scores),
        "unsupported_claims": sum(s.unsupported_claims for s in scores),
        "mean_citation_validity": round(sum(s.citation_validity for s in scores) / n, 3),
        "fallback_rate": round(sum(s.fallback_used for s in scores) / n, 3),
        "lenient_hit_rate_secondary": round(sum(s.lenient_hit for s in scores) / n, 3),
        "median_latency_ms": sorted(s.latency_ms for s in scores)[len(scores) // 2] if scores else 0,
        "p95_latency_ms": sorted(s.latency_ms for s in scores)[min(len(scores) - 1, math.ceil(0.95 * len(scores)) - 1)]
        if scores else 0,
        "planner_schema_valid_rate": round(sum(s.planner_schema_valid for s in scores)
                                           / (sum(s.planner_calls for s in scores) or 1), 3),
        "runs_reaching_executor": sum(s.reached_executor for s in scores),
        "tool_round_trips": sum(s.tool_round_trips for s in scores),
        "runs_calling_ranking": sum(1 for s in scores if s.ranking_calls),
    }


def _yes(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def markdown_table(scores: list[ScenarioScore]) -> str:
    """False confidence first (the worst outcome), then the strict hit; the lenient figure last, named as such."""
    head = ("| scenario | lang | verdict | FALSE CONFIDENCE | root cause hit (strict) | undetermined | nothing wrong correct | "
            "citation validity | claims verified | unsupported | fallback | steps | tool calls | tokens | latency ms | "
            "lenient hit (secondary) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ordered = sorted(scores, key=lambda s: (not s.false_confidence, s.scenario, s.language))
    rows = [
        f"| {s.scenario} | {s.language} | {s.verdict} | {'**YES**' if s.false_confidence else 'no'} | "
        f"{_yes(s.root_cause_hit)} ({'service' if s.service_hit else '-'}/{'cause' if s.cause_hit else '-'}) | "
        f"{_yes(s.undetermined)} | {_yes(s.nothing_wrong_correct)} | {s.citation_validity:.2f} | "
        f"{s.claims_verified}/{s.claims_total} | {s.unsupported_claims} | {'yes' if s.fallback_used else 'no'} | "
        f"{s.steps} | {s.tool_calls} | {s.tokens} | {s.latency_ms} | {_yes(s.lenient_hit)} |"
        for s in ordered
    ]
    return "\n".join([head, *rows])


def write_report(scores: list[ScenarioScore], out_dir: Path, *, complete: bool = True) -> tuple[Path, Path]:
    """evaluation.json (summary + rows) and evaluation.md, each replaced atomically (never half written)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "evaluation.json", out_dir / "evaluation.md"
    report = {"summary": {**summary(scores), "complete": complete}, "scenarios": [asdict(s) for s in scores]}
    _replace(json_path, json.dumps(report, indent=2, ensure_ascii=False))
    _replace(md_path, markdown_table(scores) + "\n")
    return json_path, md_path


class IncrementalReport:
    """Writes the report as the evaluation goes: one JSON line per finished run in evaluation.jsonl
    (appended and flushed at once) and evaluation.json / .md rewritten with the summary so far, so an
    interrupted evaluation keeps every run that finished."""

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.lines_path = self.out_dir / "evaluation.jsonl"
        self.lines_path.write_text("")
        self.scores: list[ScenarioScore] = []

    def add(self, score: ScenarioScore) -> None:
        self.scores.append(score)
        with self.lines_path.open("a", encoding="utf-8") as lines:
            lines.write(json.dumps(asdict(score), ensure_ascii=False) + "\n")
            lines.flush()
        write_report(self.scores, self.out_dir, complete=False)

    def finish(self) -> tuple[Path, Path]:
        return write_report(self.scores, self.out_dir, complete=True)


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
