"""The run-detail page's self-evaluation figures: citation validity, claims, tool success, fallback,
and the budget used against its limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diagnosis.contracts import SelfEvaluation
from traces.run_detail_readers import as_dict, as_list, as_number

@dataclass
class Figure:
    label: str
    value: str
    detail: str = ""
    tone: str = ""  # good | warn | bad | ""


@dataclass
class BudgetLine:
    label: str
    used: str
    limit: str
    percent: float


def _percent(value: Any) -> str:
    number = as_number(value)
    return f"{number * 100:.0f}%" if number is not None else "—"


def _ratio(done: Any, total: Any) -> str:
    return f"{done if done is not None else '—'} / {total if total is not None else '—'}"


def build_figures(self_evaluation: Any) -> tuple[list[Figure], list[BudgetLine]]:
    evaluation = SelfEvaluation.read(self_evaluation)
    rules, aiops = evaluation.rule_evaluation, evaluation.aiops_rule_evaluation
    if aiops and not rules:
        return _aiops_figures(aiops), _budget_lines(as_dict(aiops.get("budget")))
    if not rules:
        return [], []
    validity = as_number(rules.get("citation_validity_rate"))
    success = as_number(rules.get("tool_success_rate"))
    by_status = as_dict(rules.get("tool_calls_by_status"))
    figures = [
        Figure("Citation validity", _percent(validity),
               _ratio(rules.get("bindings_verified"), rules.get("bindings_total")) + " bindings",
               "" if validity is None else "good" if validity >= 0.999 else "warn" if validity > 0 else "bad"),
        Figure("Claims verified", _ratio(rules.get("claims_verified"), rules.get("claims_total")), "by the Gatekeeper"),
        Figure("Tool success", _percent(success),
               ", ".join(f"{count} {status.lower()}" for status, count in sorted(by_status.items())) or "no tool calls",
               "" if success is None else "good" if success >= 0.999 else "warn"),
        Figure("Tool calls", str(rules.get("tool_calls", "—"))),
        Figure("Evidence retry", "used" if rules.get("evidence_retry_used") else "not used",
               tone="warn" if rules.get("evidence_retry_used") else ""),
        Figure("Fallback", "used" if rules.get("fallback_used") else "not used",
               tone="bad" if rules.get("fallback_used") else "good"),
    ]
    budget = as_dict(rules.get("budget"))
    if budget.get("exceeded"):
        figures.append(Figure("Budget", "exceeded", str(budget.get("exceeded")), "bad"))
    return figures, _budget_lines(budget)


def _aiops_figures(rules: dict) -> list[Figure]:
    validity = as_number(rules.get("citation_validity"))
    report = as_number(rules.get("report_citation_validity"))
    success = as_number(rules.get("tool_success_rate"))
    by_status = as_dict(rules.get("tool_calls_by_status"))
    tone = lambda v: "" if v is None else "good" if v >= 0.999 else "warn" if v > 0 else "bad"  # noqa: E731
    figures = [
        Figure("Citation validity", _percent(validity),
               _ratio(rules.get("bindings_verified"), rules.get("bindings_total")) + " bindings in the tasks", tone(validity)),
        Figure("Claims verified", _ratio(rules.get("claims_verified"), rules.get("claims_total")), "by the Gatekeeper"),
        Figure("Report check", _percent(report),
               _ratio(rules.get("report_statements_verified"), rules.get("report_statements_total"))
               + f" statements kept, {rules.get('report_statements_removed', 0)} removed", tone(report)),
        Figure("Alerts", _ratio(rules.get("alerts_with_verified_findings"), rules.get("alerts_total")),
               f"with verified findings (source: {rules.get('alerts_source', '—')})"),
        Figure("Supervisor rounds", _ratio(rules.get("rounds"), rules.get("max_rounds")),
               " → ".join(str(d) for d in as_list(rules.get("decisions"))) or "no decision"),
        Figure("Tool success", _percent(success),
               ", ".join(f"{count} {status.lower()}" for status, count in sorted(by_status.items())) or "no tool calls",
               "" if success is None else "good" if success >= 0.999 else "warn"),
        Figure("Fallback", "used" if rules.get("fallback_used") else "not used",
               str(rules.get("fallback_reason") or ""), "bad" if rules.get("fallback_used") else "good"),
    ]
    exceeded = as_dict(rules.get("budget")).get("exceeded")
    if exceeded:
        figures.append(Figure("Budget", "exceeded", str(exceeded), "bad"))
    return figures


def _budget_lines(budget: dict) -> list[BudgetLine]:
    lines = []
    for label, used_key, limit_key, unit in (
        ("Model calls", "model_calls", "max_model_calls", ""),
        ("Tool calls", "tool_calls", "max_tool_calls", ""),
        ("Tokens", None, "max_tokens", ""),
        ("Wall time", "elapsed_seconds", "max_seconds", " s"),
    ):
        used = (as_number(budget.get("prompt_tokens")) or 0) + (as_number(budget.get("completion_tokens")) or 0) \
            if used_key is None else as_number(budget.get(used_key))
        limit = as_number(budget.get(limit_key))
        if used is None or not limit:
            continue
        shown = f"{used:,.2f}" if isinstance(used, float) and not float(used).is_integer() else f"{int(used):,}"
        lines.append(BudgetLine(label, shown + unit, f"{int(limit):,}{unit}", round(min(used / limit * 100, 100), 1)))
    return lines

