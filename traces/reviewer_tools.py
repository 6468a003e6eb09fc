"""Services of the reviewer's own rows: scores on runs and saved views of the run list."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from django.db import transaction

from diagnosis.models import DiagnosisRun
from traces.models import RunScore, SavedView, ScoreConfig


class ReviewerToolError(ValueError):
    """Bad input to a reviewer tool; `field` names the input."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@transaction.atomic
def run_score_give(*, user, run: DiagnosisRun, config: ScoreConfig, value: str) -> RunScore:
    """Store `user`'s `value` of `config` on `run` (replacing their earlier one)."""
    value = (value or "").strip()
    if not config.active:
        raise ReviewerToolError("config", f"The score “{config.name}” is retired.")
    if value not in config.values:
        raise ReviewerToolError("value", f"“{value}” is not a value of “{config.name}” (one of: {', '.join(config.values)}).")
    score, _ = RunScore.objects.update_or_create(run=run, config=config, user=user, defaults={"value": value})
    return score


def saved_view_query(query: str, *, ignored: tuple[str, ...] = ("p", "e", "cols")) -> str:
    """The run list's query string as saved: the page number and columns left out."""
    return urlencode([(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in ignored])


@transaction.atomic
def saved_view_save(*, user, name: str, query: str, columns: list[str], allowed_columns: tuple[str, ...]) -> SavedView:
    """Save (or replace) `user`'s view called `name`."""
    name = (name or "").strip()
    if not name or len(name) > 80:
        raise ReviewerToolError("name", "A view needs a name of 1 to 80 characters.")
    unknown = [c for c in columns if c not in allowed_columns]
    if unknown or not columns:
        raise ReviewerToolError("columns", "Pick at least one column" if not columns else f"Unknown columns: {unknown}.")
    view, _ = SavedView.objects.update_or_create(
        user=user, name=name, defaults={"query": saved_view_query(query)[:2000], "columns": list(columns)})
    return view
