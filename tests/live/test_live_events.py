"""Live progress: subscribe, replay, then stream — no gap, no duplicate — and the stream cap.

Run in both passes: the embedded pass exercises the bounded database poll, the services pass the
Redis channel (and, there, that an idle stream costs no database query)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from diagnosis.models import DiagnosisRun
from diagnosis.services import live_progress
from diagnosis.services.live_progress import live_events, stream_slots
from diagnosis.models import RunEvent
from diagnosis.services.observer import run_event_append
from tests.conftest import services_available
from tests.factories import ChatSessionFactory, DiagnosisRunFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running_run(alice):
    return DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), question="q", status=DiagnosisRun.Status.RUNNING)


def collect(run_pk: int, after: int, *, during=None, heartbeat: float = 30, max_seconds: float = 30,
            stop_after_heartbeats: int | None = None) -> list:
    """Consume live_events; `during(event)` runs after each received event (to write more)."""
    async def consume():
        received, beats = [], 0
        async for event in live_events(run_pk, after, heartbeat=heartbeat, max_seconds=max_seconds):
            received.append(event)
            if event.kind == "heartbeat":
                beats += 1
                if stop_after_heartbeats and beats >= stop_after_heartbeats:
                    break
            if during:
                await during(event)
        return received

    return async_to_sync(consume)()


def write(run_pk: int, kind: str, data: dict) -> int:
    """One event written (and published, with Redis); its place in the run, the SSE id."""
    return run_event_append(run_pk=run_pk, kind=kind, data=data).seq


def stored(run_pk: int) -> list[tuple[int, str]]:
    return list(RunEvent.objects.filter(run_id=run_pk).order_by("seq").values_list("seq", "kind"))


def test_events_written_between_subscribe_and_replay_arrive_once_and_in_order(running_run, monkeypatch):
    """The race the ordering must close: events written after the subscription but before the replay
    query are in the replay AND on the channel; events written after the replay query but before the
    live phase are on the channel only. Each must be delivered exactly once, in order."""
    pk = running_run.pk
    write(pk, "node", {"node": "planner"})  # 1: before the client arrives
    real_replay = live_progress._replay
    calls = {"n": 0}

    async def racing_replay(run_pk, after):
        calls["n"] += 1
        if calls["n"] == 1:
            await asyncio.to_thread(write, pk, "node", {"node": "executor"})   # 2: subscribed, not yet replayed
            page = await real_replay(run_pk, after)                              # sees 1 and 2
            await asyncio.to_thread(write, pk, "node", {"node": "verifier"})   # 3: after the replay query
            return page
        return await real_replay(run_pk, after)

    monkeypatch.setattr(live_progress, "_replay", racing_replay)

    async def finish_when_replayed(event):
        if event.data.get("node") == "verifier":
            await asyncio.to_thread(write, pk, "status", {"status": "SUCCESS"})  # 4: live

    events = collect(pk, 0, during=finish_when_replayed)
    assert [(e.id, e.kind) for e in events] == stored(pk)
    assert [e.kind for e in events] == ["node", "node", "node", "status"]
    assert [e.data.get("node") for e in events[:3]] == ["planner", "executor", "verifier"]


def test_resuming_after_last_event_id_skips_what_the_client_has(running_run):
    written = [write(running_run.pk, "node", {"node": node}) for node in ("planner", "executor", "verifier")]
    written.append(write(running_run.pk, "status", {"status": "FAILED"}))
    events = collect(running_run.pk, written[1])
    assert [e.id for e in events] == written[2:] and events[-1].is_terminal


def test_a_run_terminal_without_a_terminal_event_ends_the_stream(running_run):
    write(running_run.pk, "node", {"node": "planner"})
    DiagnosisRun.objects.filter(pk=running_run.pk).update(status=DiagnosisRun.Status.FAILED)
    events = collect(running_run.pk, 0)
    assert [e.kind for e in events] == ["node", "finished"]


def test_an_idle_stream_sends_heartbeats(running_run):
    events = collect(running_run.pk, 0, heartbeat=0.2, stop_after_heartbeats=2)
    assert [e.kind for e in events] == ["heartbeat", "heartbeat"]


@pytest.mark.services
def test_with_redis_an_idle_stream_makes_no_database_query_after_the_replay(running_run, monkeypatch):
    from django.db.backends import utils

    queries, real = [], utils.CursorWrapper._execute_with_wrappers

    def counting(self, sql, *args, **kwargs):  # every thread's connection (the reads use a shared pool)
        queries.append(sql)
        return real(self, sql, *args, **kwargs)

    monkeypatch.setattr(utils.CursorWrapper, "_execute_with_wrappers", counting)
    events = collect(running_run.pk, 0, heartbeat=0.2, stop_after_heartbeats=5)
    assert [e.kind for e in events] == ["heartbeat"] * 5
    # The replay (one query) and the terminal check (one query); then only the channel. (A new pool
    # thread's connection also runs its set-up statements: they read no table.)
    reads = [sql for sql in queries if "run_event" in sql or "diagnosis_run" in sql]
    assert len(reads) == 2, queries


@pytest.mark.services
def test_with_redis_a_lost_publish_is_filled_from_the_database(running_run, monkeypatch):
    pk = running_run.pk
    real_publish = live_progress._publish_now

    def lossy(run_pk, message):
        if '"node": "executor"' in message:
            return  # Redis dropped this one
        real_publish(run_pk, message)

    monkeypatch.setattr(live_progress, "_publish_now", lossy)

    async def drive(event):
        if event.kind == "heartbeat" and event.id is None and not drive.done:
            drive.done = True
            for node in ("planner", "executor"):
                await asyncio.to_thread(write, pk, "node", {"node": node})
            await asyncio.to_thread(write, pk, "status", {"status": "SUCCESS"})
    drive.done = False

    events = collect(pk, 0, during=drive, heartbeat=0.2)
    delivered = [(e.id, e.kind) for e in events if e.kind != "heartbeat"]
    assert delivered == stored(pk) and [kind for _, kind in delivered] == ["node", "node", "status"]


def test_with_redis_a_publish_that_overtakes_an_earlier_commit_waits_for_it(running_run):
    """Event 2 is published (by another connection) before event 1's transaction commits: the stream
    waits for 1 to reach the database instead of sending 2 and then dropping 1 as already sent."""
    if not services_available():
        pytest.skip("needs Redis (the services pass of .ci/run)")
    pk = running_run.pk

    async def drive(event):
        if event.kind == "heartbeat" and event.id is None and not drive.done:
            drive.done = True
            message = '{"id": 2, "prev": 1, "kind": "node", "data": {"node": "executor"}}'
            await asyncio.to_thread(live_progress._publish_now, pk, message)

            async def commit_later():
                await asyncio.sleep(0.3)  # event 1's transaction commits after 2 was published
                await asyncio.to_thread(write, pk, "node", {"node": "planner"})
                await asyncio.to_thread(write, pk, "node", {"node": "executor"})
                await asyncio.to_thread(write, pk, "status", {"status": "SUCCESS"})
            drive.task = asyncio.ensure_future(commit_later())
    drive.done = False

    events = collect(pk, 0, during=drive, heartbeat=0.2)
    delivered = [(e.id, e.kind) for e in events if e.kind != "heartbeat"]
    assert delivered == stored(pk) == [(1, "node"), (2, "node"), (3, "status")]
    assert [e.data["node"] for e in events if e.kind == "node"] == ["planner", "executor"]


def test_the_stream_cap_refuses_beyond_the_limit_and_a_release_frees_a_slot(alice, settings):
    settings.SSE_MAX_STREAMS_PER_USER = 2
    first, second = stream_slots.acquire(alice.pk), stream_slots.acquire(alice.pk)
    assert first and second
    assert stream_slots.acquire(alice.pk) is None
    assert stream_slots.open_count(alice.pk) == 2
    stream_slots.release(alice.pk, first)
    third = stream_slots.acquire(alice.pk)
    assert third is not None
    for token in (second, third):
        stream_slots.release(alice.pk, token)
    assert stream_slots.open_count(alice.pk) == 0


def test_with_redis_unreachable_streams_and_the_cap_fall_back_to_the_database(running_run, alice, settings):
    from tests.support.server import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    write(running_run.pk, "node", {"node": "planner"})  # its publish fails; the row is written
    write(running_run.pk, "status", {"status": "SUCCESS"})
    events = collect(running_run.pk, 0)
    assert [(e.id, e.kind) for e in events] == stored(running_run.pk)
    assert [e.kind for e in events] == ["node", "status"]
    token = stream_slots.acquire(alice.pk)
    assert token is not None and stream_slots.open_count(alice.pk) == 1  # counted in this process
    stream_slots.release(alice.pk, token)


def test_a_cancelled_stream_ends_even_when_a_call_on_the_way_swallowed_the_cancellation(running_run, monkeypatch):
    """A client that goes away cancels its stream's task. A stream whose cancellation a call on the way
    swallowed (seen under uvicorn: the stream then heartbeat to a closed socket, holding its slot) must
    still end within a heartbeat, not run on to SSE_MAX_SECONDS."""
    in_call = asyncio.Event()

    async def swallowing_replay(run_pk, after):  # a call that swallows a cancellation and carries on
        in_call.set()
        try:
            await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            pass
        return await asyncio.to_thread(live_progress._replay_page, run_pk, after)

    monkeypatch.setattr(live_progress, "_replay", swallowing_replay)

    async def scenario():
        received = []

        async def consume():
            async for event in live_events(running_run.pk, 0, heartbeat=0.05, max_seconds=60):
                received.append(event.kind)

        task = asyncio.create_task(consume())
        await in_call.wait()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=20)  # a liveness bound, far beyond one heartbeat
        if not done:
            task.uncancel()
            task.cancel()
        return task, done, received

    task, done, received = async_to_sync(scenario)()
    assert task in done, f"the cancelled stream ran on ({received.count('heartbeat')} heartbeats)"
    assert task.cancelled()


def test_a_closed_response_gives_back_its_slot_and_gauge_once_whether_or_not_the_stream_ran(alice, settings):
    """Django closes only its own wrappers when a client disconnects during a write, and calls the
    response's closers; the stream's slot and the open-streams gauge must come back exactly once."""
    from diagnosis.api.sse import live_stream
    from diagnosis.observability.metrics import SSE_OPEN

    settings.SSE_MAX_STREAMS_PER_USER = 1
    run = DiagnosisRunFactory(session=ChatSessionFactory(owner=alice), question="q", status=DiagnosisRun.Status.RUNNING)
    gauge_before = SSE_OPEN._value.get()

    never_read = live_stream(run, 0, slot=(alice.pk, stream_slots.acquire(alice.pk)))
    assert stream_slots.acquire(alice.pk) is None and SSE_OPEN._value.get() == gauge_before + 1
    never_read.close()
    never_read.close()
    assert stream_slots.open_count(alice.pk) == 0 and SSE_OPEN._value.get() == gauge_before

    token = stream_slots.acquire(alice.pk)
    read_once = live_stream(run, 0, slot=(alice.pk, token))

    async def first_chunk_then_close():
        chunk = await read_once.__anext__()
        await asyncio.to_thread(read_once.close)  # as Django does, from a thread, with the stream suspended
        for _ in range(100):  # the stream's own ending runs on the loop
            await asyncio.sleep(0.01)
        return chunk

    assert async_to_sync(first_chunk_then_close)().startswith("retry:")
    assert stream_slots.open_count(alice.pk) == 0 and SSE_OPEN._value.get() == gauge_before
    assert stream_slots.acquire(alice.pk) is not None
