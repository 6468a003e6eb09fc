"""Replay: run a recorded diagnosis again on the evidence it saw, with the same or another model
and prompt catalog.

`replay_submit` creates the new run (linked by `replay_of`, in a session of the caller's) and
enqueues it on the normal task path; `replay_context` and `replay_execute` are the replay flow of
`services/execution.py`:
the same diagnosis graph, with a recorded tool backend that answers every tool call from the
original run's invocations (`diagnosis.tools.recorded`), and a recorder that copies each served
invocation with a pointer to its source.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Iterable

from django.conf import settings
from django.db import transaction

from diagnosis import tasks
from diagnosis.agents.catalog import PromptError, resolve_catalog, use_catalog
from diagnosis.ids import new_session_id
from diagnosis.llm.openai_model import build_chat_model
from diagnosis.models import ChatSession, DiagnosisRun, ToolInvocation
from diagnosis.services import memory, wiring
from diagnosis.roles import SUPPORT_STAFF
from diagnosis.selectors import visible_runs
from diagnosis.services.run_context import RunCannotStart, RunContext
from diagnosis.services.runs import diagnosis_execute
from diagnosis.services.submission import RunRefused, run_active_limit_check, run_enqueue
from diagnosis.tools.recorded import RecordedBackend, RecordedCall

logger = logging.getLogger(__name__)
ROLES = ("planner", "executor", "verifier", "composer", "simple", "aiops")
OFFLINE = "offline"


class ReplayNotFound(Exception):
    """No such run, or the caller may not replay it: answered as 404, like any cross-user read."""


class ReplayForbidden(Exception):
    """The caller may read the run (an auditor) but not replay it: answered as 403."""


class ReplayInputError(RunRefused):
    """A replay the service will not create: a code (invalid_input, not_replayable, run_not_finished) and a field."""


@dataclass(frozen=True)
class ReplayOptions:
    model: str | None = None  # one model for every role; "offline" is the built-in analyser
    models: dict | None = None  # per-role model names, over `model`
    prompt_version: str | None = None  # a catalog name or catalog-<hash>; default: the current one
    live_fallback: bool = False  # serve calls missing from the recording live (marked in the trace)

    def to_dict(self) -> dict:
        return {"model": self.model, "models": dict(self.models or {}), "prompt_version": self.prompt_version,
                "live_fallback": self.live_fallback}

    @classmethod
    def from_dict(cls, data: dict | None) -> ReplayOptions:
        data = data or {}
        return cls(model=data.get("model"), models=data.get("models") or None,
                   prompt_version=data.get("prompt_version"), live_fallback=bool(data.get("live_fallback")))


def may_replay(user, run: DiagnosisRun) -> bool:
    """The run's owner, superusers and support staff (auditors read but do not replay)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return run.session.owner_id == user.pk or user.is_superuser or user.groups.filter(name=SUPPORT_STAFF).exists()


def replay_options_clean(*, model=None, models=None, prompt_version=None, live_fallback=False) -> ReplayOptions:
    def name(value, field):
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip() or len(value) > 128:
            raise ReplayInputError(field, f"{field} must be a model name of 1 to 128 characters")
        return value.strip()

    model = name(model, "model")
    if models is not None:
        if not isinstance(models, dict) or any(role not in ROLES for role in models):
            raise ReplayInputError("models", f"models must map roles ({', '.join(ROLES)}) to model names")
        models = {role: name(value, f"models.{role}") for role, value in models.items() if value is not None}
    if prompt_version is not None:
        if not isinstance(prompt_version, str):
            raise ReplayInputError("promptVersion", "promptVersion must be a string")
        try:
            resolve_catalog(prompt_version)
        except PromptError as exc:
            raise ReplayInputError("promptVersion", str(exc)) from exc
    if not isinstance(live_fallback, bool):
        raise ReplayInputError("liveFallback", "liveFallback must be true or false")
    return ReplayOptions(model=model, models=models or None, prompt_version=prompt_version, live_fallback=live_fallback)


def replay_submit(*, user, run_id: str, options: ReplayOptions | None = None) -> DiagnosisRun:
    """Create the replay of `run_id` PENDING and enqueue it after the commit."""
    options = options or ReplayOptions()
    source = visible_runs(user).select_related("session").filter(run_id=run_id).first()
    if source is None:
        raise ReplayNotFound(run_id)
    if not may_replay(user, source):
        raise ReplayForbidden(run_id)
    if source.agent_flow != DiagnosisRun.Flow.CHAT or source.strategy != DiagnosisRun.Strategy.DIAGNOSIS:
        raise ReplayInputError("runId", "only chat diagnosis runs can be replayed (not simple answers or alert analyses)",
                               code="not_replayable")
    if not source.is_terminal:
        raise ReplayInputError("runId", "the run is still in progress; replay it once it has finished",
                               code="run_not_finished")
    with transaction.atomic():
        run_active_limit_check(user=user, field="runId")  # a replay is a run like any other: the same cap
        session = ChatSession.objects.create(session_id=new_session_id(), owner=user,
                                             title=f"Replay of {source.run_id}: {source.question}"[:200])
        run = DiagnosisRun.objects.create(
            session=session, question=source.question, strategy=source.strategy, agent_flow=source.agent_flow,
            replay_of=source, replay_options=options.to_dict(),
        )
        transaction.on_commit(partial(run_enqueue, run_id=run.run_id, task=tasks.execute_run))
    return run


# -- execution ------------------------------------------------------------------------------------


class InvocationsRecording:
    """`RecordingLookup` over the audit table: the source run's invocations in call order."""

    def __init__(self, source: DiagnosisRun):
        self.source = source

    def recorded_calls(self) -> Iterable[RecordedCall]:
        rows = ToolInvocation.objects.filter(run_id=self.source.pk).order_by("id").values_list(
            "pk", "invocation_id", "tool_name", "arguments", "status", "result", "error_message")
        return [RecordedCall(pk, inv, tool, args or {}, status, result, err or "")
                for pk, inv, tool, args, status, result, err in rows]


def replay_chat_model(options: ReplayOptions):
    """The model the replay asked for; the configured one when it named none."""
    if not options.model and not options.models:
        return wiring.chat_model(), wiring.model_names()
    if options.model == OFFLINE and not options.models:
        return build_chat_model({"LLM_PROVIDER": "offline"}), {}
    default = options.model or settings.OPENAI_MODEL
    models = {role: default for role in ROLES} if options.model else dict(settings.OPENAI_MODELS)
    models.update(options.models or {})
    model = build_chat_model({
        "LLM_PROVIDER": "openai", "OPENAI_BASE_URL": settings.OPENAI_BASE_URL, "OPENAI_API_KEY": settings.OPENAI_API_KEY,
        "OPENAI_MODEL": default, "OPENAI_MODELS": models, "OPENAI_CONNECT_TIMEOUT": settings.LLM_CONNECT_TIMEOUT,
        "OPENAI_READ_TIMEOUT": settings.LLM_READ_TIMEOUT, "OPENAI_MAX_RETRIES": settings.LLM_MAX_RETRIES,
        "LLM_STRUCTURED_OUTPUT": settings.LLM_STRUCTURED_OUTPUT, "LLM_TOOL_CALL_CONTENT": settings.LLM_TOOL_CALL_CONTENT,
        "LLM_MAX_TOKENS": settings.LLM_MAX_TOKENS, "OPENAI_MAX_TOKENS_PARAM": settings.LLM_MAX_TOKENS_PARAM,
    })
    return model, models


def replay_history(source: DiagnosisRun) -> str:
    """What the original run was told: the session's turns before it, and the incident time."""
    earlier = (DiagnosisRun.objects.filter(session_id=source.session_id, status=DiagnosisRun.Status.SUCCESS,
                                           created_at__lt=source.created_at)
               .only("run_id", "question", "answer").order_by("-created_at", "-id")[:memory.RECENT_TURNS])
    parts = [f"Q: {t['question']}\nA: {t['answer']}" for t in (memory._turn(r) for r in reversed(list(earlier)))]
    moment = (source.started_at or source.created_at).isoformat()
    incident = (f"Incident time: {moment}. This is a replay of a recorded run: every tool answers with the evidence "
                f"recorded at that time, and its timestamps are as recorded.")
    return "\n\n".join([incident, *parts])


def replay_context(run: DiagnosisRun, publish) -> dict:
    """What a replay's run context takes instead of the live wiring: a recorded backend for all four tools,
    a recorder that copies each served invocation, the model the replay named, the recorded run's history."""
    source = run.replay_of
    options = ReplayOptions.from_dict(run.replay_options)
    if source is None:
        raise RunCannotStart("replay_source_missing", "the recorded run no longer exists")
    live = wiring.backends() if options.live_fallback else None
    backend = RecordedBackend(InvocationsRecording(source).recorded_calls(), live=live, cases_check=wiring.cases_check)
    model, model_names = replay_chat_model(options)
    # Each invocation is marked with how the recorded backend served it, and a copy served from the
    # recording keeps the source's invocation id when it is free in this run, so the claims and the
    # answer of a faithful replay cite the same ids as the original.
    publish.serve_from(lambda: (served.source, served.mode) if (served := backend.take_served()) else None)
    return {"backends": backend.backends(), "model": model, "model_names": model_names,
            "history_text": replay_history(source), "prompt_version": options.prompt_version}


def replay_execute(rc: RunContext) -> DiagnosisRun | None:
    """Execute a replay run: the normal diagnosis path, recorded evidence, the pinned prompt catalog."""
    with use_catalog(rc.prompt_version):
        return diagnosis_execute(rc)


def replay_wait(run: DiagnosisRun, seconds: float) -> DiagnosisRun:
    """The run once terminal (or as it is after `seconds`): a worker may be executing it."""
    import time

    deadline = time.monotonic() + seconds
    run.refresh_from_db()
    while not run.is_terminal and time.monotonic() < deadline:
        time.sleep(0.2)
        run.refresh_from_db()
    return run
