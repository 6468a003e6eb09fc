"""The executor's tool loop, shared by the chat executor and the alert-analysis task executor.

The model is offered the run's tools (``ToolBox.offered``) while the budget lasts; each call it makes runs
through the run's ToolBox and its fenced result is appended to the conversation. The loop ends when the
model answers without a tool call (its final report), at once when it calls a tool it was not offered,
or on a model fault (`error`, with the tool results gathered until then). A model that never stops
calling tools is an invalid output like any other; callers turn the result into their node's status.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from diagnosis.agents.runtime import AgentContext, fence_tool_output
from diagnosis.llm.base import ChatReply, ModelError, ModelInvalidOutputError
from diagnosis.tools.registry import BLOCKED, ToolOutcome, openai_tool_specs

# The turns the model gets beyond its tool budget: the final report, and a little slack for replies
# that call no tool but are not final either (they are invalid outputs later).
EXTRA_TURNS = 3


@dataclass
class ToolLoopResult:
    """The final reply (None when a tool was blocked), every tool result as a dict, and the call count."""

    reply: ChatReply | None
    results: list[dict] = field(default_factory=list)
    calls: int = 0
    blocked_tool: str = ""
    blocked: ToolOutcome | None = None
    error: ModelError | None = None

    @property
    def invocation_ids(self) -> list[str]:
        ids = [r["invocation_id"] for r in self.results]
        return ids + [self.blocked.invocation_id] if self.blocked is not None else ids

    def blocked_error(self) -> dict[str, Any]:
        return {"code": "tool_blocked", "tool": self.blocked_tool[:64],
                "invocation_id": self.blocked.invocation_id if self.blocked else None}


def run_tool_loop(
    ctx: AgentContext,
    *,
    node: str,
    role: str,
    attempt: int,
    messages: list[dict],
    tool_budget: int,
    structured_input: Callable[[list[dict], int], dict],
    unfinished: str = "the executor never produced its final report",
) -> ToolLoopResult:
    """Drive one executor conversation; ``structured_input(results, calls)`` is what each model step records."""
    result = ToolLoopResult(reply=None)
    try:
        _converse(ctx, result, node=node, role=role, attempt=attempt, messages=messages, tool_budget=tool_budget,
                  structured_input=structured_input, unfinished=unfinished)
    except ModelError as exc:
        result.reply, result.error = None, exc
    return result


def _converse(ctx, result: ToolLoopResult, *, node, role, attempt, messages, tool_budget, structured_input,
              unfinished) -> None:
    for _ in range(tool_budget + EXTRA_TURNS):
        offer = result.calls < tool_budget and ctx.tools.remaining > 0
        reply = ctx.call_model(
            node=node, role=role, attempt=attempt, system="", user=None, messages=messages,
            tools=openai_tool_specs(ctx.tools.offered) if offer else None, json_output=not offer,
            structured_input=structured_input(result.results, result.calls),
        )
        if not reply.tool_calls:
            result.reply = reply
            return
        messages.append(reply.as_assistant_message())
        for call in reply.tool_calls:
            outcome = ctx.tools.call(call.name, call.arguments)
            result.calls += 1
            if outcome.status == BLOCKED and call.name not in ctx.tools.offered:
                result.blocked_tool, result.blocked = call.name, outcome
                return
            result.results.append(outcome.to_dict())
            messages.append({"role": "tool", "tool_call_id": call.id, "content": fence_tool_output(outcome)})
    raise ModelInvalidOutputError(unfinished)
