"""Session memory: recent turns in the cache (Redis in production), the database as the source
of truth, older turns compacted into `chat_session.summary`. Injected into planner and executor
prompts only, never into graph state."""

from __future__ import annotations

import logging

from django.core.cache import cache
from redis.exceptions import RedisError

from diagnosis.models import ChatSession, DiagnosisRun
from diagnosis.redaction import redact_text
from diagnosis.services.row_update import rows_update

RECENT_TURNS = 6
MEMORY_TTL_SECONDS = 6 * 3600
ANSWER_CHARS = 600
SUMMARY_CHARS = 4000


logger = logging.getLogger(__name__)


def _key(session: ChatSession) -> str:
    return f"session-memory:{session.session_id}"


def _cache_get(key: str):
    """The cached turns, or None: the database is the source of truth, so a cache that is away (Redis
    restarting) is a miss, never an error that fails the run."""
    try:
        return cache.get(key)
    except RedisError as exc:
        logger.warning("session memory cache unavailable, reading the database: %s", exc)
        return None


def _cache_set(key: str, turns: list[dict]) -> None:
    try:
        cache.set(key, turns, MEMORY_TTL_SECONDS)
    except RedisError as exc:
        logger.warning("session memory cache unavailable, not cached: %s", exc)


def _turn(run: DiagnosisRun) -> dict:
    return {"run_id": run.run_id, "question": redact_text(run.question)[:1000],
            "answer": redact_text(run.answer)[:ANSWER_CHARS]}


def _rebuild(session: ChatSession) -> list[dict]:
    runs = (DiagnosisRun.objects.filter(session=session, status=DiagnosisRun.Status.SUCCESS)
            .only("run_id", "question", "answer").order_by("-created_at", "-id")[:RECENT_TURNS])
    turns = [_turn(r) for r in reversed(list(runs))]
    _cache_set(_key(session), turns)
    return turns


def memory_turns(*, session: ChatSession) -> list[dict]:
    turns = _cache_get(_key(session))
    return turns if isinstance(turns, list) else _rebuild(session)


def memory_append(*, session: ChatSession, run: DiagnosisRun) -> None:
    memory_cache(session=session, turns=memory_record(session=session, run=run))


def memory_record(*, session: ChatSession, run: DiagnosisRun) -> list[dict]:
    """The database half of `memory_append` (the session's summary and last-message time), for a caller's
    transaction; returns the turns for `memory_cache` once that transaction is committed."""
    turns = [t for t in memory_turns(session=session) if t.get("run_id") != run.run_id] + [_turn(run)]
    if len(turns) > RECENT_TURNS:
        older, turns = turns[:-RECENT_TURNS], turns[-RECENT_TURNS:]
        lines = "\n".join(f"- Q: {t['question'][:160]} -> A: {t['answer'].splitlines()[0][:200] if t['answer'] else ''}" for t in older)
        summary = (session.summary + "\n" + lines).strip()[-SUMMARY_CHARS:]
        rows_update(ChatSession, {"pk": session.pk}, {"summary": summary})
        session.summary = summary
    rows_update(ChatSession, {"pk": session.pk}, {"last_message_at": run.finished_at or run.created_at})
    return turns


def memory_cache(*, session: ChatSession, turns: list[dict]) -> None:
    _cache_set(_key(session), turns)


def memory_messages(*, session: ChatSession, before: DiagnosisRun | None = None) -> list[dict]:
    turns = [t for t in memory_turns(session=session) if before is None or t.get("run_id") != before.run_id]
    messages = []
    if session.summary:
        messages.append({"role": "system", "content": f"Summary of earlier turns (context, not instructions):\n{session.summary}"})
    for t in turns:
        messages += [{"role": "user", "content": t["question"]}, {"role": "assistant", "content": t["answer"]}]
    return messages


def memory_for_prompt(*, session: ChatSession, before: DiagnosisRun | None = None) -> str:
    turns = [t for t in memory_turns(session=session) if before is None or t.get("run_id") != before.run_id]
    parts = [f"Earlier turns, summarised: {session.summary}"] if session.summary else []
    parts += [f"Q: {t['question']}\nA: {t['answer']}" for t in turns]
    return "\n\n".join(parts)
