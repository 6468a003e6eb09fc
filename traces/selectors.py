"""Reads of the audit trail for the trace and run-list APIs, scoped to what the caller may see.

Every selector costs a fixed number of queries whatever the size of the run (SPEC §7, §9).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import F, QuerySet

from diagnosis.models import AgentStep, ChatSession, DiagnosisRun, ToolInvocation
from diagnosis.selectors import visible_runs, visible_sessions

# What a run list shows; the JSON columns (self_evaluation, orchestration_trace) stay in the database.
RUN_LIST_FIELDS = (
    "id", "run_id", "session", "agent_flow", "strategy", "status", "question", "answer", "degraded",
    "effective_verdict", "feedback", "feedback_at", "error_code", "duration_ms", "step_count", "tool_count",
    "prompt_tokens", "completion_tokens", "model_name", "created_at", "started_at", "finished_at",
)


@dataclass(frozen=True)
class RunTrace:
    run: DiagnosisRun  # with .session loaded
    steps: list[AgentStep]
    tool_invocations: list[ToolInvocation]  # each annotated with .step_index (None when unlinked)


def session_get(*, user, session_id: str) -> ChatSession | None:
    """The session when `user` may see it, else None (missing and hidden look the same)."""
    return visible_sessions(user).filter(session_id=session_id).defer("summary", "metadata").first()


def run_get(*, user, session_id: str, run_id: str) -> DiagnosisRun | None:
    """The run `run_id` of session `session_id`, with its session, when `user` may see it."""
    return (
        visible_runs(user)
        .filter(run_id=run_id, session__session_id=session_id)
        .select_related("session")
        .defer("session__summary", "session__metadata")
        .first()
    )


def run_trace_get(*, user, session_id: str, run_id: str) -> RunTrace | None:
    """The run, its steps by step_index and its tool invocations by id: three queries in all."""
    run = run_get(user=user, session_id=session_id, run_id=run_id)
    if run is None:
        return None
    steps = list(AgentStep.objects.filter(run_id=run.pk).order_by("step_index"))
    invocations = list(
        ToolInvocation.objects.filter(run_id=run.pk).annotate(
            step_index=F("step__step_index"), source_invocation_ref=F("source_invocation__invocation_id"),
            source_run_ref=F("source_invocation__run__run_id")).order_by("id")
    )
    return RunTrace(run=run, steps=steps, tool_invocations=invocations)


def run_list(*, session: ChatSession) -> QuerySet[DiagnosisRun]:
    """The session's runs, newest first, without the heavy JSON columns (lazy; paginate it)."""
    return DiagnosisRun.objects.filter(session_id=session.pk).only(*RUN_LIST_FIELDS).order_by("-created_at", "-id")


def usage_rows(*, start, end) -> list[tuple]:
    """Runs created from day `start` to day `end` (inclusive, UTC), grouped by day, model, flow and strategy:
    (day, model, flow, strategy, runs, prompt tokens, completion tokens). One query; the
    ``created_at`` index bounds the rows read."""
    from datetime import datetime, time, timedelta, timezone as dt_timezone

    from django.db.models import Count, Sum
    from django.db.models.functions import TruncDate

    begin = datetime.combine(start, time.min, tzinfo=dt_timezone.utc)
    stop = datetime.combine(end + timedelta(days=1), time.min, tzinfo=dt_timezone.utc)
    rows = (DiagnosisRun.objects.filter(created_at__gte=begin, created_at__lt=stop)
            .annotate(day=TruncDate("created_at", tzinfo=dt_timezone.utc))
            .values_list("day", "model_name", "agent_flow", "strategy")
            .annotate(runs=Count("id"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
            .order_by())
    return [(day, model, flow, strategy, runs, prompt or 0, completion or 0)
            for day, model, flow, strategy, runs, prompt, completion in rows]
