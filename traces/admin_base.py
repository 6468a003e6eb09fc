"""What every audit-console admin shares: the capped paginator, the read-only base and the cell helpers."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.paginator import Paginator
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from traces.rendering import json_html

PREVIEW_CHARS = 90
# A row that joins its run leaves these run columns in the database.
RUN_HEAVY_FIELDS = ("run__question", "run__answer", "run__self_evaluation", "run__orchestration_trace",
                    "run__error_message", "run__feedback_comment")


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


def badge(value: str, css: str | None = None):
    if not value:
        return mark_safe('<span class="rc-muted">—</span>')
    return format_html('<span class="rc-badge rc-{}">{}</span>', css or value.lower(), value)


def when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def short_run_link(run_pk, run_id: str):
    """The run id cut to its first 8 hex digits (the full id in the tooltip; that prefix finds the run)."""
    url = reverse("admin:diagnosis_diagnosisrun_change", args=[run_pk])
    return format_html('<a class="rc-mono" href="{}" title="{}">{}…</a>', url, run_id, run_id[:12])


def run_id_link(run_pk, run_id: str, anchor: str = ""):
    """The whole run id, linked to the run's page (at `anchor`, a step, an invocation or the review)."""
    url = reverse("admin:diagnosis_diagnosisrun_change", args=[run_pk])
    return format_html('<a class="rc-mono" href="{}{}">{}</a>', url, f"#{anchor}" if anchor else "", run_id)


def duration_text(ms) -> str:
    if ms is None:
        return "—"
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def json_block(value):
    """A stored JSON column, pretty-printed in a focusable block (it scrolls)."""
    return format_html('<pre class="rc-json" tabindex="0">{}</pre>', json_html(value))


def json_column(field: str, description: str):
    """An admin display method showing the row's JSON column `field` as a `json_block`."""

    @admin.display(description=description)
    def show(model_admin, row):
        return json_block(getattr(row, field))

    return show
