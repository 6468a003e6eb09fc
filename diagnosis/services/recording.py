"""The Django side of the agents' recorders: every model call becomes an `agent_step`, every tool
call a `tool_invocation`, both owned by the run and its session; the Gatekeeper reads them back."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, Collection, Iterable

from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from diagnosis.gatekeeper import InvocationRecord
from diagnosis.ids import new_invocation_id
from diagnosis.llm.base import Usage
from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from diagnosis.observability import metrics

EventSink = Callable[[str, dict], None]


class RunRecorder:
    """Step recorder, invocation recorder and invocation lookup for one run. With a lease, every write
    is fenced: it lands only while this worker holds the run (LeaseLost otherwise)."""

    def __init__(self, run: DiagnosisRun, *, publish: EventSink | None = None, lease=None):
        self.run = run
        self.lease = lease
        self.run_pk = run.pk
        self.run_id = run.run_id
        self.session_id = run.session.session_id
        self.publish = publish or (lambda kind, data: None)
        last = AgentStep.objects.filter(run_id=run.pk).aggregate(m=Max("step_index"))["m"]
        self.next_index = 0 if last is None else last + 1
        self.current_step_id: int | None = None
        self.step_count = 0
        self.tool_count = 0

    def _guard(self):
        return self.lease.guarded() if self.lease is not None else nullcontext()

    # -- steps -----------------------------------------------------------------------------------
    def step_start(self, *, node: str, agent: str, attempt: int, model_input: Any, model_name: str) -> int:
        with self._guard():
            step = AgentStep.objects.create(
                run_id=self.run_pk, session_id=self.session_id, step_index=self.next_index, node=node, agent=agent,
                attempt=attempt, model_input=model_input, model_name=model_name[:128],
            )
        self.next_index += 1
        self.step_count += 1
        self.current_step_id = step.pk
        metrics.model_call_started(step.pk, role=agent)
        self.publish("step", {"stepIndex": step.step_index, "node": node, "attempt": attempt, "status": "RUNNING"})
        return step.pk

    def step_finish(self, handle: int, *, status: str, model_output: Any, duration_ms: int, usage: Usage | None,
                    has_tool_call: bool, error: str, model_name: str) -> None:
        with self._guard():
            AgentStep.objects.filter(pk=handle).update(
                status=status, model_output=model_output, duration_ms=duration_ms, has_tool_call=has_tool_call,
                prompt_tokens=usage.prompt_tokens if usage else 0, completion_tokens=usage.completion_tokens if usage else 0,
                error=error[:4000], model_name=(model_name or "")[:128], finished_at=timezone.now(),
            )
        metrics.model_call(handle, model=model_name, status=status, duration_ms=duration_ms, usage=usage)
        self.publish("step", {"stepId": handle, "status": status, "durationMs": duration_ms, "hasToolCall": has_tool_call})

    # -- tool invocations --------------------------------------------------------------------------
    def record(self, *, tool_name: str, arguments: dict, status: str, result: Any, truncated: bool,
               error_message: str, duration_ms: int, retrieval_details: dict | None) -> str:
        for _ in range(5):
            invocation_id = new_invocation_id()
            try:
                with self._guard(), transaction.atomic() if connection.in_atomic_block else nullcontext():
                    ToolInvocation.objects.create(
                        run_id=self.run_pk, session_id=self.session_id, step_id=self.current_step_id,
                        invocation_id=invocation_id, tool_name=tool_name, arguments=arguments, status=status,
                        result=result, truncated=truncated, error_message=error_message[:4000],
                        duration_ms=duration_ms, retrieval_details=retrieval_details,
                    )
            except IntegrityError:
                continue  # an id already used in this run: draw another
            self.tool_count += 1
            metrics.tool_call(tool=tool_name, result=result, status=status, duration_ms=duration_ms)
            self.publish("tool", {"invocationId": invocation_id, "toolName": tool_name, "status": status,
                                  "durationMs": duration_ms})
            return invocation_id
        raise RuntimeError("could not allocate a unique invocation id")

    # -- gatekeeper lookup -------------------------------------------------------------------------
    def lookup(self, invocation_ids: Collection[str]) -> Iterable[InvocationRecord]:
        ids = [i for i in invocation_ids if isinstance(i, str)][:500]
        rows = ToolInvocation.objects.filter(invocation_id__in=ids).values_list(
            "invocation_id", "run__run_id", "tool_name", "status", "result"
        )
        return [InvocationRecord(invocation_id=i, run_id=r, tool_name=t, status=s, result=res) for i, r, t, s, res in rows]
