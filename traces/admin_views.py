"""The console's two run views: the run-detail page and the feedback form it posts to.

Feedback is the only write the console makes, and it goes through the same service and the same
permission rule as ``POST /api/feedback``.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from django.contrib.auth import get_user_model
from django.db.models.functions import Substr

from diagnosis.models import DiagnosisRun, RunReview, RunReviewEntry, ToolInvocation
from diagnosis.services import reviews
from diagnosis.services.access import can_give_feedback
from diagnosis.services.feedback import COMMENT_MAX_CHARS, NotRateableUseful, RunNotFinished, run_feedback_give
from traces.diff import run_facts, runs_diff
from traces.rendering import json_html
from traces.search import id_kind, runs_lookup
from traces.run_detail import (
    answer_verified, invocation_part, part_base, run_detail_build, run_detail_get, step_part,
)

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

    def __init__(self, *args, allow_useful: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        if not allow_useful:  # no verified answer: nothing to put in the case library
            self.fields["feedback"].choices = [(DiagnosisRun.Feedback.NOT_USEFUL, "Not useful")]


class ReviewForm(forms.Form):
    assignee = forms.ModelChoiceField(queryset=None, required=False, empty_label="nobody")
    reasons = forms.MultipleChoiceField(choices=RunReview.Reason.choices, required=False,
                                        widget=forms.CheckboxSelectMultiple)
    resolution = forms.ChoiceField(choices=[("", "open (not resolved)"), *RunReview.Resolution.choices], required=False)
    note = forms.CharField(required=False, max_length=reviews.NOTE_MAX_CHARS,
                           widget=forms.Textarea(attrs={"rows": 2, "placeholder": "What is wrong, what was done (optional)"}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["assignee"].queryset = reviewers()
        self.fields["assignee"].label_from_instance = lambda user: user.get_username()


def reviewers():
    """Who a review can be assigned to: active support staff (and superusers)."""
    from django.db.models import Q

    return get_user_model().objects.filter(
        Q(is_superuser=True) | Q(groups__name=reviews.SUPPORT_STAFF), is_active=True, is_staff=True,
    ).distinct().order_by("username")


def _review_initial(review: RunReview | None) -> dict | None:
    if review is None:
        return None
    return {"assignee": review.assignee_id, "reasons": review.reasons, "resolution": review.resolution,
            "note": review.note}


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
    review = getattr(run, "review", None)
    may_review = reviews.can_review(request.user)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": run.run_id,
        "review": review,
        "review_entries": list(RunReviewEntry.objects.filter(review=review).select_related("actor"))
        if review is not None else [],
        "review_trigger": reviews.review_trigger(run),
        "review_form": ReviewForm(initial=_review_initial(review)) if may_review else None,
        "review_url": reverse("admin:diagnosis_diagnosisrun_review", args=[run.pk]),
        "subtitle": None,
        "opts": opts,
        "app_label": opts.app_label,
        "original": run,
        "detail": run_detail_build(data),
        "may_give_feedback": may_rate,
        "feedback_form": FeedbackForm(initial=initial, allow_useful=answer_verified(run)) if may_rate else None,
        "feedback_url": add_preserved_filters(
            preserved, reverse("admin:diagnosis_diagnosisrun_feedback", args=[run.pk])),
        "changelist_url": add_preserved_filters(preserved, reverse("admin:diagnosis_diagnosisrun_changelist")),
        **_scores_context(request, run, may_rate),
        **(extra_context or {}),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, RUN_DETAIL_TEMPLATE, context)


def _scores_context(request, run, may_rate: bool) -> dict:
    """The run's scores (every reviewer's) and, for those who may rate, the score configurations to give."""
    from traces.models import RunScore, ScoreConfig

    configs = list(ScoreConfig.objects.filter(active=True))
    given = list(RunScore.objects.filter(run=run).select_related("config", "user").order_by("config__name", "user_id"))
    mine = {score.config_id: score.value for score in given if score.user_id == request.user.pk}
    return {
        "score_configs": [(config, mine.get(config.pk, "")) for config in configs] if may_rate else [],
        "scores_given": given,
        "score_url": reverse("admin:diagnosis_diagnosisrun_score", args=[run.pk]),
    }


def _run_to_review(model_admin, request, object_id, *, verb: str):
    """The run a review POST acts on; PermissionDenied unless the user may read it and `verb` it."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    run = _load(model_admin, request, object_id).run
    if not can_give_feedback(request.user, run):
        raise PermissionDenied(f"You may read this run but not {verb} it.")
    return run


def run_score_view(model_admin, request, object_id):
    """POST one score (a configuration and its value) on a run, then back to the run page."""
    from traces.models import ScoreConfig
    from traces.reviewer_tools import ReviewerToolError, run_score_give

    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    run = _run_to_review(model_admin, request, object_id, verb="score")
    config = ScoreConfig.objects.filter(pk=request.POST.get("config", "")).first() if str(
        request.POST.get("config", "")).isdigit() else None
    if config is None:
        messages.error(request, "Score not saved: config: no such score.")
    else:
        try:
            run_score_give(user=request.user, run=run, config=config, value=request.POST.get("value", ""))
        except ReviewerToolError as exc:
            messages.error(request, f"Score not saved: {exc.field}: {exc}")
        else:
            messages.success(request, f"Score saved: {config.name}.")
    return HttpResponseRedirect(_detail_url(model_admin, request, run) + "#scores")


def run_feedback_view(model_admin, request, object_id):
    """POST feedback on a run through `run_feedback_give`, then back to the run-detail page."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    run = _run_to_review(model_admin, request, object_id, verb="rate")
    form = FeedbackForm(request.POST, allow_useful=answer_verified(run))
    if not run.is_terminal:
        messages.error(request, f"Feedback not saved: {RunNotFinished(run.run_id, run.status)}.")
    elif not form.is_valid():
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


def run_part_view(model_admin, request, object_id, kind, key):
    """GET one heavy part of the run page as an HTML fragment: a step's model input and output
    (``step/<index>``), a tool call's arguments and result (``tool/<invocation id>``) or a whole
    large result (``result/<invocation id>``). Staff with view permission only, like the page."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    data = _load(model_admin, request, object_id)
    context = {"detail": {"part_base": part_base(data.run)}}
    if kind == "self-evaluation" and key == "json":
        return HttpResponse(json_html(data.run.self_evaluation), content_type="text/html; charset=utf-8")
    if kind == "step" and key.isdigit():
        view = step_part(data, int(key))
        template, context["s"] = "traces/_step_body.html", view
    elif kind in ("tool", "result"):
        view = invocation_part(data, key, full=kind == "result")
        template, context["inv"] = "traces/_tool_invocation_body.html", view
        if kind == "result" and view is not None:
            return TemplateResponse(request, "traces/_result_full.html", context)
    else:
        view = None
    if view is None:
        raise Http404(f"No part {kind}/{key} in this run.")
    return TemplateResponse(request, template, context)


def run_review_view(model_admin, request, object_id):
    """POST a review of a run (assignee, reason labels, resolution, note) through the reviews service."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    run = _load(model_admin, request, object_id).run
    if not reviews.can_review(request.user):
        raise PermissionDenied("You may read reviews but not write them.")
    form = ReviewForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
        messages.error(request, f"Review not saved ({problems}).")
    else:
        data = form.cleaned_data
        try:
            change = reviews.review_update(
                run=run, user=request.user, assignee=data["assignee"], unassign=data["assignee"] is None,
                reasons=data["reasons"], resolution=data["resolution"], note=data["note"],
            )
        except reviews.ReviewError as exc:
            messages.error(request, f"Review not saved ({exc.field}: {exc}).")
        else:
            if change.entry is None:
                messages.info(request, "Review unchanged.")
            else:
                messages.success(request, f"Review {change.entry.action}: {change.review.get_status_display()}.")
    return HttpResponseRedirect(_detail_url(model_admin, request, run) + "#review")


QUEUE_PER_PAGE = 50
QUEUE_STATES = {"open": "needs review (open or not started)", "unassigned": "nobody assigned", "mine": "assigned to me",
                "resolved": "resolved", "all": "all"}


def review_queue_view(model_admin, request):
    """The review queue: finished runs that need a person's look, newest first, with their review."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    state = request.GET.get("state", "open")
    state = state if state in QUEUE_STATES else "open"
    runs = reviews.review_candidates(
        # LEFT JOINs only (the review and its assignee): an inner join on the session would let SQLite
        # drive the query from chat_session and sort the whole table.
        DiagnosisRun.objects.select_related("review", "review__assignee").only(
            "id", "run_id", "status", "degraded", "effective_verdict", "feedback", "agent_flow", "strategy",
            "created_at", "duration_ms", "review__status", "review__trigger",
            "review__assignee__username", "review__reasons", "review__resolution", "review__updated_at",
        ).annotate(question_head=Substr("question", 1, 91))
    )
    resolved = RunReview.objects.filter(status=RunReview.Status.RESOLVED).values("run_id")
    if state == "open":
        runs = runs.exclude(pk__in=resolved)
    elif state == "unassigned":
        runs = runs.exclude(pk__in=resolved).exclude(
            pk__in=RunReview.objects.filter(assignee__isnull=False).values("run_id"))
    elif state == "mine":
        runs = runs.filter(pk__in=RunReview.objects.filter(assignee=request.user).values("run_id")).exclude(
            pk__in=resolved)
    elif state == "resolved":
        runs = runs.filter(review__status=RunReview.Status.RESOLVED)
    # Never counted (the candidates of a big table): pages go forward and back only.
    number = int(request.GET.get("p", "1")) if request.GET.get("p", "1").isdigit() else 1
    rows = list(runs.order_by("-created_at", "-id")[(number - 1) * QUEUE_PER_PAGE: number * QUEUE_PER_PAGE + 1])
    has_next = len(rows) > QUEUE_PER_PAGE
    rows = rows[:QUEUE_PER_PAGE]
    for run in rows:
        run.queue_trigger = reviews.review_trigger(run)
    opts = model_admin.model._meta
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Review queue", "subtitle": None, "opts": opts, "app_label": opts.app_label,
        "rows": rows, "state": state, "states": QUEUE_STATES, "page_number": number, "has_next": has_next,
        "reason_labels": dict(RunReview.Reason.choices), "resolution_labels": dict(RunReview.Resolution.choices),
        "sample_every": reviews.sample_every(),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "traces/review_queue.html", context)


def _pick_run(term: str) -> tuple[DiagnosisRun | None, str]:
    """The one run a pasted id (or id prefix) names, or an explanation."""
    term = (term or "").strip()
    if not term:
        return None, ""
    if not id_kind(term):
        return None, f"{term!r} is not a run, session or invocation id (or a prefix of at least 8 characters)."
    lookup = runs_lookup(DiagnosisRun.objects.all(), term)
    found = list(lookup.queryset.order_by("-created_at", "-id")[:2]) if lookup.by_id else []
    if not found:
        return None, f"No run found for {term!r}."
    if len(found) > 1:
        return None, f"{term!r} names more than one run: paste a longer prefix or the run id."
    return found[0], ""


def run_diff_view(model_admin, request):
    """Two runs side by side (?a=<id>&b=<id>), differences highlighted."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    left, left_error = _pick_run(request.GET.get("a", ""))
    right, right_error = _pick_run(request.GET.get("b", ""))
    diff = None
    if left is not None and right is not None:
        facts = []
        for run in (left, right):
            invocations = list(ToolInvocation.objects.filter(run_id=run.pk).only("id", "tool_name", "retrieval_details").order_by("id"))
            facts.append(run_facts(run, invocations))
        diff = runs_diff(*facts)
    opts = model_admin.model._meta
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Compare two runs", "subtitle": None, "opts": opts, "app_label": opts.app_label,
        "a": request.GET.get("a", ""), "b": request.GET.get("b", ""), "errors": [e for e in (left_error, right_error) if e],
        "left": left, "right": right, "diff": diff,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "traces/run_diff.html", context)


USAGE_DAYS = (7, 30, 90)


def usage_view(model_admin, request):
    """Tokens and cost per day, per model and per route, drawn on the server (SVG), prices from settings."""
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone
    from django.utils.safestring import mark_safe

    from traces.selectors import usage_rows
    from traces.usage import usage_build, usage_svg

    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    raw = request.GET.get("days", "30")
    error = "" if raw.isdigit() and 1 <= int(raw) <= 366 else f"“{raw}” is not a number of days from 1 to 366."
    days = int(raw) if not error else 30
    end = timezone.now().astimezone(timezone.get_fixed_timezone(0)).date()
    start = end - timedelta(days=days - 1)
    usage = usage_build(usage_rows(start=start, end=end), start=start, end=end, prices=settings.MODEL_PRICES)
    context = {
        **model_admin.admin_site.each_context(request), "title": "Tokens and cost", "usage": usage,
        "days": days, "day_choices": USAGE_DAYS, "days_error": error, "prices": settings.MODEL_PRICES,
        "tokens_svg": mark_safe(usage_svg(usage, measure="tokens")),  # built from escaped parts (traces.usage)
        "cost_svg": mark_safe(usage_svg(usage, measure="cost")),
        "opts": model_admin.opts,
    }
    return TemplateResponse(request, "traces/usage.html", context)


def saved_views_context(model_admin, request) -> dict:
    """The run list's saved views of this user and the form to save the current one."""
    from traces.models import SavedView

    if not request.user.is_authenticated:
        return {}
    shown = getattr(request, "rc_columns", None) or [name for name, _ in model_admin.column_choices()]
    query = request.GET.urlencode()
    return {
        "saved_views": list(SavedView.objects.filter(user=request.user)),
        "view_columns": [(name, label, name in shown) for name, label in model_admin.column_choices()],
        "view_query": query,
        "saved_views_url": reverse("admin:diagnosis_diagnosisrun_saved_views"),
        # hidden, not left out: the list's sort parameter counts columns, so they all stay in place
        "hidden_columns": [name for name, _ in model_admin.column_choices() if name not in shown],
    }


def saved_views_view(model_admin, request, view_id=None, action=""):
    """POST saves the current run list as a named view; GET <id> opens one; POST <id>/delete removes it.
    A user sees and changes only their own views."""
    from urllib.parse import urlencode

    from traces.models import SavedView
    from traces.reviewer_tools import ReviewerToolError, saved_view_save

    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    changelist = reverse("admin:diagnosis_diagnosisrun_changelist")
    if view_id is None:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        query = request.POST.get("query", "")
        try:
            view = saved_view_save(user=request.user, name=request.POST.get("name", ""), query=query,
                                   columns=request.POST.getlist("columns"),
                                   allowed_columns=tuple(name for name, _ in model_admin.column_choices()))
        except ReviewerToolError as exc:
            messages.error(request, f"View not saved: {exc.field}: {exc}")
            return HttpResponseRedirect(f"{changelist}?{query}")
        messages.success(request, f"View saved: {view.name}.")
        return HttpResponseRedirect(reverse("admin:diagnosis_diagnosisrun_saved_view", args=[view.pk]))
    view = SavedView.objects.filter(pk=view_id, user=request.user).first()
    if view is None:
        raise Http404("No such saved view of yours.")
    if action == "delete":
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        view.delete()
        messages.success(request, f"View deleted: {view.name}.")
        return HttpResponseRedirect(changelist)
    if action:
        raise Http404("No such action.")
    columns = urlencode({"cols": ",".join(view.columns)})
    return HttpResponseRedirect(f"{changelist}?{view.query}{'&' if view.query else ''}{columns}")
