"""Tokens and cost of the runs per day, per model and per route (flow and strategy), with prices per
model from settings.MODEL_PRICES; and the chart of them as an SVG drawn on the server (no script, no
library). A model without a price has no cost, shown as such: never counted as zero."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from html import escape

MAX_DAYS = 366
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 720, 220, 40
PALETTE = ("#1d4ed8", "#b45309", "#047857", "#7c3aed", "#be123c", "#0f766e", "#4b5563")


@dataclass
class UsageRow:
    key: str
    runs: int = 0
    prompt: int = 0
    completion: int = 0
    cost: float = 0.0
    unpriced: int = 0  # runs whose model has no price

    @property
    def tokens(self) -> int:
        return self.prompt + self.completion


@dataclass
class UsageReport:
    days: list[date]
    by_day: dict[date, UsageRow]
    by_model: list[UsageRow]
    by_route: list[UsageRow]
    by_day_model: dict[tuple[date, str], UsageRow] = field(default_factory=dict)
    total: UsageRow = field(default_factory=lambda: UsageRow("total"))


def usage_build(rows, *, start: date, end: date, prices: dict[str, tuple[float, float]]) -> UsageReport:
    """`rows`: (day, model, flow, strategy, runs, prompt tokens, completion tokens) aggregates."""
    days = [start + timedelta(days=n) for n in range((end - start).days + 1)]
    by_day = {d: UsageRow(d.isoformat()) for d in days}
    by_model: dict[str, UsageRow] = {}
    by_route: dict[str, UsageRow] = {}
    by_day_model: dict[tuple[date, str], UsageRow] = {}
    total = UsageRow("total")
    for day, model, flow, strategy, runs, prompt, completion in rows:
        model = model or "(no model)"
        price = prices.get(model)
        cost = (prompt * price[0] + completion * price[1]) / 1_000_000 if price else 0.0
        route = f"{flow} · {strategy}"
        for row in (by_day.setdefault(day, UsageRow(str(day))), by_model.setdefault(model, UsageRow(model)),
                    by_route.setdefault(route, UsageRow(route)), by_day_model.setdefault((day, model), UsageRow(model)),
                    total):
            row.runs += runs
            row.prompt += prompt
            row.completion += completion
            row.cost += cost
            row.unpriced += 0 if price else runs
    order = lambda rows: sorted(rows.values(), key=lambda r: (-r.tokens, r.key))  # noqa: E731
    return UsageReport(days=days, by_day=by_day, by_model=order(by_model), by_route=order(by_route),
                 by_day_model=by_day_model, total=total)


def usage_svg(usage: UsageReport, *, measure: str) -> str:
    """Bars per day stacked by model, of `measure` ("tokens" or "cost"), as an accessible SVG."""
    models = [row.key for row in usage.by_model]
    colour = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    value = (lambda r: r.tokens) if measure == "tokens" else (lambda r: r.cost)
    top = max([sum(value(usage.by_day_model[(d, m)]) for m in models if (d, m) in usage.by_day_model)
               for d in usage.days] + [0]) or 1
    width = CHART_WIDTH - 2 * CHART_PAD
    step = width / max(len(usage.days), 1)
    bar = max(step * 0.7, 1)
    unit = "tokens" if measure == "tokens" else "USD"
    label = _amount(top, measure)
    parts = [
        f'<svg class="rc-usage-chart" data-measure="{measure}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT + 30}" role="img" '
        f'aria-label="{escape(measure)} per day by model, {usage.days[0]} to {usage.days[-1]}">',
        f"<title>{escape(measure.capitalize())} per day by model</title>",
        f'<line x1="{CHART_PAD}" y1="{CHART_HEIGHT}" x2="{CHART_WIDTH - CHART_PAD}" y2="{CHART_HEIGHT}" class="axis"/>',
        f'<text x="{CHART_PAD}" y="14" class="tick">{escape(label)} {unit}</text>',
    ]
    for index, day in enumerate(usage.days):
        x = CHART_PAD + index * step + (step - bar) / 2
        base = CHART_HEIGHT
        for model in models:
            row = usage.by_day_model.get((day, model))
            if row is None or not value(row):
                continue
            height = (CHART_HEIGHT - 24) * value(row) / top
            base -= height
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{base:.1f}" width="{bar:.1f}" height="{height:.1f}" '
                f'fill="{colour[model]}" data-day="{day}" data-model="{escape(model)}">'
                f"<title>{day} · {escape(model)}: {escape(_amount(value(row), measure))} {unit}, {row.runs} run(s)</title></rect>")
        if len(usage.days) <= 31 and (index % max(len(usage.days) // 8, 1) == 0):
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{CHART_HEIGHT + 16}" class="tick" text-anchor="middle">'
                         f"{day.strftime('%m-%d')}</text>")
    legend_x = CHART_PAD
    for model in models:
        parts.append(f'<rect x="{legend_x}" y="{CHART_HEIGHT + 22}" width="10" height="10" fill="{colour[model]}"/>'
                     f'<text x="{legend_x + 14}" y="{CHART_HEIGHT + 31}" class="tick">{escape(model)}</text>')
        legend_x += 24 + 7 * len(model)
    parts.append("</svg>")
    return "".join(parts)


def _amount(number: float, measure: str) -> str:
    return f"{number:,.0f}" if measure == "tokens" else f"{number:,.4f}"
