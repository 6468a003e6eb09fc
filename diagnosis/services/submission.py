"""Submitting a run (a chat question or an alert analysis): resolve or create the caller's session, create
the run PENDING and enqueue it after the commit. The same requestId twice in a session returns the same run.

A refused submission raises `RunRefused` with a code and a field; `diagnosis/api/errors.py` maps the code
to an HTTP status."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from diagnosis import tasks
from diagnosis.contracts import SESSION_ID_PATTERN
from diagnosis.ids import is_valid_session_id, new_session_id
from diagnosis.models import ChatSession, DiagnosisRun
from diagnosis.redaction import redact_text
from diagnosis.services.lifecycle import RunTransitionError, run_fail
from diagnosis.services.strategy import strategy_choose

logger = logging.getLogger(__name__)


class RunRefused(Exception):
    """A run the service will not create (bad input, too many in progress): a code and the field at fault."""

    def __init__(self, field: str, message: str, code: str = "invalid_input"):
        super().__init__(message)
        self.field, self.message, self.code = field, message, code


class BrokerUnavailable(Exception):
    """The task could not be enqueued: the run is recorded FAILED, never left PENDING."""

    code = "broker_unavailable"


class SessionNotFound(Exception):
    """The session exists but belongs to someone else: answered as 404, nothing is created."""


@dataclass(frozen=True)
class RunSubmission:
    run: DiagnosisRun
    created: bool


def _clean_question(question) -> str:
    if not isinstance(question, str) or not question.strip():
        raise RunRefused("question", "question must be a non-empty string")
    question = question.strip()
    if "\x00" in question:
        raise RunRefused("question", "question must not contain NUL characters")
    limit = settings.CHAT_MAX_QUESTION_CHARS
    if len(question) > limit:
        raise RunRefused("question", f"question is longer than {limit} characters")
    return question


def session_resolve(*, user, session_id: str | None) -> ChatSession:
    """The caller's session with this id, created if new; someone else's raises SessionNotFound."""
    if session_id is None:
        return ChatSession.objects.create(session_id=new_session_id(), owner=user)
    if not is_valid_session_id(session_id):
        raise RunRefused("sessionId", f"sessionId must match {SESSION_ID_PATTERN}")
    session = ChatSession.objects.filter(session_id=session_id).first()
    if session is None:
        try:
            with transaction.atomic():
                return ChatSession.objects.create(session_id=session_id, owner=user)
        except IntegrityError:
            session = ChatSession.objects.get(session_id=session_id)
    if session.owner_id != user.pk:
        raise SessionNotFound(session_id)
    return session


def run_submit(*, user, question, session_id: str | None = None, mode: str = "auto",
               request_id: str | None = None, flow: str = DiagnosisRun.Flow.CHAT) -> RunSubmission:
    """Create the run PENDING in the caller's session and enqueue `execute_run` once the transaction commits."""
    question = _clean_question(question)
    if request_id is not None and (not isinstance(request_id, str) or not is_valid_session_id(request_id)):
        raise RunRefused("requestId", f"requestId must match {SESSION_ID_PATTERN}")
    strategy = DiagnosisRun.Strategy.DIAGNOSIS if flow == DiagnosisRun.Flow.AI_OPS else strategy_choose(question=question, mode=mode)
    with transaction.atomic():
        run_active_limit_check(user=user)
        session = session_resolve(user=user, session_id=session_id)
        if request_id:
            existing = DiagnosisRun.objects.filter(session=session, request_id=request_id).first()
            if existing:
                return RunSubmission(existing, False)
        try:
            with transaction.atomic():
                run = DiagnosisRun.objects.create(
                    session=session, question=redact_text(question), strategy=strategy, agent_flow=flow,
                    request_id=request_id,
                )
        except IntegrityError:  # the same requestId raced in: return the run that won
            return RunSubmission(DiagnosisRun.objects.get(session=session, request_id=request_id), False)
        if not session.title:
            ChatSession.objects.filter(pk=session.pk).update(title=run.question[:200])
        # What DjangoTask.delay_on_commit does, plus: a broker that refuses the message fails the run.
        transaction.on_commit(partial(run_enqueue, run_id=run.run_id, task=tasks.execute_run))
    return RunSubmission(run, True)


def active_runs_q() -> Q:
    """Runs that count against CHAT_MAX_ACTIVE_RUNS: PENDING within the queue deadline and never re-queued,
    or RUNNING under a live lease. A lost, re-queued or lapsed run is the service's fault, not the caller's."""
    now = timezone.now()
    Status = DiagnosisRun.Status
    queued = Q(status=Status.PENDING, requeued_at__isnull=True,
               created_at__gte=now - timedelta(seconds=settings.RUN_QUEUE_DEADLINE_SECONDS))
    lease_cutoff = now - timedelta(seconds=settings.RUN_LEASE_SECONDS)
    live = Q(status=Status.RUNNING) & (Q(heartbeat_at__gte=lease_cutoff) | Q(heartbeat_at__isnull=True, created_at__gte=lease_cutoff))
    return queued | live


def run_active_limit_check(*, user, field: str = "question") -> None:
    """Refuse a new run when the caller already has CHAT_MAX_ACTIVE_RUNS in progress, whichever path starts
    it (chat, alert analysis, webhook, replay, regression). Call it inside the transaction that creates the
    run: it holds the caller's user row, so parallel requests cannot all pass."""
    limit = settings.CHAT_MAX_ACTIVE_RUNS
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))
    active = DiagnosisRun.objects.filter(active_runs_q(), session__owner=user).count()
    if active >= limit:
        raise RunRefused(field, f"{active} runs are still in progress; at most {limit} may run at once. "
                             "Retry when one has finished.", code="too_many_active_runs")


def run_enqueue(*, run_id: str, task) -> None:
    try:
        task.delay(run_id, queued_at=time.time())  # the task's retries stop at the queue deadline from here
    except Exception as exc:  # kombu OperationalError, redis ConnectionError, ...
        logger.error("could not enqueue run %s: %s", run_id, exc)
        try:
            run_fail(run_id=run_id, error_code=BrokerUnavailable.code, error_message=f"the task queue is unavailable: {exc}"[:500])
        except RunTransitionError:
            pass
        raise BrokerUnavailable(str(exc)) from exc
