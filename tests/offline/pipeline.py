"""The framework-free diagnosis pipeline, wired in memory for tests of the offline analyser.

The real graph, node adapters, tool box, gatekeeper, demo backend and knowledge index; only the
three persistence protocols are in-memory stand-ins (test code only). No Django, no database.
"""

from __future__ import annotations

import copy
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable

from diagnosis.agents.nodes import DiagnosisAgents
from diagnosis.agents.runtime import AgentContext, RunBudget
from diagnosis.gatekeeper import InvocationRecord
from diagnosis.graph.engine import RunConfig
from diagnosis.graph.state import DIAGNOSIS_RECURSION_LIMIT
from diagnosis.graph.state import StateKey as K
from diagnosis.graph.topology import build_diagnosis_graph, initial_diagnosis_state
from diagnosis.llm.base import ChatModel, Usage
from diagnosis.llm.offline import OfflineAnalyser
from diagnosis.tools.backends.demo import DemoBackend
from diagnosis.tools.knowledge_index import KnowledgeIndex, chunk_markdown
from diagnosis.tools.registry import Backends, ToolBox

MAX_TOOL_CALLS = 12  # the settings default (DIAGNOSIS_MAX_TOOL_CALLS)
MAX_MODEL_CALLS = 24


@dataclass
class StoredInvocation:
    invocation_id: str
    tool_name: str
    arguments: dict
    status: str
    result: Any


@dataclass
class MemoryRecorder:
    """InvocationRecorder + StepRecorder + InvocationLookup over plain lists, like the audit tables."""

    run_id: str
    invocations: list[StoredInvocation] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)

    def record(self, *, tool_name, arguments, status, result, truncated, error_message, duration_ms,
               retrieval_details) -> str:
        used = {i.invocation_id for i in self.invocations}
        invocation_id = f"inv-{secrets.token_hex(4)}"
        while invocation_id in used:
            invocation_id = f"inv-{secrets.token_hex(4)}"
        # Stored as JSON, as the database column does: the gatekeeper reads back what was written.
        stored = json.loads(json.dumps(result, default=str)) if result is not None else None
        self.invocations.append(StoredInvocation(invocation_id, tool_name, copy.deepcopy(arguments), status, stored))
        return invocation_id

    def lookup(self, invocation_ids: Collection[str]) -> Iterable[InvocationRecord]:
        wanted = set(invocation_ids)
        return [InvocationRecord(i.invocation_id, self.run_id, i.tool_name, i.status, i.result)
                for i in self.invocations if i.invocation_id in wanted]

    def step_start(self, *, node, agent, attempt, model_input, model_name):
        self.steps.append({"node": node, "agent": agent, "attempt": attempt, "status": "RUNNING"})
        return len(self.steps) - 1

    def step_finish(self, handle, *, status, model_output, duration_ms, usage: Usage | None, has_tool_call, error,
                    model_name) -> None:
        self.steps[handle].update(status=status, model_output=model_output, usage=usage, model_name=model_name,
                                  has_tool_call=has_tool_call, error=error)


class RunbookSearch:
    """KnowledgeSearch over scenario runbooks, ranked by the project's BM25 index."""

    def __init__(self, scenarios: Iterable[Path]):
        chunks = []
        for scenario in scenarios:
            for path in sorted((scenario / "runbooks").glob("*.md")):
                chunks += chunk_markdown(f"{scenario.name}/runbooks/{path.name}", path.read_text(encoding="utf-8"))
        self.index = KnowledgeIndex.build(chunks)

    def search(self, *, query: str, top_k: int, exclude_chunk_ids: set[str]) -> list[dict]:
        return [
            {"source_type": c.source_type, "source_id": c.source_id, "title": c.title, "path": c.path,
             "chunk_id": c.chunk_id, "score": round(score, 4), "content": c.content}
            for c, score in self.index.search(query, top_k, exclude_chunk_ids=exclude_chunk_ids)
        ]


@dataclass
class RunOutcome:
    state: dict
    recorder: MemoryRecorder
    tools: ToolBox

    @property
    def answer(self) -> str:
        return self.state.get(K.FINAL_ANSWER) or ""

    @property
    def route(self) -> list[str]:
        return [event["node"] for event in self.state.get(K.ORCHESTRATION_EVENTS) or ()]

    @property
    def final_node(self) -> str:
        return self.route[-1] if self.route else ""

    @property
    def verdict(self) -> str | None:
        return self.state.get(K.EFFECTIVE_VERDICT)

    @property
    def tools_called(self) -> list[str]:
        return [i.tool_name for i in self.recorder.invocations]

    @property
    def invocation_ids(self) -> set[str]:
        return {i.invocation_id for i in self.recorder.invocations}

    @property
    def verified_ids(self) -> set[str]:
        return {e["source_invocation_id"] for e in self.state.get(K.VERIFIED_EVIDENCE) or []}


def run_question(scenarios: Path | list[Path], question: str, *, model: ChatModel | None = None,
                 max_tool_calls: int = MAX_TOOL_CALLS, backend: Any = None) -> RunOutcome:
    """One diagnosis of `question` against the demo world of `scenarios`, through the compiled graph."""
    dirs = [scenarios] if isinstance(scenarios, Path) else list(scenarios)
    run_id = f"run-{secrets.token_hex(16)}"
    recorder = MemoryRecorder(run_id)
    backend = backend or DemoBackend(dirs)
    tools = ToolBox(backends=Backends(logs=backend, metrics=backend, alerts=backend, knowledge=RunbookSearch(dirs),
                                     kubernetes=backend, traces=backend, changes=backend),
                    recorder=recorder, max_calls=max_tool_calls)
    ctx = AgentContext(
        model=model or OfflineAnalyser(), tools=tools, steps=recorder, lookup=recorder,
        budget=RunBudget(max_model_calls=MAX_MODEL_CALLS, max_tokens=200_000, max_seconds=120),
        run_id=run_id, session_id="s-offline-test",
    )
    graph = build_diagnosis_graph(DiagnosisAgents(ctx).nodes())
    state = graph.invoke(initial_diagnosis_state(question),
                         RunConfig.for_run(run_id=run_id, session_id="s-offline-test", recursion_limit=DIAGNOSIS_RECURSION_LIMIT))
    return RunOutcome(dict(state), recorder, tools)
