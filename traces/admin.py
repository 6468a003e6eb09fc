# size: one ModelAdmin per audit table, sharing the capped paginator, filters and deferred columns.
"""The audit console (SPEC §8): read-only admin pages over sessions, runs, steps, tool invocations
and cases, built to stay fast on tables of millions of rows.

Nobody adds, changes or deletes audit rows here, superusers included; retention is the
`purge_runs` management command, and feedback (on the run-detail page) is the only write.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import SEARCH_VAR
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.db.models.functions import Substr
from django.http import HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from diagnosis.models import (
    AgentStep, CaseLibraryEntry, ChatSession, DiagnosisRun, RunReview, RunReviewEntry, ToolInvocation,
)
from diagnosis.services.access import can_publish_cases
from diagnosis.services.feedback import CasePublishRefused, case_publish
from diagnosis.tools.registry import ALLOWED_TOOLS
from traces import admin_views
from traces.list_params import SEARCH_PARAM, list_param_errors, range_parse
from traces.models import ScoreConfig
from traces.rendering import json_html
from traces.search import TEXT_COUNT_CAP, id_kind, runs_lookup
from traces.trust import trust_line

admin.site.site_header = "AIOps audit console"
admin.site.site_title = "AIOps audit console"
admin.site.index_title = "Runs, evidence and feedback"
admin.site.enable_nav_sidebar = False  # the audit tables need the full width
admin.site.site_url = None  # the service has no public site to go back to

PREVIEW_CHARS = 90
TRUST_QUESTION_CHARS = 400  # where a list row's trust line looks for the services a question names
TOOL_COUNT_CAP = 500  # under the tool filter counting costs an index probe per run: "more than 500"
SESSION_RUNS_SHOWN = 100


class CappedCountPaginator(Paginator):
    """Counts at most COUNT_CAP rows (``SELECT COUNT(*) FROM (SELECT id … LIMIT cap+1)``), never the table.

    Past the cap the list shows "more than 10,000" and pages up to the cap; filters and search
    narrow the rest.
    """

    COUNT_CAP = 10_000

    @cached_property
    def _counted(self) -> int:
        return self.object_list.order_by().values("pk")[: self.COUNT_CAP + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self._counted, self.COUNT_CAP)

    @property
    def capped(self) -> bool:
        return self._counted > self.COUNT_CAP


class AuditAdmin(admin.ModelAdmin):
    """Read-only for everyone: viewing needs the model's view permission, nothing can be written."""

    paginator = CappedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    actions = None
    list_per_page = 50

    @property
    def media(self):
        # Read-only pages with no bulk action need none of the admin's form scripts (jQuery, XRegExp, the
        # related-object pop-ups: 270 KB); the case library keeps them for its publish actions.
        return super().media if self.actions else forms.Media()

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)


def _badge(value: str, css: str | None = None):
    if not value:
        return mark_safe('<span class="rc-muted">—</span>')
    return format_html('<span class="rc-badge rc-{}">{}</span>', css or value.lower(), value)


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def _short_run_link(run_pk, run_id: str):
    """The run id cut to its first 8 hex digits (the full id in the tooltip; that prefix finds the run)."""
    url = reverse("admin:diagnosis_diagnosisrun_change", args=[run_pk])
    return format_html('<a class="rc-mono" href="{}" title="{}">{}…</a>', url, run_id, run_id[:12])


def _duration(ms) -> str:
    if ms is None:
        return "—"
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


# --------------------------------------------------------------------------- filters


class VerdictFilter(admin.SimpleListFilter):
    title = "effective verdict"
    parameter_name = "verdict"

    def lookups(self, request, model_admin):
        return [*DiagnosisRun.Verdict.choices, ("none", "No verdict")]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(effective_verdict="")
        if self.value() in DiagnosisRun.Verdict.values:
            return queryset.filter(effective_verdict=self.value())
        return queryset


class FeedbackFilter(admin.SimpleListFilter):
    title = "feedback"
    parameter_name = "feedback"

    def lookups(self, request, model_admin):
        return [*DiagnosisRun.Feedback.choices, ("none", "No feedback yet")]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(feedback__isnull=True)
        if self.value() in DiagnosisRun.Feedback.values:
            return queryset.filter(feedback=self.value())
        return queryset


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


@admin.register(DiagnosisRun)
class DiagnosisRunAdmin(AuditAdmin):
    list_display = (
        "run_link", "session_link", "question_preview", "agent_flow", "strategy", "status_badge", "degraded_badge",
        "feedback_badge", "duration", "tokens", "created", "trust",
    )
    list_display_links = None
    list_filter = (
        "status", "agent_flow", "strategy", VerdictFilter, "degraded", FeedbackFilter, ServiceFilter, ToolFilter,
        ErrorCodeFilter, ModelNameFilter, LatencyFilter, TokensFilter, ("created_at", admin.DateFieldListFilter),
    )
    # Searched by `traces.search.runs_lookup`: ids by an indexed prefix lookup, the question by full text.
    search_fields = ("question",)
    search_help_text = ("A run id, session id or invocation id (inv-…), whole or its first 8+ characters, "
                        "or words of the question.")
    # The page's sessions come in a second query (WHERE id IN …) rather than a JOIN: with table
    # statistics SQLite would otherwise drive the join from chat_session and sort the whole table.
    list_select_related = False
    sortable_by = ("created", "duration", "tokens", "status_badge")
    ordering = ("-created_at", "-id")
    # The heavy JSON and text columns stay in the database on list pages.
    HEAVY_FIELDS = (
        "question", "question_terms", "answer_terms", "root_summary", "answer", "self_evaluation", "orchestration_trace", "error_message",
        "feedback_comment", "session__summary", "session__metadata",
    )

    def get_queryset(self, request):
        return (
            super().get_queryset(request)
            .defer(*[f for f in self.HEAVY_FIELDS if not f.startswith("session__")])
            .annotate(question_head=Substr("question", 1, PREVIEW_CHARS + 1),
                      question_start=Substr("question", 1, TRUST_QUESTION_CHARS))
            .prefetch_related(Prefetch("session", queryset=ChatSession.objects.only("id", "session_id")))
        )

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view
        return [
            path("review-queue/", view(self.review_queue_view), name="%s_%s_review_queue" % info),
            path("diff/", view(self.diff_view), name="%s_%s_diff" % info),
            path("usage/", view(self.usage_view), name="%s_%s_usage" % info),
            path("saved-views/", view(self.saved_views_view), name="%s_%s_saved_views" % info),
            path("saved-views/<int:view_id>/", view(self.saved_views_view), name="%s_%s_saved_view" % info),
            path("saved-views/<int:view_id>/<str:action>/", view(self.saved_views_view),
                 name="%s_%s_saved_view_action" % info),
            path("<path:object_id>/feedback/", view(self.feedback_view), name="%s_%s_feedback" % info),
            path("<path:object_id>/review/", view(self.review_view), name="%s_%s_review" % info),
            path("<path:object_id>/score/", view(self.score_view), name="%s_%s_score" % info),
            path("<path:object_id>/part/<str:kind>/<str:key>/", view(self.part_view), name="%s_%s_part" % info),
            *super().get_urls(),
        ]

    def get_paginator(self, request, queryset, per_page, orphans=0, allow_empty_first_page=True):
        paginator = super().get_paginator(request, queryset, per_page, orphans, allow_empty_first_page)
        lookup = getattr(request, "rc_lookup", None)
        if lookup is not None and lookup.kind == "text":
            paginator.COUNT_CAP = TEXT_COUNT_CAP  # every match is listed; past this the count is a bound
        paginator.COUNT_CAP = min(paginator.COUNT_CAP, getattr(request, "rc_count_cap", paginator.COUNT_CAP))
        return paginator

    def get_search_results(self, request, queryset, search_term):
        lookup = runs_lookup(queryset, search_term)
        request.rc_lookup = lookup
        return lookup.queryset, False

    def get_ordering(self, request):
        # A chosen sort alone, with the primary key as the admin's tie-break: the column's index serves it
        # (appending the default -created_at would make MariaDB sort every run).
        return () if request.GET.get("o") else self.ordering

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        rejected = getattr(request, "rc_rejected", {})
        changelist.rc_search_error = rejected.get(SEARCH_PARAM, ("", ""))[1]
        changelist.rc_search_value = rejected[SEARCH_PARAM][0] if SEARCH_PARAM in rejected else changelist.query
        typed = {spec.parameter_name for spec in changelist.filter_specs if isinstance(spec, InputFilter)}
        changelist.rc_filter_errors = [(name, value, why) for name, (value, why) in rejected.items()
                                       if name != SEARCH_PARAM and name not in typed]  # typed ones: under their box
        return changelist

    def column_choices(self) -> list[tuple[str, str]]:
        """The run list's columns a saved view may pick (the run link is always shown)."""
        from django.contrib.admin.utils import label_for_field

        return [(name, str(label_for_field(name, self.model, self)).lower()) for name in self.list_display
                if name != "run_link"]

    def saved_views_view(self, request, view_id=None, action=""):
        return admin_views.saved_views_view(self, request, view_id, action)

    def changelist_view(self, request, extra_context=None):
        columns = request.GET.get("cols")
        if columns is not None:  # a saved view's columns: not a filter
            allowed = {name for name, _ in self.column_choices()}
            request.rc_columns = [c for c in columns.split(",") if c in allowed]
            kept = request.GET.copy()
            kept.pop("cols")
            request.GET = kept
        errors = list_param_errors(request.GET)
        if errors:
            # Shown beside their controls; the list is the one without them (the previous results).
            request.rc_rejected = {name: (request.GET.get(name, ""), why) for name, why in errors.items()}
            kept = request.GET.copy()
            for name in errors:
                kept.pop(name, None)
            request.GET = kept
        term = request.GET.get(SEARCH_VAR, "").strip()
        if term and id_kind(term) and self.has_view_permission(request):
            # An id that names exactly one run opens that run.
            lookup = runs_lookup(DiagnosisRun.objects.all(), term)
            if lookup.by_id:
                found = list(lookup.queryset.order_by().values_list("pk", flat=True)[:2])
                if len(found) == 1:
                    return HttpResponseRedirect(reverse("admin:diagnosis_diagnosisrun_change", args=[found[0]]))
        return super().changelist_view(request, {
            "title": "Diagnosis runs", **admin_views.saved_views_context(self, request), **(extra_context or {})})

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return admin_views.run_detail_view(self, request, object_id, extra_context)

    def feedback_view(self, request, object_id):
        return admin_views.run_feedback_view(self, request, object_id)

    def review_view(self, request, object_id):
        return admin_views.run_review_view(self, request, object_id)

    def score_view(self, request, object_id):
        return admin_views.run_score_view(self, request, object_id)

    def review_queue_view(self, request):
        return admin_views.review_queue_view(self, request)

    def diff_view(self, request):
        return admin_views.run_diff_view(self, request)

    def usage_view(self, request):
        return admin_views.usage_view(self, request)

    def part_view(self, request, object_id, kind, key):
        return admin_views.run_part_view(self, request, object_id, kind, key)

    @admin.display(description="run")
    def run_link(self, run):
        return _short_run_link(run.pk, run.run_id)

    @admin.display(description="session")
    def session_link(self, run):
        url = reverse("admin:diagnosis_chatsession_change", args=[run.session_id])
        session_id = run.session.session_id
        # Both ends: generated ids share their first characters far less than their last ones.
        shown = session_id if len(session_id) <= 20 else session_id[:10] + "…" + session_id[-6:]
        return format_html('<a class="rc-mono" href="{}" title="{}">{}</a>', url, session_id, shown)

    @admin.display(description="question")
    def question_preview(self, run):
        head = run.question_head or ""
        return head[:PREVIEW_CHARS] + ("…" if len(head) > PREVIEW_CHARS else "")

    @admin.display(description="status", ordering="status")
    def status_badge(self, run):
        return _badge(run.status, "degraded" if run.degraded else None)  # a degraded success is not green

    @admin.display(description="verdict")
    def verdict_badge(self, run):
        return _badge(run.effective_verdict)

    @admin.display(description="degraded")
    def degraded_badge(self, run):
        return _badge("degraded") if run.degraded else mark_safe('<span class="rc-muted">no</span>')

    @admin.display(description="feedback")
    def feedback_badge(self, run):
        return _badge(run.get_feedback_display() if run.feedback else "", run.feedback)

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, run):
        return _duration(run.duration_ms)

    @admin.display(description="tokens", ordering="tokens_total")
    def tokens(self, run):
        return f"{run.total_tokens:,}"

    @admin.display(description="verdict and trust")
    def trust(self, run):
        line = trust_line(flow=run.agent_flow, question=run.question_start or "", verdict=run.effective_verdict,
                          diagnosis=run.diagnosis, degraded=run.degraded)
        return render_to_string("traces/_trust_line.html", {"t": line})

    @admin.display(description="created", ordering="created_at")
    def created(self, run):
        if run.created_at is None:
            return "—"
        return format_html('{}<br><span class="rc-muted">{}</span>', run.created_at.strftime("%Y-%m-%d"),
                           run.created_at.strftime("%H:%M:%S"))


# --------------------------------------------------------------------------- sessions


@admin.register(ChatSession)
class ChatSessionAdmin(AuditAdmin):
    list_display = ("session_id", "owner", "title", "created_at", "last_message_at")
    # The owners come in a second query, not a JOIN: MariaDB drives such a join from auth_user (a handful of
    # rows) and sorts every session (3 s at 250,000 sessions) instead of walking the (created_at, id) index.
    list_select_related = False
    list_filter = (("created_at", admin.DateFieldListFilter),)
    search_fields = ("=session_id", "=owner__username", "title")
    search_help_text = "A session id or owner username (exact), or words of the title."
    ordering = ("-created_at", "-id")
    fields = ("session_id", "owner", "title", "created_at", "last_message_at", "expires_at", "runs_in_order",
              "summary", "metadata_pretty")

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            return qs.defer("summary", "metadata").prefetch_related(
                Prefetch("owner", queryset=get_user_model().objects.only("id", "username")))
        return qs.select_related("owner")

    @admin.display(description="metadata")
    def metadata_pretty(self, session):
        return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(session.metadata))

    @admin.display(description="runs, oldest first")
    def runs_in_order(self, session):
        runs = list(
            DiagnosisRun.objects.filter(session_id=session.pk)
            .only("id", "run_id", "status", "effective_verdict", "degraded", "feedback", "duration_ms", "created_at")
            .annotate(question_head=Substr("question", 1, PREVIEW_CHARS + 1))
            .order_by("created_at", "id")[: SESSION_RUNS_SHOWN + 1]
        )
        rows = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    number,
                    format_html('<a class="rc-mono" href="{}">{}</a>',
                                reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk]), run.run_id),
                    run.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                    (run.question_head or "")[:PREVIEW_CHARS],
                    _badge(run.status),
                    _badge(run.effective_verdict),
                    _duration(run.duration_ms),
                )
                for number, run in enumerate(runs[:SESSION_RUNS_SHOWN], start=1)
            ),
        )
        all_url = f"{reverse('admin:diagnosis_diagnosisrun_changelist')}?session__id__exact={session.pk}"
        more = (
            format_html('<p>Only the first {} runs are listed. <a href="{}">All runs of this session</a></p>',
                        SESSION_RUNS_SHOWN, all_url)
            if len(runs) > SESSION_RUNS_SHOWN else ""
        )
        if not runs:
            return "No runs yet."
        return format_html(
            '<table class="rc-session-runs"><thead><tr><th>#</th><th>run</th><th>created</th><th>question</th>'
            "<th>status</th><th>verdict</th><th>duration</th></tr></thead><tbody>{}</tbody></table>{}",
            rows, more,
        )


# --------------------------------------------------------------------------- steps and tool invocations

RUNS_PER_ID_SEARCH = 200  # a session id names at most this many runs in a step or invocation search


def run_rows_search(queryset, term: str, *, invocations: bool = False):
    """Steps or tool invocations of the run, session or (for invocations) invocation `term` names.

    The runs are resolved first by their own indexes (run id, session), then the rows by the indexed
    ``run_id`` foreign key: an OR across a join to diagnosis_run would read every row (1.4 s at 1M runs).
    """
    term = (term or "").strip()
    if not term:
        return queryset
    if invocations and term.startswith("inv-"):
        return queryset.filter(invocation_id=term.lower())
    if term.startswith("run-"):
        runs = DiagnosisRun.objects.filter(run_id=term.lower())
    else:  # two plain lookups: MariaDB refuses a LIMIT inside an IN subquery
        runs = DiagnosisRun.objects.filter(session_id__in=list(
            ChatSession.objects.filter(session_id=term).values_list("pk", flat=True)[:1]))
    pks = list(runs.order_by().values_list("pk", flat=True)[:RUNS_PER_ID_SEARCH])
    return queryset.filter(run_id__in=pks)


@admin.register(AgentStep)
class AgentStepAdmin(AuditAdmin):
    list_display = ("__str__", "run_link", "step_index", "node", "agent", "attempt", "status", "duration", "tokens",
                    "started_at")
    list_select_related = ("run",)
    list_filter = ("node", "status")
    search_fields = ("=run__run_id", "=session_id")
    search_help_text = "A run id or a session id (exact)."
    ordering = ("-id",)

    def get_search_results(self, request, queryset, search_term):
        return run_rows_search(queryset, search_term), False
    fields = ("run_link", "session_id", "step_index", "node", "agent", "attempt", "status", "model_name",
              "has_tool_call", "duration", "tokens", "started_at", "finished_at", "error", "invocations",
              "model_input_pretty", "model_output_pretty")

    def get_queryset(self, request):
        qs = super().get_queryset(request).defer(
            "run__question", "run__answer", "run__self_evaluation", "run__orchestration_trace", "run__error_message",
            "run__feedback_comment",
        )
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("model_input", "model_output", "error")
        return qs

    @admin.display(description="run")
    def run_link(self, step):
        url = reverse("admin:diagnosis_diagnosisrun_change", args=[step.run_id])
        return format_html('<a class="rc-mono" href="{}#step-{}">{}</a>', url, step.step_index, step.run.run_id)

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, step):
        return _duration(step.duration_ms)

    @admin.display(description="tokens (prompt / completion)")
    def tokens(self, step):
        return f"{step.prompt_tokens:,} / {step.completion_tokens:,}"

    @admin.display(description="tool invocations")
    def invocations(self, step):
        links = format_html_join(
            ", ", '<a class="rc-mono" href="{}">{} {}</a>',
            ((reverse("admin:diagnosis_toolinvocation_change", args=[i.pk]), i.invocation_id, i.tool_name)
             for i in step.tool_invocations.only("id", "invocation_id", "tool_name", "step_id")),
        )
        return links or "—"

    @admin.display(description="model input")
    def model_input_pretty(self, step):
        return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(step.model_input))

    @admin.display(description="model output")
    def model_output_pretty(self, step):
        return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(step.model_output))


@admin.register(ToolInvocation)
class ToolInvocationAdmin(AuditAdmin):
    list_display = ("invocation_id", "tool_name", "run_link", "step_index", "status", "duration", "truncated",
                    "created_at")
    list_select_related = ("run", "step")
    list_filter = ("tool_name", "status", "truncated")
    search_fields = ("=invocation_id", "=run__run_id", "=session_id")
    search_help_text = "An invocation id, a run id or a session id (exact)."
    ordering = ("-id",)

    def get_search_results(self, request, queryset, search_term):
        return run_rows_search(queryset, search_term, invocations=True), False
    fields = ("invocation_id", "run_link", "step_link", "session_id", "tool_name", "status", "duration", "truncated",
              "created_at", "error_message", "arguments_pretty", "result_pretty", "retrieval_details_pretty",
              "evidence_refs_pretty")

    def get_queryset(self, request):
        qs = super().get_queryset(request).defer(
            "run__question", "run__answer", "run__self_evaluation", "run__orchestration_trace", "run__error_message",
            "run__feedback_comment", "step__model_input", "step__model_output", "step__error",
        )
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("arguments", "result", "retrieval_details", "evidence_refs", "error_message")
        return qs

    @admin.display(description="run")
    def run_link(self, invocation):
        url = reverse("admin:diagnosis_diagnosisrun_change", args=[invocation.run_id])
        return format_html('<a class="rc-mono" href="{}#{}">{}</a>', url, invocation.invocation_id,
                           invocation.run.run_id)

    @admin.display(description="step")
    def step_link(self, invocation):
        if invocation.step_id is None:
            return "—"
        url = reverse("admin:diagnosis_agentstep_change", args=[invocation.step_id])
        return format_html('<a href="{}">#{} {}</a>', url, invocation.step.step_index, invocation.step.node)

    @admin.display(description="step", ordering="step__step_index")
    def step_index(self, invocation):
        return invocation.step.step_index if invocation.step_id else "—"

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, invocation):
        return _duration(invocation.duration_ms)

    @admin.display(description="arguments")
    def arguments_pretty(self, invocation):
        return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(invocation.arguments))

    @admin.display(description="result")
    def result_pretty(self, invocation):
        return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(invocation.result))

    @admin.display(description="retrieval details")
    def retrieval_details_pretty(self, invocation):
        return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(invocation.retrieval_details))

    @admin.display(description="evidence refs")
    def evidence_refs_pretty(self, invocation):
        return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(invocation.evidence_refs))


# --------------------------------------------------------------------------- cases


@admin.register(CaseLibraryEntry)
class CaseLibraryEntryAdmin(AuditAdmin):
    list_display = ("__str__", "run_link", "status", "session_id", "created_by", "created_at", "updated_at")
    list_select_related = ("run", "created_by")
    search_fields = ("=run__run_id", "=session_id", "root_cause_summary")
    search_help_text = "A run id or a session id (exact), or words of the verified claims."
    list_filter = ("status", ("created_at", admin.DateFieldListFilter))
    ordering = ("-created_at", "-id")
    fields = ("run_link", "status", "session_id", "source_run_id", "claims_pretty", "root_cause_summary", "tags",
              "created_by", "published_by", "published_at", "created_at", "updated_at")
    # Publishing is the one write on cases, and only support staff may do it (SPEC R3).
    actions = ("publish_cases", "withdraw_cases")

    def get_actions(self, request):
        if not can_publish_cases(request.user):
            return {}
        return super().get_actions(request)

    @admin.display(description="verified claims (with their excerpts)")
    def claims_pretty(self, case):
        return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(case.claims))

    def _publish(self, request, queryset, publish: bool):
        done = 0
        try:
            for case in queryset:
                case_publish(user=request.user, case=case, publish=publish)
                done += 1
        except CasePublishRefused as exc:
            self.message_user(request, f"Not changed: {exc}.", level="error")
            return
        self.message_user(request, f"{done} case(s) {'published' if publish else 'withdrawn to candidate'}.")

    @admin.action(description="Publish the selected cases (later diagnoses will retrieve them)")
    def publish_cases(self, request, queryset):
        self._publish(request, queryset, True)

    @admin.action(description="Withdraw the selected cases back to candidates")
    def withdraw_cases(self, request, queryset):
        self._publish(request, queryset, False)

    def get_queryset(self, request):
        qs = super().get_queryset(request).defer(
            "run__question", "run__answer", "run__self_evaluation", "run__orchestration_trace", "run__error_message",
            "run__feedback_comment",
        )
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("question", "answer", "root_cause_summary").annotate(
                question_head=Substr("question", 1, PREVIEW_CHARS + 1))
        return qs

    @admin.display(description="run")
    def run_link(self, case):
        url = reverse("admin:diagnosis_diagnosisrun_change", args=[case.run_id])
        return format_html('<a class="rc-mono" href="{}">{}</a>', url, case.run.run_id)

    @admin.display(description="question")
    def question_preview(self, case):
        text = getattr(case, "question_head", None) or ""
        return text[:PREVIEW_CHARS] + ("…" if len(text) > PREVIEW_CHARS else "")


# --------------------------------------------------------------------------- reviews


@admin.register(RunReview)
class RunReviewAdmin(AuditAdmin):
    """Reviews as recorded rows, for auditors: who opened, assigned, labelled and resolved what, and when.
    They are written from a run's page (the reviews service), never here."""

    list_display = ("run_link", "trigger", "status", "assignee", "reason_labels", "resolution", "created_by",
                    "created_at", "resolved_by", "resolved_at")
    list_select_related = ("run", "assignee", "created_by", "resolved_by")
    list_filter = ("status", "trigger", "resolution")
    search_fields = ("=run__run_id",)
    search_help_text = "A run id (exact)."
    ordering = ("-created_at", "-id")
    fields = ("run_link", "trigger", "status", "assignee", "reason_labels", "resolution", "note", "created_by",
              "created_at", "updated_by", "updated_at", "resolved_by", "resolved_at", "history")

    def get_queryset(self, request):
        return super().get_queryset(request).defer(
            "run__question", "run__answer", "run__self_evaluation", "run__orchestration_trace", "run__error_message",
            "run__feedback_comment",
        )

    @admin.display(description="run")
    def run_link(self, review):
        url = reverse("admin:diagnosis_diagnosisrun_change", args=[review.run_id])
        return format_html('<a class="rc-mono" href="{}#review">{}</a>', url, review.run.run_id)

    @admin.display(description="reasons")
    def reason_labels(self, review):
        labels = dict(RunReview.Reason.choices)
        return ", ".join(labels.get(r, r) for r in review.reasons or []) or "—"

    @admin.display(description="history")
    def history(self, review):
        entries = RunReviewEntry.objects.filter(review=review).select_related("actor")
        return format_html(
            '<table class="rc-session-runs"><thead><tr><th>when</th><th>who</th><th>action</th><th>changes</th>'
            "</tr></thead><tbody>{}</tbody></table>",
            format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>", (
                (_when(e.created_at), e.actor.get_username() if e.actor else "—", e.action, e.changes)
                for e in entries
            )),
        )


# --------------------------------------------------------------------------- score configurations


@admin.register(ScoreConfig)
class ScoreConfigAdmin(admin.ModelAdmin):
    """Superusers define the scores reviewers give beside the binary feedback (a retired one stays with
    the scores given: deactivate it, scores keep it from being deleted)."""

    list_display = ("name", "kind", "categories_shown", "active", "description")
    list_filter = ("kind", "active")
    fields = ("name", "kind", "categories", "description", "active")

    @admin.display(description="values")
    def categories_shown(self, config):
        return ", ".join(config.values)

    def save_model(self, request, obj, form, change):
        if obj.kind == ScoreConfig.Kind.NUMERIC:
            obj.categories = []
        super().save_model(request, obj, form, change)
