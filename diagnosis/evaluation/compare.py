"""Evaluation summaries side by side (e.g. a real model with and without the ranking hint): one Markdown
table, a column per summary (`scenarios.summary`). Framework-free, so a bench outside Django prints it too."""

from __future__ import annotations

# The figures compared, strict ones first: (row title, summary key, format).
# A table: its rows are alike in shape by design.
COMPARED = (
    ("runs", "runs", "{}"),
    ("FALSE CONFIDENCE", "false_confidence", "{}"),
    ("root cause hits (strict)", "root_cause_hits", "{}"),
    ("undetermined", "undetermined", "{}"),
    ("unsupported claims", "unsupported_claims", "{}"),
    ("citation validity", "mean_citation_validity", "{:.2f}"),
    ("fallback", "fallback_rate", "{:.0%}"),
    ("planner schema-valid", "planner_schema_valid_rate", "{:.0%}"),
    ("runs reaching the executor", "runs_reaching_executor", "{}"),
    ("tool round trips", "tool_round_trips", "{}"),
    ("runs calling the ranking", "runs_calling_ranking", "{}"),
    ("median latency ms", "median_latency_ms", "{}"),
    ("p95 latency ms", "p95_latency_ms", "{}"),
)


def side_by_side(summaries: dict[str, dict]) -> str:
    """One Markdown table, a column per labelled summary; a figure a summary lacks shows as "-"."""
    labels = list(summaries)
    rows = [f"| | {' | '.join(labels)} |", "|---|" + "---|" * len(labels)]
    for title, key, form in COMPARED:
        cells = [form.format(summaries[label][key]) if key in summaries[label] else "-" for label in labels]
        rows.append(f"| {title} | {' | '.join(cells)} |")
    return "\n".join(rows)
