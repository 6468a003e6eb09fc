"""Scores of a localiser on generated incidents: AC@1, AC@3, false-confidence rate, undetermined rate and
nothing-wrong accuracy, per fault kind, per main log format and per graph size, with the held-back
seeds in their own column.

Framework-free: the caller turns each run into an ``Outcome`` (the ranked candidate services, whether
the run said PASS, nothing wrong or undetermined) and passes the incidents' ground truths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from diagnosis.evaluation.generator.incident import HELD_BACK_FROM

SIZE_BUCKETS = ((3, 5), (6, 10), (11, 20), (21, 30))
RANGES = ("development", "held back")


@dataclass(frozen=True)
class Outcome:
    """What one run concluded about one generated incident."""

    seed: int
    candidates: tuple[str, ...] = ()  # ranked root-cause services, best first
    cause_kind: str | None = None  # the kind named for the top candidate
    passed: bool = False  # the verdict was PASS (a confident answer)
    nothing_wrong: bool = False
    undetermined: bool = False


@dataclass
class Tally:
    runs: int = 0
    incidents: int = 0
    top1: int = 0
    top3: int = 0
    kind_top1: int = 0
    false_confidence: int = 0
    undetermined: int = 0
    healthy: int = 0
    healthy_right: int = 0

    def add(self, outcome: Outcome, truth: dict[str, Any]) -> None:
        self.runs += 1
        self.undetermined += outcome.undetermined
        root = truth["root_cause_service"]
        if truth["question_kind"] == "incident":
            self.incidents += 1
            hit1 = outcome.candidates[:1] == (root,)
            self.top1 += hit1
            self.top3 += root in outcome.candidates[:3]
            kinds = {truth["cause_kind"], *truth.get("also_accepted_kinds", [])}
            self.kind_top1 += hit1 and outcome.cause_kind in kinds
            self.false_confidence += outcome.passed and (not hit1 or outcome.nothing_wrong)
        else:
            # healthy, no data and how-to questions: a PASS that names a root cause is false confidence
            self.false_confidence += outcome.passed and bool(outcome.candidates) and not outcome.nothing_wrong
            if truth["question_kind"] == "healthy":
                self.healthy += 1
                self.healthy_right += outcome.nothing_wrong and not outcome.candidates

    def row(self) -> dict[str, float | int | None]:
        def ratio(a: int, b: int) -> float | None:
            return round(a / b, 3) if b else None

        return {"runs": self.runs, "AC@1": ratio(self.top1, self.incidents), "AC@3": ratio(self.top3, self.incidents),
                "kind@1": ratio(self.kind_top1, self.incidents),
                "false_confidence": ratio(self.false_confidence, self.runs),
                "undetermined": ratio(self.undetermined, self.runs),
                "nothing_wrong_accuracy": ratio(self.healthy_right, self.healthy)}


def _size_bucket(size: int) -> str:
    for low, high in SIZE_BUCKETS:
        if low <= size <= high:
            return f"{low}-{high}"
    return str(size)


def summarise(outcomes: Iterable[Outcome], truths: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """``{"overall": {range: row}, "by_kind" | "by_format" | "by_size" | "by_question": {value: {range: row}}}``;
    ``truths`` maps a seed to its ground_truth.json."""
    overall: dict[str, Tally] = {}
    groups: dict[str, dict[str, dict[str, Tally]]] = {"by_kind": {}, "by_format": {}, "by_size": {}, "by_question": {}}
    for outcome in outcomes:
        truth = truths[outcome.seed]
        where = RANGES[outcome.seed >= HELD_BACK_FROM]
        overall.setdefault(where, Tally()).add(outcome, truth)
        keys = {"by_kind": truth["cause_kind"] or truth["question_kind"], "by_format": truth["format"],
                "by_size": _size_bucket(truth["size"]), "by_question": truth["question_kind"]}
        for dimension, value in keys.items():
            groups[dimension].setdefault(value, {}).setdefault(where, Tally()).add(outcome, truth)
    return {"overall": {r: t.row() for r, t in overall.items()},
            **{d: {v: {r: t.row() for r, t in sorted(cols.items())} for v, cols in sorted(values.items())}
               for d, values in groups.items()}}


COLUMNS = ("runs", "AC@1", "AC@3", "kind@1", "false_confidence", "undetermined", "nothing_wrong_accuracy")


def markdown(summary: dict[str, Any]) -> str:
    """The summary as Markdown tables: one row per group, each figure for development | held back."""
    def cell(cols: dict[str, Any], name: str) -> str:
        parts = [cols.get(r, {}).get(name) for r in RANGES]
        return " | ".join("-" if p is None else str(p) for p in parts)

    header = "| group | " + " | ".join(f"{c} (dev) | {c} (held back)" for c in COLUMNS) + " |"
    rule = "|---|" + "---|" * (2 * len(COLUMNS))
    out = ["### Overall", "", header, rule, "| all | " + " | ".join(cell(summary["overall"], c) for c in COLUMNS) + " |"]
    for dimension in ("by_kind", "by_format", "by_size", "by_question"):
        out += ["", f"### {dimension.replace('_', ' ').capitalize()}", "", header, rule]
        for value, cols in summary[dimension].items():
            out.append(f"| {value} | " + " | ".join(cell(cols, c) for c in COLUMNS) + " |")
    return "\n".join(out) + "\n"
