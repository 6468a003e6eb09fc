"""The audit tables under a run: its session (with the runs in order), its steps and its tool invocations."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Prefetch
from django.db.models.functions import Substr
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from diagnosis.models import AgentStep, ChatSession, DiagnosisRun, ToolInvocation
from traces.admin_base import (
    PREVIEW_CHARS, RUN_HEAVY_FIELDS, AuditAdmin, badge, duration_text, json_column, run_id_link,
)

SESSION_RUNS_SHOWN = 100


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

    metadata_pretty = json_column("metadata", "metadata")

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
                    run_id_link(run.pk, run.run_id),
                    run.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                    (run.question_head or "")[:PREVIEW_CHARS],
                    badge(run.status),
                    badge(run.effective_verdict),
                    duration_text(run.duration_ms),
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
            *RUN_HEAVY_FIELDS,
        )
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("model_input", "model_output", "error")
        return qs

    @admin.display(description="run")
    def run_link(self, step):
        return run_id_link(step.run_id, step.run.run_id, f"step-{step.step_index}")

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, step):
        return duration_text(step.duration_ms)

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

    model_input_pretty = json_column("model_input", "model input")
    model_output_pretty = json_column("model_output", "model output")


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
            *RUN_HEAVY_FIELDS, "step__model_input", "step__model_output", "step__error",
        )
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("arguments", "result", "retrieval_details", "evidence_refs", "error_message")
        return qs

    @admin.display(description="run")
    def run_link(self, invocation):
        return run_id_link(invocation.run_id, invocation.run.run_id, invocation.invocation_id)

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
        return duration_text(invocation.duration_ms)

    arguments_pretty = json_column("arguments", "arguments")
    result_pretty = json_column("result", "result")
    retrieval_details_pretty = json_column("retrieval_details", "retrieval details")
    evidence_refs_pretty = json_column("evidence_refs", "evidence refs")
