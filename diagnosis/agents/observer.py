"""The run observer port: everything an executing run reports on its way, in one interface.

The agents and the tool box call it for every step start and end (`StepRecorder`), every tool call
(`InvocationRecorder`), every node transition and progress event (`event`, `node_end`); the Gatekeeper
reads the recorded tool calls back through it (`InvocationLookup`). The Django side
(`diagnosis.services.observer.DbRunObserver`) writes the rows, publishes progress and holds the
run's lease. Nothing here imports Django.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from diagnosis.agents.runtime import StepRecorder
from diagnosis.gatekeeper import InvocationLookup
from diagnosis.tools.registry import InvocationRecorder


@runtime_checkable
class RunObserver(StepRecorder, InvocationRecorder, InvocationLookup, Protocol):
    """Receives a run's steps, tool calls, node transitions and progress events (see the module)."""

    step_count: int
    tool_count: int

    def event(self, kind: str, data: dict) -> None:
        """A progress event (node, status, report…), delivered to readers in the order received."""

    def node_end(self) -> None:
        """A node finished: the observer may refuse to go on (its lease is lost)."""

    def __call__(self, kind: str, data: dict) -> None:
        """The same as `event`: the observer is the run's `publish` callable."""
