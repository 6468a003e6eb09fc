"""The audit console (SPEC §8): read-only admin pages over sessions, runs, steps, tool invocations
and cases, built to stay fast on tables of millions of rows.

Nobody adds, changes or deletes audit rows here, superusers included; retention is the
`purge_runs` management command, and feedback (on the run-detail page) is the only write.
This module holds the run list and the run pages; the shared base is `traces.admin_base`, the
list filters `traces.admin_filters`, the tables under a run `traces.admin_audit`, and cases,
reviews and score configurations `traces.admin_cases`.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import SEARCH_VAR
from django.db.models import Prefetch
from django.db.models.functions import Substr
from django.http import HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from diagnosis.models import ChatSession, DiagnosisRun
from traces import admin_audit, admin_cases, admin_views  # noqa: F401 (admin_audit, admin_cases register their tables)
from traces.admin_base import PREVIEW_CHARS, AuditAdmin, CappedCountPaginator, badge, duration_text, short_run_link
from traces.admin_filters import (
    ErrorCodeFilter, FeedbackFilter, InputFilter, LatencyFilter, ModelNameFilter, ServiceFilter, TokensFilter,
    ToolFilter, VerdictFilter,
)
from traces.list_params import SEARCH_PARAM, list_param_errors
from traces.search import TEXT_COUNT_CAP, id_kind, runs_lookup
from traces.trust import trust_line

__all__ = ["CappedCountPaginator", "DiagnosisRunAdmin", "ToolFilter"]

admin.site.site_header = "AIOps audit console"
admin.site.site_title = "AIOps audit console"
admin.site.index_title = "Runs, evidence and feedback"
admin.site.enable_nav_sidebar = False  # the audit tables need the full width
admin.site.site_url = None  # the service has no public site to go back to

TRUST_QUESTION_CHARS = 400  # where a list row's trust line looks for the services a question names


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
        return short_run_link(run.pk, run.run_id)

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
        return badge(run.status, "degraded" if run.degraded else None)  # a degraded success is not green

    @admin.display(description="verdict")
    def verdict_badge(self, run):
        return badge(run.effective_verdict)

    @admin.display(description="degraded")
    def degraded_badge(self, run):
        return badge("degraded") if run.degraded else mark_safe('<span class="rc-muted">no</span>')

    @admin.display(description="feedback")
    def feedback_badge(self, run):
        return badge(run.get_feedback_display() if run.feedback else "", run.feedback)

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, run):
        return duration_text(run.duration_ms)

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
