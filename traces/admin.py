"""The audit console (SPEC §8): read-only admin pages over sessions, runs, steps, tool invocations
and cases, built to stay fast on tables of millions of rows.

Nobody adds, changes or deletes audit rows here, superusers included; retention is the
`purge_runs` management command, and feedback (on the run-detail page) is the only write.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import F
from django.db.models.functions import Substr
from django.urls import path, reverse
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from diagnosis.models import AgentStep, CaseLibraryEntry, ChatSession, DiagnosisRun, ToolInvocation
from traces import admin_views
from traces.rendering import json_html

admin.site.site_header = "AIOps audit console"
admin.site.site_title = "AIOps audit console"
admin.site.index_title = "Runs, evidence and feedback"
admin.site.enable_nav_sidebar = False  # the audit tables need the full width
admin.site.site_url = None  # the service has no public site to go back to

PREVIEW_CHARS = 90
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
    """The run id cut to its first 8 hex digits (the full id in the tooltip), linking to the run page."""
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


# --------------------------------------------------------------------------- runs


@admin.register(DiagnosisRun)
class DiagnosisRunAdmin(AuditAdmin):
    list_display = (
        "run_link", "session_link", "question_preview", "agent_flow", "strategy", "status_badge", "verdict_badge",
        "degraded_badge", "feedback_badge", "duration", "tokens", "created",
    )
    list_display_links = None
    list_filter = (
        "status", "agent_flow", "strategy", VerdictFilter, "degraded", FeedbackFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    # Ids match exactly (indexed); the question is searched by substring.
    search_fields = ("=run_id", "=session__session_id", "question")
    search_help_text = "A run id, a session id (exact), or words of the question."
    list_select_related = ("session",)
    sortable_by = ("created", "duration", "tokens", "status_badge")
    ordering = ("-created_at", "-id")
    # The heavy JSON and text columns stay in the database on list pages.
    HEAVY_FIELDS = (
        "question", "answer", "self_evaluation", "orchestration_trace", "error_message", "feedback_comment",
        "session__summary", "session__metadata",
    )

    def get_queryset(self, request):
        return (
            super().get_queryset(request)
            .defer(*self.HEAVY_FIELDS)
            .annotate(question_head=Substr("question", 1, PREVIEW_CHARS + 1))
        )

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/feedback/", view(self.feedback_view), name="%s_%s_feedback" % info),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Diagnosis runs", **(extra_context or {})})

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return admin_views.run_detail_view(self, request, object_id, extra_context)

    def feedback_view(self, request, object_id):
        return admin_views.run_feedback_view(self, request, object_id)

    @admin.display(description="run")
    def run_link(self, run):
        return _short_run_link(run.pk, run.run_id)

    @admin.display(description="session")
    def session_link(self, run):
        url = reverse("admin:diagnosis_chatsession_change", args=[run.session_id])
        session_id = run.session.session_id
        shown = session_id if len(session_id) <= 14 else session_id[:12] + "…"
        return format_html('<a class="rc-mono" href="{}" title="{}">{}</a>', url, session_id, shown)

    @admin.display(description="question")
    def question_preview(self, run):
        head = run.question_head or ""
        return head[:PREVIEW_CHARS] + ("…" if len(head) > PREVIEW_CHARS else "")

    @admin.display(description="status", ordering="status")
    def status_badge(self, run):
        return _badge(run.status)

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

    @admin.display(description="tokens", ordering=F("prompt_tokens") + F("completion_tokens"))
    def tokens(self, run):
        return f"{run.total_tokens:,}"

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
    list_select_related = ("owner",)
    list_filter = (("created_at", admin.DateFieldListFilter),)
    search_fields = ("=session_id", "=owner__username", "title")
    search_help_text = "A session id or owner username (exact), or words of the title."
    ordering = ("-created_at", "-id")
    fields = ("session_id", "owner", "title", "created_at", "last_message_at", "expires_at", "runs_in_order",
              "summary", "metadata_pretty")

    def get_queryset(self, request):
        qs = super().get_queryset(request).select_related("owner")
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("summary", "metadata")
        return qs

    @admin.display(description="metadata")
    def metadata_pretty(self, session):
        return format_html('<pre class="rc-json">{}</pre>', json_html(session.metadata))

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


@admin.register(AgentStep)
class AgentStepAdmin(AuditAdmin):
    list_display = ("__str__", "run_link", "step_index", "node", "agent", "attempt", "status", "duration", "tokens",
                    "started_at")
    list_select_related = ("run",)
    list_filter = ("node", "status")
    search_fields = ("=run__run_id", "=session_id")
    search_help_text = "A run id or a session id (exact)."
    ordering = ("-id",)
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
        return format_html('<pre class="rc-json">{}</pre>', json_html(step.model_input))

    @admin.display(description="model output")
    def model_output_pretty(self, step):
        return format_html('<pre class="rc-json">{}</pre>', json_html(step.model_output))


@admin.register(ToolInvocation)
class ToolInvocationAdmin(AuditAdmin):
    list_display = ("invocation_id", "tool_name", "run_link", "step_index", "status", "duration", "truncated",
                    "created_at")
    list_select_related = ("run", "step")
    list_filter = ("tool_name", "status", "truncated")
    search_fields = ("=invocation_id", "=run__run_id", "=session_id")
    search_help_text = "An invocation id, a run id or a session id (exact)."
    ordering = ("-id",)
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
        return format_html('<pre class="rc-json">{}</pre>', json_html(invocation.arguments))

    @admin.display(description="result")
    def result_pretty(self, invocation):
        return format_html('<pre class="rc-json">{}</pre>', json_html(invocation.result))

    @admin.display(description="retrieval details")
    def retrieval_details_pretty(self, invocation):
        return format_html('<pre class="rc-json">{}</pre>', json_html(invocation.retrieval_details))

    @admin.display(description="evidence refs")
    def evidence_refs_pretty(self, invocation):
        return format_html('<pre class="rc-json">{}</pre>', json_html(invocation.evidence_refs))


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
        from diagnosis.services.access import can_publish_cases

        if not can_publish_cases(request.user):
            return {}
        return super().get_actions(request)

    @admin.display(description="verified claims (with their excerpts)")
    def claims_pretty(self, case):
        return format_html('<pre class="rc-json">{}</pre>', json_html(case.claims))

    def _publish(self, request, queryset, publish: bool):
        from diagnosis.services.feedback import CasePublishRefused, case_publish

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
