"""The Django side of the run observer (`diagnosis.agents.observer.RunObserver`): rows, progress, lease.

One `DbRunObserver` per executing run. It is the run's `publish` callable, its step recorder, its
invocation recorder and the Gatekeeper's invocation lookup, and it holds the run's lease.

**Grouped commits.** Steps, tool invocations and progress events are buffered in memory and written
together, one transaction per group, only where a reader or a crash needs them:

- with the claim;
- before each model call (the step row, RUNNING, is visible while the model works, with everything
  since the last group: the previous step's end, the tool calls, the node events);
- inside the result's own transaction (`run_finish_*` in services/run_context.py).

Tool calls and the Gatekeeper's read-back commit nothing: `lookup` answers this execution's own
invocations from memory. A group is a few multi-row statements: a step's end and the next step's start
are one upsert (where the database returns its ids, see `_write_steps`), the invocations one INSERT,
the events one INSERT. A 6-call diagnosis commits 8 times (claim, 6 model calls, result).

**Fencing.** Every group matches only while the run is RUNNING under this worker's claim token, and
locks the run row until it commits, so it serialises with the reaper (which locks the row before it
decides): either the group lands while this worker holds the run, or the run was reaped first, nothing
matches, the group is dropped and `LeaseLost` raised. A group with a new step (the one before each model
call) is fenced by the step's own INSERT: it takes its rows from a SELECT of the run row under that
condition (FOR UPDATE on MariaDB; SQLite writes one transaction at a time: services/step_fence.py),
so the group is one statement fewer. Any other fenced group, and every one on MySQL 8, starts with a
heartbeat UPDATE under the same condition (`RunLease.fence`).

The heartbeat is renewed by a ticker thread every lease/4 (the same conditional UPDATE), so a model or
tool call longer than the lease keeps its run alive; once the run is reaped it stops. A step INSERT does
not renew it, and need not: the reaper (services/reaper.py) fails only RUNNING runs whose heartbeat is
older than the lease, which a live worker's ticker has renewed at most lease/4 ago (it takes three failed
ticks in a row, a database away for most of a lease, to let it lapse; the run is then reaped and the
worker's next group refused). A group that commits just before a reap leaves rows the reaper then closes
(a RUNNING step becomes FAILED): the run's audit stays whole. Reaping and fencing are one mechanism.

**The progress log.** A step's start and end and a tool call are told by their own rows: their events
are derived from them (diagnosis.contracts) rather than stored a second time, and only what no row
tells (node transitions, statuses, reports) is a `run_event`. All three carry `seq`, the event's
place in the run and its SSE id. Only the lease holder writes a run, so it numbers the events in
memory from the run's last place, read once when it starts. Each message published on Redis carries
the place of the run's previous event (`prev`), so a stream that missed a publish sees the gap and
fills it from the database (services/live_progress.py, diagnosis/selectors.py).
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from typing import Any, Callable, Collection, Iterable

from django.conf import settings
from django.db import connection, connections, transaction
from django.utils import timezone

from diagnosis.contracts import step_finished_event, step_started_event, tool_event
from diagnosis.gatekeeper import InvocationRecord
from diagnosis.ids import new_invocation_id
from diagnosis.llm.base import Usage
from diagnosis.models import AgentStep, DiagnosisRun, RunEvent, ToolInvocation
from diagnosis.observability import metrics
from diagnosis.progress_names import checked_event, violation_event
from diagnosis.selectors import run_places
from diagnosis.services.lifecycle import LeaseLost
from diagnosis.services.live_progress import publish_event
from diagnosis.services.row_insert import rows_insert
from diagnosis.services.row_update import rows_update
from diagnosis.services.step_fence import fence_folds, steps_insert_fenced

logger = logging.getLogger(__name__)
Status = DiagnosisRun.Status

# (source invocation pk, replay mode) of the recorded call that served the tool call just made, or None.
ServedBy = Callable[[], "tuple[Any, str] | None"]


class RunLease:
    """The claim of one run by this worker: its token, the fence, and the renewal ticker."""

    def __init__(self, run_id: str, token: str, *, lease_seconds: float | None = None):
        self.run_id, self.token = run_id, token
        self.lease_seconds = float(lease_seconds if lease_seconds is not None else settings.RUN_LEASE_SECONDS)
        self.lost = False
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def fence(self) -> None:
        """Renew the heartbeat, only if the run is still RUNNING under this token; LeaseLost otherwise.
        Inside a transaction, the run row stays locked until it commits."""
        self.check()
        updated = DiagnosisRun.objects.filter(run_id=self.run_id, status=Status.RUNNING, claim_token=self.token).update(
            heartbeat_at=timezone.now())
        if updated != 1:
            raise self.refused()

    def check(self) -> None:
        """LeaseLost at once when a fence already found the lease lost."""
        if self.lost:
            raise LeaseLost(self.run_id)

    def refused(self) -> LeaseLost:
        """What a fence that matched nothing raises: the lease is lost, with the run's current status."""
        self.lost = True
        current = DiagnosisRun.objects.filter(run_id=self.run_id).values_list("status", flat=True).first()
        return LeaseLost(self.run_id, current)

    @property
    def tick_seconds(self) -> float:
        return self.lease_seconds / 4

    def start(self) -> "RunLease":
        self._thread = threading.Thread(target=self._tick, name=f"lease-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _tick(self) -> None:
        try:
            while not self._stop.wait(self.tick_seconds):
                try:
                    self.fence()
                    self.renewals += 1
                except LeaseLost:
                    logger.warning("run %s: lease lost; the ticker stops and the worker's next write is refused", self.run_id)
                    return
                except Exception:  # a database blip: the next tick tries again, the lease has 3 more ticks of margin
                    logger.exception("run %s: could not renew the lease", self.run_id)
                    connection.close()  # reconnect on the next tick
        finally:
            # This thread's own connection, if it opened one: a run shorter than a tick never did, and
            # asking for `connection` here would build a connection object only to close it.
            for opened in connections.all(initialized_only=True):
                opened.close()

    def __enter__(self) -> "RunLease":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def run_last_seq(run_pk: int) -> int:
    """The place of the run's last progress event, 0 before its first (see `selectors.run_places`)."""
    return run_places(run_pk).place


def run_event_append(*, run_pk: int, kind: str, data: dict) -> RunEvent:
    """One event written at once, outside any run's observer: the reaper's terminal status, written
    with the run row locked after the run left its worker (whose later writes the fence refuses)."""
    prev = run_last_seq(run_pk)
    event = RunEvent.objects.create(run_id=run_pk, kind=kind, data=data, seq=prev + 1)
    publish_event(run_pk, event.seq, prev or None, kind, data)
    return event


class DbRunObserver:
    """A run's observer on the database (see the module docstring). With a lease every group is fenced."""

    def __init__(self, run: DiagnosisRun, *, lease: RunLease | None = None):
        self.run = run
        self.lease = lease
        self.run_pk = run.pk
        self.run_id = run.run_id
        self.session_id = run.session.session_id
        # What an earlier execution of the run left (a retry after a lost worker): one read, and its
        # invocation ids only when there are some. `seq` is the place of the run's last event.
        last_index, self.seq, call_count = run_places(run.pk)
        self.next_index = 0 if last_index is None else last_index + 1
        self._used_ids = set(ToolInvocation.objects.filter(run_id=run.pk).values_list("invocation_id", flat=True)
                             if call_count else ())
        self.published_seq = self.seq or None  # the last event pushed to live readers
        self._events: list[RunEvent] = []
        self._outbox: list[tuple[int, str, dict]] = []  # (seq, kind, data) to push once the group is written
        self._invocations: list[ToolInvocation] = []
        self._step_updates: list[tuple[int, dict]] = []
        self._served_by: ServedBy | None = None
        self._records: dict[str, list] = {}  # invocation id -> [tool, status, result, decoded]: see `lookup`
        self._started: dict[int, AgentStep] = {}  # steps written and not yet ended: see `_write_steps`
        self.current_step_id: int | None = None
        self.step_count = 0
        self.tool_count = 0

    # -- progress events ------------------------------------------------------------------------------
    def _place(self, kind: str, data: dict) -> int:
        """The next place in the run's log, for an event pushed with its group."""
        self.seq += 1
        self._outbox.append((self.seq, kind, data))
        return self.seq

    def event(self, kind: str, data: dict) -> None:
        data, violations = checked_event(kind, data)
        self._events.append(RunEvent(run_id=self.run_pk, kind=kind, data=data, seq=self._place(kind, data)))
        self._violations(violations)

    def _violations(self, violations: list[dict]) -> None:
        """A name outside its closed set never reaches the stream: it is recorded as a violation event."""
        for violation in violations:
            data = violation_event(violation)
            self._events.append(RunEvent(run_id=self.run_pk, kind="violation", data=data,
                                         seq=self._place("violation", data)))
            logger.warning("run %s: progress event rejected: %s", self.run_id, data)

    __call__ = event

    def node_end(self) -> None:
        if self.lease is not None and self.lease.lost:
            raise LeaseLost(self.run_id)

    # -- the grouped commit ------------------------------------------------------------------------------
    def commit(self, *, step: AgentStep | None = None, fence: bool = True) -> None:
        """Write what is buffered (and `step`) in one transaction, fenced by the lease; inside an outer
        transaction (the result's, the claim's) it joins it. LeaseLost drops the group."""
        if step is None and not (self._events or self._invocations or self._step_updates):
            return
        events, invocations, updates, outbox = self._events, self._invocations, self._step_updates, self._outbox
        self._events, self._invocations, self._step_updates, self._outbox = [], [], [], []
        # Unfenced groups join the caller's transaction as they are (its outcome is theirs); a fenced one
        # nested in a transaction gets a savepoint, so a refusal leaves that transaction usable.
        # A group with a new step is fenced by the step's INSERT itself where the database allows it.
        fenced_by = self.lease if fence and step is not None and fence_folds() else None
        with transaction.atomic(savepoint=fence):
            if fence and self.lease is not None:
                self.lease.check() if fenced_by is not None else self.lease.fence()
            self._write_steps(updates, step, fenced_by)
            rows_insert(invocations)  # one INSERT each, without the ORM's compiler (services/row_insert.py)
            rows_insert(events)
            for seq, kind, data in outbox:
                publish_event(self.run_pk, seq, self.published_seq, kind, data)
                self.published_seq = seq

    def _write_steps(self, updates: list[tuple[int, dict]], step: AgentStep | None, lease: RunLease | None = None) -> None:
        """The ended steps' end columns and the new step's row. Where a multi-row INSERT returns its rows' ids
        even when a row met its unique key (SQLite, PostgreSQL, MariaDB 10.5+), one statement: the ended
        steps are inserted again with the new one, and on (run, step_index) only their end columns change.
        Elsewhere (MySQL 8) an UPDATE per ended step and an INSERT. With `lease`, that INSERT is the
        group's fence (services/step_fence.py): nothing is written and LeaseLost is raised unless the run
        is still RUNNING under the lease's token."""
        started = [self._started.get(pk) for pk, _ in updates]
        upsert = step is not None and updates and all(started) and connection.features.can_return_rows_from_bulk_insert
        ended = [self._ended_again(row, fields) for row, (_, fields) in zip(started, updates)] if upsert else []
        changed = list(updates[0][1]) if upsert else None
        if lease is not None and step is not None:
            if steps_insert_fenced([*ended, step], run_pk=self.run_pk, token=lease.token, update_fields=changed) is None:
                raise lease.refused()
        elif upsert:
            target = ["run", "step_index"] if connection.features.supports_update_conflicts_with_target else None
            AgentStep.objects.bulk_create([*ended, step], update_conflicts=True, unique_fields=target,
                                          update_fields=changed)  # MySQL: its one unique key besides the id
        elif step is not None:
            step.save(force_insert=True)
        if not upsert:
            for pk, fields in updates:
                rows_update(AgentStep, {"pk": pk}, fields)
        if (upsert and [row.pk for row in ended] != [pk for pk, _ in updates]) or (step is not None and step.pk is None):
            raise RuntimeError(f"run {self.run_id}: the database did not return the steps' ids in order")
        for pk, _ in updates:
            self._started.pop(pk, None)
        if step is not None:
            self._started[step.pk] = step

    @staticmethod
    def _ended_again(row: AgentStep, fields: dict) -> AgentStep:
        """A started step's row with its end columns, to be inserted again (and met on its unique key)."""
        again = copy.copy(row)
        again.pk = None
        for name, value in fields.items():
            setattr(again, name, value)
        return again

    # -- steps ---------------------------------------------------------------------------------------
    def step_start(self, *, node: str, agent: str, attempt: int, model_input: Any, model_name: str) -> int:
        step = AgentStep(run_id=self.run_pk, session_id=self.session_id, step_index=self.next_index, node=node,
                         agent=agent, attempt=attempt, model_input=model_input, model_name=model_name[:128])
        step.seq = self._place("step", step_started_event(step_index=step.step_index, node=node, attempt=attempt))
        self.commit(step=step)  # before the model call: the step is visible while the model works
        self.next_index += 1
        self.step_count += 1
        self.current_step_id = step.pk
        metrics.model_call_started(step.pk, role=agent)
        return step.pk

    def step_finish(self, handle: int, *, status: str, model_output: Any, duration_ms: int, usage: Usage | None,
                    has_tool_call: bool, error: str, model_name: str) -> None:
        end_seq = self._place("step", step_finished_event(step_id=handle, status=status, duration_ms=duration_ms,
                                                          has_tool_call=has_tool_call))
        self._step_updates.append((handle, {
            "status": status, "model_output": model_output, "duration_ms": duration_ms, "has_tool_call": has_tool_call,
            "prompt_tokens": usage.prompt_tokens if usage else 0,
            "completion_tokens": usage.completion_tokens if usage else 0,
            "error": error[:4000], "model_name": (model_name or "")[:128], "finished_at": timezone.now(),
            "end_seq": end_seq,
        }))
        metrics.model_call(handle, model=model_name, status=status, duration_ms=duration_ms, usage=usage)

    # -- tool invocations ------------------------------------------------------------------------------
    def serve_from(self, served_by: ServedBy) -> None:
        """A replay: each invocation is marked with the recorded call that served it, and keeps that
        call's invocation id when it is free in this run (so a faithful replay cites the same ids)."""
        self._served_by = served_by

    def _invocation_id(self, wanted: str | None) -> str:
        if wanted and wanted not in self._used_ids:
            invocation_id = wanted
        else:
            invocation_id = new_invocation_id()
            while invocation_id in self._used_ids:
                invocation_id = new_invocation_id()
        self._used_ids.add(invocation_id)
        return invocation_id

    def record(self, *, tool_name: str, arguments: dict, status: str, result: Any, truncated: bool,
               error_message: str, duration_ms: int, retrieval_details: dict | None) -> str:
        served = self._served_by() if self._served_by is not None else None
        source, mode = served if served else (None, "")
        invocation_id = self._invocation_id(source.invocation_id if source is not None else None)
        event, violations = checked_event("tool", tool_event(
            invocation_id=invocation_id, tool_name=tool_name, status=status, duration_ms=duration_ms,
            replay=self._served_by is not None, replay_mode=mode))
        seq = self._place("tool", event)
        self._invocations.append(ToolInvocation(
            run_id=self.run_pk, session_id=self.session_id, step_id=self.current_step_id,
            invocation_id=invocation_id, tool_name=tool_name, arguments=arguments, status=status,
            result=result, truncated=truncated, error_message=error_message[:4000],
            duration_ms=duration_ms, retrieval_details=retrieval_details,
            source_invocation_id=source.pk if source is not None else None, replay_mode=mode, seq=seq,
        ))
        self._records[invocation_id] = [tool_name, status, result, False]
        self._violations(violations)
        self.tool_count += 1
        metrics.tool_call(tool=tool_name, result=result, status=status, duration_ms=duration_ms)
        return invocation_id

    # -- the Gatekeeper's lookup ------------------------------------------------------------------------
    def lookup(self, invocation_ids: Collection[str]) -> Iterable[InvocationRecord]:
        """The invocations with these ids. One this execution made is answered from memory, as the database
        would give it back (its result through JSON), with nothing written first: the Gatekeeper takes a
        run's own record of an id, so other runs' records of the same id (a replay keeps its source's ids)
        change nothing. Any other id (another run's, an earlier execution's, an invented one) is read."""
        ids = list(dict.fromkeys(i for i in invocation_ids if isinstance(i, str)))[:500]
        found = [self._own_record(i) for i in ids if i in self._records]
        unknown = [i for i in ids if i not in self._records]
        if unknown:
            rows = ToolInvocation.objects.filter(invocation_id__in=unknown).values_list(
                "invocation_id", "run__run_id", "tool_name", "status", "result")
            found += [InvocationRecord(invocation_id=i, run_id=r, tool_name=t, status=s, result=res)
                      for i, r, t, s, res in rows]
        return found

    def _own_record(self, invocation_id: str) -> InvocationRecord:
        held = self._records[invocation_id]
        tool_name, status, result, decoded = held
        if not decoded:  # once per invocation: the stored JSON's shape (tuples as lists, keys as strings)
            result = held[2] = json.loads(json.dumps(result))
            held[3] = True
        return InvocationRecord(invocation_id=invocation_id, run_id=self.run_id, tool_name=tool_name, status=status,
                                result=result)
