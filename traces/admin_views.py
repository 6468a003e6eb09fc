"""The console's two run views: the run-detail page and the feedback form it posts to.

Feedback is the only write the console makes, and it goes through the same service and the same
permission rule as ``POST /api/feedback``.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from diagnosis.services.access import can_give_feedback
from diagnosis.services.feedback import COMMENT_MAX_CHARS, NotRateableUseful, RunNotFinished, run_feedback_give
from traces.run_detail import run_detail_build, run_detail_get

RUN_DETAIL_TEMPLATE = "traces/run_detail.html"


class FeedbackForm(forms.Form):
    feedback = forms.ChoiceField(
        choices=[(DiagnosisRun.Feedback.USEFUL, "Useful"), (DiagnosisRun.Feedback.NOT_USEFUL, "Not useful")],
        widget=forms.RadioSelect,
    )
    comment = forms.CharField(
        required=False, max_length=COMMENT_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What was right or wrong about this answer? (optional)"}),
    )


def _detail_url(model_admin, request, run: DiagnosisRun) -> str:
    url = reverse(f"admin:{run._meta.app_label}_{run._meta.model_name}_change", args=[run.pk])
    context = {"preserved_filters": model_admin.get_preserved_filters(request), "opts": run._meta}
    return add_preserved_filters(context, url)


def _load(model_admin, request, object_id):
    data = run_detail_get(pk=object_id)
    if data is None or not model_admin.has_view_permission(request, data.run):
        raise Http404(f"No diagnosis run {object_id!r}.")
    return data


def run_detail_view(model_admin, request, object_id, extra_context=None):
    """GET the run-detail page: summary, route, timeline, Gatekeeper audit, self-evaluation, feedback."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])  # the change form is gone: a run is never edited
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    data = _load(model_admin, request, object_id)
    run = data.run
    may_rate = can_give_feedback(request.user, run)
    initial = {"feedback": run.feedback, "comment": run.feedback_comment} if run.feedback else None
    opts = model_admin.model._meta
    preserved = {"preserved_filters": model_admin.get_preserved_filters(request), "opts": opts}
    context = {
        **model_admin.admin_site.each_context(request),
        "title": run.run_id,
        "subtitle": None,
        "opts": opts,
        "app_label": opts.app_label,
        "original": run,
        "detail": run_detail_build(data),
        "may_give_feedback": may_rate,
        "feedback_form": FeedbackForm(initial=initial) if may_rate else None,
        "feedback_url": add_preserved_filters(
            preserved, reverse("admin:diagnosis_diagnosisrun_feedback", args=[run.pk])),
        "changelist_url": add_preserved_filters(preserved, reverse("admin:diagnosis_diagnosisrun_changelist")),
        **(extra_context or {}),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, RUN_DETAIL_TEMPLATE, context)


def run_feedback_view(model_admin, request, object_id):
    """POST feedback on a run through `run_feedback_give`, then back to the run-detail page."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    run = _load(model_admin, request, object_id).run
    if not can_give_feedback(request.user, run):
        raise PermissionDenied("You may read this run but not rate it.")
    form = FeedbackForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
        messages.error(request, f"Feedback not saved ({problems}).")
    else:
        try:
            given = run_feedback_give(user=request.user, run=run, feedback=form.cleaned_data["feedback"],
                                      comment=form.cleaned_data["comment"])
        except (RunNotFinished, NotRateableUseful) as exc:
            messages.error(request, f"Feedback not saved: {exc}")
        else:
            label = given.run.get_feedback_display()
            model_admin.log_change(request, run, f"Feedback: {given.run.feedback}")
            case = (f" Its case is {given.case.get_status_display().lower()}; support staff publish candidates."
                    if given.case is not None else "")
            messages.success(request, f"Feedback saved: {label}.{case}")
    return HttpResponseRedirect(_detail_url(model_admin, request, run) + "#feedback")
