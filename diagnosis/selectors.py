"""Read-side queries of the write app: what a caller may see (sessions and runs), and a run's progress log.

Visibility is a lazily filtered queryset, so scoping a lookup costs no extra query and a row the
caller may not see is indistinguishable from a missing one (the API answers 404 for both).
"""

from __future__ import annotations

from typing import NamedTuple

from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import BigIntegerField, Exists, Q, QuerySet
from django.db.models.functions import Coalesce

from diagnosis.contracts import SelfEvaluation, step_finished_event, step_started_event, tool_event
from diagnosis.progress_names import checked_event
from diagnosis.models import AgentStep, ChatSession, DiagnosisRun, RunEvent, ToolInvocation
from diagnosis.roles import READ_ALL_GROUPS


def _in_groups(user, names) -> Exists:
    return Exists(Group.objects.filter(user=user.pk, name__in=names).values("pk"))


def _owned_or_read_all(user, manager, owner: str) -> QuerySet:
    """Rows of `manager` whose `owner` lookup is `user`, or all of them for the read-all roles."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return manager.none()
    if user.is_superuser:
        return manager.all()
    # An uncorrelated EXISTS keeps the staff check inside the lookup query itself.
    return manager.filter(Q(**{owner: user.pk}) | Q(_in_groups(user, READ_ALL_GROUPS)))


def visible_sessions(user) -> QuerySet[ChatSession]:
    """The sessions `user` may read: its own, or all of them for staff (no query until evaluated)."""
    return _owned_or_read_all(user, ChatSession.objects, "owner")


def visible_runs(user) -> QuerySet[DiagnosisRun]:
    """The runs of the sessions `user` may read."""
    return _owned_or_read_all(user, DiagnosisRun.objects, "session__owner")


def run_get_for_user(*, user, run_id: str) -> DiagnosisRun | None:
    """The run if the caller may see it (its owner, or support staff), else None."""
    return visible_runs(user).select_related("session").filter(run_id=run_id).first()


class LoggedEvent(NamedTuple):
    """One event of a run's progress log: its place (the SSE id), kind and payload."""

    id: int
    kind: str
    data: dict


class RunPlaces(NamedTuple):
    """Where a run's audit trail stands: its last step index (None before the first), the place of its
    last progress event (0 before the first) and how many tool invocations it has."""

    last_index: int | None
    place: int
    call_count: int


def run_places(run_pk: int) -> RunPlaces:
    """Where the run's trail stands, in one statement, so one snapshot: an event from before the shared
    numbering counts by its primary key, so later events follow it."""
    q = connection.ops.quote_name
    steps, calls, events = (q(model._meta.db_table) for model in (AgentStep, ToolInvocation, RunEvent))
    where = f"WHERE {q('run_id')} = %s"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT MAX({q('step_index')}) FROM {steps} {where}), (SELECT MAX({q('seq')}) FROM {steps} {where}),"
            f" (SELECT MAX({q('end_seq')}) FROM {steps} {where}), (SELECT MAX({q('seq')}) FROM {calls} {where}),"
            f" (SELECT COUNT(*) FROM {calls} {where}),"
            f" (SELECT MAX(COALESCE({q('seq')}, {q('id')})) FROM {events} {where})", [run_pk] * 6)
        last_index, step_seq, end_seq, call_seq, call_count, event_place = cursor.fetchone()
    place = max((int(p) for p in (step_seq, end_seq, call_seq, event_place) if p is not None), default=0)
    return RunPlaces(last_index, place, int(call_count))


def run_events_after(*, run_pk: int, after: int, limit: int = 200) -> list[LoggedEvent]:
    """The run's progress log after place `after`, in order, at most `limit` events: its `run_event`
    rows merged with the events its steps (start, end) and tool invocations tell (see RunEvent).

    The three tables are read by three statements, each its own snapshot, while the run's writer may
    commit a group touching all three between them: read alone, a reader could see a group's step but
    not the node event before it, and a live stream would then pass that event by for good. So the
    log is read up to the place it stood at first (`run_places`, one snapshot): the run's one writer
    commits its groups in the order of their places, so every event up to that place is committed,
    and later ones wait for the next read."""
    upto = run_places(run_pk).place
    if upto <= after:
        return []
    merged: list[LoggedEvent] = [
        LoggedEvent(place, kind, checked_event(kind, data if isinstance(data, dict) else {})[0]) for place, kind, data in
        RunEvent.objects.filter(run_id=run_pk).annotate(place=Coalesce("seq", "id", output_field=BigIntegerField())).filter(place__gt=after, place__lte=upto)
        .order_by("place").values_list("place", "kind", "data")[:limit]
    ]
    steps = AgentStep.objects.filter(Q(seq__gt=after, seq__lte=upto) | Q(end_seq__gt=after, end_seq__lte=upto),
                                     run_id=run_pk).values_list(
        "pk", "seq", "end_seq", "step_index", "node", "attempt", "status", "duration_ms", "has_tool_call")
    for pk, seq, end_seq, index, node, attempt, status, duration_ms, has_tool_call in steps:
        if seq is not None and after < seq <= upto:
            merged.append(LoggedEvent(seq, "step", checked_event(
                "step", step_started_event(step_index=index, node=node, attempt=attempt))[0]))
        if end_seq is not None and after < end_seq <= upto:
            merged.append(LoggedEvent(end_seq, "step", step_finished_event(
                step_id=pk, status=status, duration_ms=duration_ms, has_tool_call=has_tool_call)))
    calls = list(ToolInvocation.objects.filter(run_id=run_pk, seq__gt=after, seq__lte=upto).values_list(
        "seq", "invocation_id", "tool_name", "status", "duration_ms", "replay_mode"))
    if calls:
        replay = DiagnosisRun.objects.filter(pk=run_pk, replay_options__isnull=False).exists()
        merged += [LoggedEvent(seq, "tool", checked_event("tool", tool_event(
                       invocation_id=invocation_id, tool_name=tool_name, status=status, duration_ms=duration_ms,
                       replay=replay, replay_mode=mode))[0])
                   for seq, invocation_id, tool_name, status, duration_ms, mode in calls]
    merged.sort(key=lambda event: event.id)
    return merged[:limit]


def run_status(*, run_pk: int) -> str | None:
    return DiagnosisRun.objects.filter(pk=run_pk).values_list("status", flat=True).first()


def run_suggestions(*, run: DiagnosisRun) -> list[str]:
    """The served answer's (or alert report's) advice that was not checked against evidence (its labelled section)."""
    return list(SelfEvaluation.read(run.self_evaluation).served_suggestions)


def run_advice(*, run: DiagnosisRun) -> list[dict]:
    """Every next step served, with its flags: verified (quoted from a verified runbook or case) and destructive."""
    return [dict(a) for a in SelfEvaluation.read(run.self_evaluation).served_advice]


def run_evidence_checked(*, run: DiagnosisRun) -> bool:
    """False for SIMPLE answers: no Gatekeeper ran on them."""
    return run.strategy != DiagnosisRun.Strategy.SIMPLE
