"""The console's human side: the case library (publish, withdraw), run reviews as recorded and score configurations."""

from __future__ import annotations

from django.contrib import admin
from django.db.models.functions import Substr
from django.utils.html import format_html, format_html_join

from diagnosis.models import CaseLibraryEntry, RunReview, RunReviewEntry
from diagnosis.services.access import can_publish_cases
from diagnosis.services.feedback import CasePublishRefused, case_publish
from traces.admin_base import PREVIEW_CHARS, RUN_HEAVY_FIELDS, AuditAdmin, json_column, run_id_link, when
from traces.models import ScoreConfig


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

    claims_pretty = json_column("claims", "verified claims (with their excerpts)")

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
            *RUN_HEAVY_FIELDS,
        )
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("question", "answer", "root_cause_summary").annotate(
                question_head=Substr("question", 1, PREVIEW_CHARS + 1))
        return qs

    @admin.display(description="run")
    def run_link(self, case):
        return run_id_link(case.run_id, case.run.run_id)

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
            *RUN_HEAVY_FIELDS,
        )

    @admin.display(description="run")
    def run_link(self, review):
        return run_id_link(review.run_id, review.run.run_id, "review")

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
                (when(e.created_at), e.actor.get_username() if e.actor else "—", e.action, e.changes)
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
