"""The run list's query parameters checked before the list is built: a malformed filter value or search
term is named with the reason, taken out of the query (so the list shows what it showed without it) and
shown beside its control, never dropped silently nor turned into an error page (issue 7 of the console)."""

from __future__ import annotations

import datetime

from django.utils.dateparse import parse_date, parse_datetime

from diagnosis.models import DiagnosisRun
from diagnosis.tools.registry import ALLOWED_TOOLS
from traces.search import SearchTermError, term_check

SEARCH_PARAM = "q"
RANGE_PARAMS = {"latency": "latency (ms)", "tokens": "tokens"}
TEXT_PARAMS = {"error_code": ("error code", 64), "model": ("model", 128), "service": ("root-cause service", 128)}
DATE_PARAMS = ("created_at__gte", "created_at__lt", "created_at__gt", "created_at__lte")


def _choice_params() -> dict[str, tuple[str, set[str]]]:
    return {
        "status__exact": ("status", set(DiagnosisRun.Status.values)),
        "agent_flow__exact": ("agent flow", set(DiagnosisRun.Flow.values)),
        "strategy__exact": ("strategy", set(DiagnosisRun.Strategy.values)),
        "degraded__exact": ("degraded", {"0", "1", "True", "False", "true", "false"}),
        "verdict": ("effective verdict", {*DiagnosisRun.Verdict.values, "none"}),
        "feedback": ("feedback", {*DiagnosisRun.Feedback.values, "none"}),
        "tool": ("tool called", set(ALLOWED_TOOLS)),
    }


def range_parse(value: str) -> tuple[int | None, int | None]:
    """'100-2000', '100-' or '-2000' (whole numbers, at least one bound): the bounds, either may be open.
    ValueError names what was wrong."""
    low, sep, high = (value or "").strip().partition("-")
    if not sep:
        low, high = low, low
    try:
        bounds = tuple(int(part.strip().replace(",", "")) if part.strip() else None for part in (low, high))
    except ValueError:
        raise ValueError(f"“{value}” is not a range of whole numbers like 1000-5000, 1000- or -5000.") from None
    if bounds == (None, None) or any(b is not None and b < 0 for b in bounds):
        raise ValueError(f"“{value}” is not a range of whole numbers like 1000-5000, 1000- or -5000.")
    if None not in bounds and bounds[0] > bounds[1]:
        raise ValueError(f"“{value}”: the lower bound is above the upper one.")
    return bounds


def _date_ok(value: str) -> bool:
    try:
        return bool(parse_date(value) or parse_datetime(value))
    except ValueError:
        return False


def list_param_errors(params) -> dict[str, str]:
    """{parameter: why its value cannot be used} for the run list's query parameters `params`."""
    errors: dict[str, str] = {}
    for name, raw in params.items():
        value = (raw or "").strip()
        if name == SEARCH_PARAM:
            try:
                term_check(value)
            except SearchTermError as exc:
                errors[name] = str(exc)
        elif name in RANGE_PARAMS and value:
            try:
                range_parse(value)
            except ValueError as exc:
                errors[name] = str(exc)
        elif name in TEXT_PARAMS and len(value) > TEXT_PARAMS[name][1]:
            errors[name] = f"A {TEXT_PARAMS[name][0]} is at most {TEXT_PARAMS[name][1]} characters."
        elif name in _choice_params():
            title, allowed = _choice_params()[name]
            if value not in allowed:
                errors[name] = f"“{value}” is not a {title} (one of: {', '.join(sorted(allowed))})."
        elif name in DATE_PARAMS and not _date_ok(value):
            errors[name] = f"“{value}” is not a date like {datetime.date.today().isoformat()}."
    return errors
