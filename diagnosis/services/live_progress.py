"""Live progress: run events pushed to waiting clients, and the per-user cap on open streams.

The database stays the event log (diagnosis.selectors.run_events_after: `run_event` rows and the
events derived from step and tool-invocation rows, in the order of their place in the run, the SSE
id). With Redis, every event is also published on a per-run channel once its row is committed, with
the place of the run's previous event (`prev`). A client SUBSCRIBES first, then replays the database
after its last seen place, then reads the channel, dropping any event it already has: an event
written before the subscription is in the replay, one written after it is on the channel, one
written in between is in both and delivered once. A message whose `prev` the client has not seen (a
lost publish) is preceded by the missing events, read from the database. Without Redis (the
embedded default) a short, bounded database poll stands in for the channel.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from contextlib import aclosing
from dataclasses import dataclass
from typing import AsyncIterator

from django.conf import settings
from django.db import close_old_connections, transaction

from diagnosis.models import DiagnosisRun
from diagnosis.selectors import run_events_after

logger = logging.getLogger(__name__)

TERMINAL = {str(status) for status in DiagnosisRun.TERMINAL}
REPLAY_PAGE = 200


@dataclass(frozen=True)
class LiveEvent:
    """A progress event (id, kind, data; pushed ones carry the run's previous event id), a heartbeat
    (kind "heartbeat"), or the end of a run whose terminal status has no event (kind "finished": the
    caller reads the run)."""

    id: int | None
    kind: str
    data: dict
    prev: int | None = None

    @property
    def is_terminal(self) -> bool:
        return self.kind == "finished" or (self.kind == "status" and self.data.get("status") in TERMINAL)


HEARTBEAT = LiveEvent(None, "heartbeat", {})
FINISHED = LiveEvent(None, "finished", {})


def channel_for(run_pk: int) -> str:
    """One channel per run. Pub/sub channels are global to a Redis server (not per database number),
    so the database name is part of it: two deployments sharing a Redis never see each other's runs."""
    return f"aiops:{settings.DATABASES['default']['NAME']}:run-events:{run_pk}"


# --------------------------------------------------------------------------------------- publishing
_client_lock = threading.Lock()
_clients: dict[str, object] = {}


def _redis():
    """One client (a connection pool, fork-safe) per Redis URL."""
    with _client_lock:
        client = _clients.get(settings.REDIS_URL)
        if client is None:
            import redis

            client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
            _clients[settings.REDIS_URL] = client
        return client


def _publish_now(run_pk: int, message: str) -> None:
    try:
        _redis().publish(channel_for(run_pk), message)
    except Exception as exc:  # the row is written: a stream fills the hole from the database
        logger.warning("could not publish progress event of run pk=%s: %s", run_pk, exc)


def publish_event(run_pk: int, event_id: int, prev: int | None, kind: str, data: dict) -> None:
    """Push a written event to live clients once it is committed (at once outside a transaction);
    `prev` is the id of the run's event before it (None for its first)."""
    if not settings.REDIS_URL:
        return
    message = json.dumps({"id": event_id, "prev": prev, "kind": kind, "data": data}, ensure_ascii=False, default=str)
    transaction.on_commit(lambda: _publish_now(run_pk, message))


# --------------------------------------------------------------------------------------- reading
def _replay_page(run_pk: int, after: int) -> list[LiveEvent]:
    close_old_connections()  # a shared pool thread: drop a connection past CONN_MAX_AGE or broken
    try:
        return [LiveEvent(*event) for event in run_events_after(run_pk=run_pk, after=after, limit=REPLAY_PAGE)]
    finally:
        close_old_connections()  # no request ends on this thread: with CONN_MAX_AGE=0 (ASGI) the read closes it


def _run_terminal(run_pk: int) -> bool:
    close_old_connections()
    try:
        return DiagnosisRun.objects.filter(pk=run_pk).values_list("status", flat=True).first() in TERMINAL
    finally:
        close_old_connections()


async def off_loop(fn, *args):
    """A blocking call (a database read, a Redis call) on the event loop's default thread pool: every
    stream shares it, so open streams hold no database connection of their own (a per-request thread
    would keep one open per stream). A cancellation (the client went away) reaches the awaiting stream
    at once; the thread's call finishes on its own."""
    return await asyncio.to_thread(fn, *args)


async def _replay(run_pk: int, after: int) -> list[LiveEvent]:
    return await off_loop(_replay_page, run_pk, after)


async def _terminal(run_pk: int) -> bool:
    return await off_loop(_run_terminal, run_pk)


async def _replay_all(run_pk: int, after: int) -> AsyncIterator[LiveEvent]:
    while True:
        page = await _replay(run_pk, after)
        for event in page:
            yield event
        if len(page) < REPLAY_PAGE:
            return
        after = page[-1].id


async def live_events(run_pk: int, after: int, *, max_seconds: float | None = None,
                      heartbeat: float | None = None) -> AsyncIterator[LiveEvent]:
    """The run's events after `after`, then live ones, until its terminal status (or `max_seconds`).
    Yields HEARTBEAT after `heartbeat` seconds without an event, FINISHED when the run is terminal
    without a terminal event after `after`."""
    max_seconds = settings.SSE_MAX_SECONDS if max_seconds is None else max_seconds
    heartbeat = settings.SSE_HEARTBEAT_SECONDS if heartbeat is None else heartbeat
    if settings.REDIS_URL:
        from redis.exceptions import RedisError

        try:
            # aclosing: a consumer that stops early closes the subscription now, not when collected.
            async with aclosing(_pushed(run_pk, after, max_seconds=max_seconds, heartbeat=heartbeat)) as pushed:
                async for event in pushed:
                    _end_if_cancelled()
                    after = event.id if event.id is not None else after
                    yield event
            return
        except (RedisError, OSError) as exc:  # Redis went away: the database still has every event
            logger.warning("live progress of run pk=%s: Redis unavailable (%s); polling the database", run_pk, exc)
    async with aclosing(_polled(run_pk, after, max_seconds=max_seconds, heartbeat=heartbeat)) as polled:
        async for event in polled:
            _end_if_cancelled()
            yield event


def _end_if_cancelled() -> None:
    """A cancelled stream (its client went away) ends, even when a call on the way swallowed the
    cancellation and carried on (seen under uvicorn: the stream heartbeat to a closed socket and kept its
    slot): the task still counts the request (`Task.cancelling()`). Checked at every
    event, heartbeats included, so such a stream ends within one heartbeat instead of at SSE_MAX_SECONDS."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


GAP_WAIT_SECONDS = 2.0  # how long a stream waits for an earlier event it was told of to be committed
GAP_POLL_SECONDS = 0.05


async def _pushed(run_pk: int, after: int, *, max_seconds: float, heartbeat: float) -> AsyncIterator[LiveEvent]:
    """Why it is long: the subscribe, replay and follow steps of the protocol in their order, sharing the
    subscription and the last place sent; apart, a publish between two steps could be missed."""
    import redis.asyncio as aioredis

    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_seconds
    client = aioredis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2)
    pubsub = client.pubsub()
    try:
        # 1. Subscribe, and wait for Redis to confirm it: from here on no publish is missed.
        await pubsub.subscribe(channel_for(run_pk))
        confirmed = await pubsub.get_message(timeout=5)
        if not confirmed or confirmed.get("type") != "subscribe":
            raise ConnectionError("Redis did not confirm the subscription")
        # 2. Replay what the database already holds.
        last = after
        async for event in _replay_all(run_pk, last):
            last = event.id
            yield event
            if event.is_terminal:
                return
        if await _terminal(run_pk):  # finished without a terminal event past `after`
            async for event in _replay_all(run_pk, last):  # its last events may have landed meanwhile
                last = event.id
                yield event
                if event.is_terminal:
                    return
            yield FINISHED
            return
        # 3. Live: the channel, without the events the replay already gave.
        quiet_since = loop.time()
        while (remaining := deadline - loop.time()) > 0:
            message = await pubsub.get_message(ignore_subscribe_messages=True,
                                               timeout=min(remaining, max(0.0, heartbeat - (loop.time() - quiet_since))))
            if message is None:
                if loop.time() - quiet_since >= heartbeat:
                    quiet_since = loop.time()
                    yield HEARTBEAT
                continue
            payload = json.loads(message["data"])
            prev = payload.get("prev")
            event = LiveEvent(int(payload["id"]), payload["kind"], payload["data"], int(prev) if prev else None)
            if event.id <= last:
                continue  # already delivered by the replay
            # A publish was lost, or overtook the commit of an earlier event written on another connection:
            # the database has, or is about to have, what came before. Wait for it briefly rather than skip it.
            waited = 0.0
            while event.prev is not None and event.prev > last:
                async for missed in _replay_all(run_pk, last):
                    if missed.id >= event.id:
                        break
                    last = missed.id
                    yield missed
                    if missed.is_terminal:
                        return
                if event.prev <= last or waited >= GAP_WAIT_SECONDS:
                    break
                await asyncio.sleep(GAP_POLL_SECONDS)
                waited += GAP_POLL_SECONDS
            last = event.id
            quiet_since = loop.time()
            yield event
            if event.is_terminal:
                return
    finally:
        try:
            await pubsub.aclose()
            await client.aclose()
        except Exception:  # noqa: BLE001 - a broken connection is closed either way
            pass


async def _polled(run_pk: int, after: int, *, max_seconds: float, heartbeat: float) -> AsyncIterator[LiveEvent]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_seconds
    quiet_since = loop.time()
    while loop.time() < deadline:
        found = False
        async for event in _replay_all(run_pk, after):
            found, after, quiet_since = True, event.id, loop.time()
            yield event
            if event.is_terminal:
                return
        if not found:
            if await _terminal(run_pk):
                async for event in _replay_all(run_pk, after):
                    after = event.id
                    yield event
                    if event.is_terminal:
                        return
                yield FINISHED
                return
            if loop.time() - quiet_since >= heartbeat:
                quiet_since = loop.time()
                yield HEARTBEAT
        await asyncio.sleep(settings.SSE_POLL_SECONDS)


async def run_wait_terminal(run_pk: int, seconds: float) -> None:
    """Return when the run is terminal, or after `seconds` (pushed with Redis, polled without)."""
    if seconds <= 0:
        return
    try:
        async with asyncio.timeout(seconds):
            async for event in live_events(run_pk, 0, max_seconds=seconds, heartbeat=seconds + 1):
                if event.is_terminal:
                    return
    except TimeoutError:
        return


# ------------------------------------------------------------------------------------ stream slots
class StreamSlots:
    """At most SSE_MAX_STREAMS_PER_USER open streams per user, across every web process (Redis: a
    sorted set per user whose scores are lease expiries, renewed on each heartbeat, so a process
    that dies without closing its streams frees their slots within one lease) or within this one
    process (the embedded default)."""

    def __init__(self):
        self._local: dict[int, dict[str, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def lease_seconds() -> float:
        return max(30.0, 3 * settings.SSE_HEARTBEAT_SECONDS)

    @staticmethod
    def _key(user_id: int) -> str:
        return f"aiops:{settings.DATABASES['default']['NAME']}:sse-slots:{user_id}"

    def acquire(self, user_id: int) -> str | None:
        token, now, cap = uuid.uuid4().hex, time.time(), settings.SSE_MAX_STREAMS_PER_USER
        expiry = now + self.lease_seconds()
        if settings.REDIS_URL:
            key = self._key(user_id)
            try:
                pipe = _redis().pipeline()
                pipe.zremrangebyscore(key, "-inf", now)
                pipe.zadd(key, {token: expiry})
                pipe.zcard(key)
                pipe.expire(key, int(self.lease_seconds()) + 1)
                count = pipe.execute()[2]
                if count > cap:
                    _redis().zrem(key, token)
                    return None
                return token
            except Exception as exc:  # Redis down: count this process's streams instead of refusing them all
                logger.warning("stream slots: Redis unavailable (%s); counting in this process", exc)
        with self._lock:
            slots = {t: e for t, e in self._local.get(user_id, {}).items() if e > now}
            if len(slots) >= cap:
                self._local[user_id] = slots
                return None
            slots[token] = expiry
            self._local[user_id] = slots
            return token

    def renew(self, user_id: int, token: str) -> None:
        expiry = time.time() + self.lease_seconds()
        if settings.REDIS_URL:
            key = self._key(user_id)
            try:
                _redis().zadd(key, {token: expiry}, xx=True)
                _redis().expire(key, int(self.lease_seconds()) + 1)
            except Exception as exc:
                logger.warning("could not renew a stream slot: %s", exc)
        with self._lock:
            if token in self._local.get(user_id, {}):
                self._local[user_id][token] = expiry

    def release(self, user_id: int, token: str) -> None:
        if settings.REDIS_URL:
            try:
                _redis().zrem(self._key(user_id), token)
            except Exception as exc:  # the lease expires by itself
                logger.warning("could not release a stream slot: %s", exc)
        with self._lock:
            self._local.get(user_id, {}).pop(token, None)

    def open_count(self, user_id: int) -> int:
        now = time.time()
        if settings.REDIS_URL:
            try:
                return int(_redis().zcount(self._key(user_id), now, "+inf"))
            except Exception as exc:
                logger.warning("stream slots: Redis unavailable (%s); counting in this process", exc)
        with self._lock:
            return sum(1 for e in self._local.get(user_id, {}).values() if e > now)


stream_slots = StreamSlots()
