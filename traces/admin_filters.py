"""The run list's filters: choices with a "none", boxes typed into (exact text, min-max ranges) and the tool called."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db import models

from diagnosis.models import DiagnosisRun
from diagnosis.tools.registry import ALLOWED_TOOLS
from traces.list_params import range_parse

TOOL_COUNT_CAP = 500  # under the tool filter counting costs an index probe per run: "more than 500"


class ChoiceFilter(admin.SimpleListFilter):
    """One of a field's choices, or "none" for the rows that have none yet."""

    choice_class: type[models.TextChoices]
    field = ""
    none_label = ""
    none_lookup: dict = {}

    def lookups(self, request, model_admin):
        return [*self.choice_class.choices, ("none", self.none_label)]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(**self.none_lookup)
        if self.value() in self.choice_class.values:
            return queryset.filter(**{self.field: self.value()})
        return queryset


class VerdictFilter(ChoiceFilter):
    title = "effective verdict"
    parameter_name = "verdict"
    choice_class = DiagnosisRun.Verdict
    field = "effective_verdict"
    none_label = "No verdict"
    none_lookup = {"effective_verdict": ""}


class FeedbackFilter(ChoiceFilter):
    title = "feedback"
    parameter_name = "feedback"
    choice_class = DiagnosisRun.Feedback
    field = "feedback"
    none_label = "No feedback yet"
    none_lookup = {"feedback__isnull": True}


class InputFilter(admin.SimpleListFilter):
    """A filter typed into a box (an error code, a model, a range) instead of picked from links."""

    template = "admin/rc_input_filter.html"
    placeholder = ""

    def __init__(self, request, params, model, model_admin):
        # A malformed value was taken out of the query (traces.list_params); the box still shows it, with why.
        self.rejected = getattr(request, "rc_rejected", {}).get(self.parameter_name)
        super().__init__(request, params, model, model_admin)

    def lookups(self, request, model_admin):
        return []

    def has_output(self):
        return True

    def choices(self, changelist):
        preserved = [(k, v) for k, v in changelist.params.items() if k not in (self.parameter_name, "p", "e")]
        yield {
            "preserved": preserved, "placeholder": self.placeholder,
            "value": self.rejected[0] if self.rejected else self.value() or "",
            "error": self.rejected[1] if self.rejected else "",
            "parameter_name": self.parameter_name,
            "clear_url": changelist.get_query_string(remove=[self.parameter_name]),
        }


class ExactTextFilter(InputFilter):
    field = ""

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(**{self.field: value}) if value else queryset


class ErrorCodeFilter(ExactTextFilter):
    title = "error code"
    parameter_name = "error_code"
    field = "error_code"
    placeholder = "e.g. model_connection_error"


class ModelNameFilter(ExactTextFilter):
    title = "model"
    parameter_name = "model"
    field = "model_name"
    placeholder = "e.g. gpt-4o-mini"


def parse_range(value: str) -> tuple[int | None, int | None]:
    """'100-2000', '100-' or '-2000' (whole numbers): the bounds, either may be open."""
    try:
        return range_parse(value)
    except ValueError as exc:
        raise IncorrectLookupParameters(str(exc)) from None


class RangeFilter(InputFilter):
    placeholder = "min-max, e.g. 1000-5000"
    field = ""

    def queryset(self, request, queryset):
        if not (self.value() or "").strip():
            return queryset
        low, high = parse_range(self.value())
        if low is not None:
            queryset = queryset.filter(**{f"{self.field}__gte": low})
        if high is not None:
            queryset = queryset.filter(**{f"{self.field}__lte": high})
        return queryset


class LatencyFilter(RangeFilter):
    title = "latency (ms)"
    parameter_name = "latency"
    field = "duration_ms"


class TokensFilter(RangeFilter):
    title = "tokens"
    parameter_name = "tokens"
    field = "tokens_total"  # prompt + completion, computed and indexed by the database


class ServiceFilter(ExactTextFilter):
    """The service the structured diagnosis names as the root cause. Exact: equality lets the
    (root_service, created_at) index give the newest first (a prefix range would sort its matches)."""

    title = "root-cause service"
    parameter_name = "service"
    field = "root_service"
    placeholder = "e.g. payment-service"


class ToolFilter(admin.SimpleListFilter):
    title = "tool called"
    parameter_name = "tool"

    def lookups(self, request, model_admin):
        return [(name, name) for name in sorted(ALLOWED_TOOLS)]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        # One probe of the tool_invocation(tool_name, run) index per run, as the list walks its
        # (created_at, id) index newest first: the page stops after 50 matches, whatever other filters
        # apply. A scalar subquery, not EXISTS or IN: MariaDB turns those into a semi-join that
        # materialises every run that ever called the tool and sorts them (0.5-3 s at 1M runs).
        # The count stops at TOOL_COUNT_CAP ("more than 500"), since counting costs a probe per run.
        request.rc_count_cap = TOOL_COUNT_CAP
        return queryset.extra(
            where=["(SELECT 1 FROM tool_invocation ti WHERE ti.run_id = diagnosis_run.id "
                   "AND ti.tool_name = %s LIMIT 1) IS NOT NULL"],
            params=[self.value()],
        )


# --------------------------------------------------------------------------- runs
