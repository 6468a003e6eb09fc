"""The offline analyser (F-30): the embedded default model, deterministic and rule-based.

It answers every agent role of the ChatModel protocol from ``request.structured_input`` only: it
plans the queries, calls the tools, lets the localiser (``diagnosis.localisation``) decide the outcome,
cites the exact records it rests on, checks its own claims and writes the answer. No network, no canned
answers. Stdlib only.

The package is split along its seams: ``localised`` (the localiser's outcome as follow-up queries and
claims, for a diagnosis and an alert task alike), ``observations`` and ``anomalies`` (tool results read
into typed records and per-service profiles, for the claims around the root), ``leads`` (durations,
dependencies named in lines, the stated symptom), ``lexicon`` and ``taxonomy`` (the words that pick lines
and runbook steps of a kind), ``findings`` (the typed statements of the claims), ``claims`` (statements
with exact excerpts), ``roles`` (planner, executor, simple chat), ``verifier``, ``composer`` and ``aiops``
(alert analysis, its report rendered by ``diagnosis.alert_render``). Each role's output is a typed
structure; the verifier and composer read claims as typed findings.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from diagnosis.llm.base import ChatReply, ChatRequest, ModelNonRetryableError, ToolCall, Usage

from diagnosis.llm.offline.aiops import _aiops
from diagnosis.llm.offline.localised import LocalisationMemo, remembering
from diagnosis.llm.offline.lexicon import MODEL_NAME, _json, question_language, services_in_question
from diagnosis.llm.offline.composer import compose
from diagnosis.llm.offline.roles import _executor, _plan, _simple
from diagnosis.llm.offline.verifier import verify

__all__ = ["MODEL_NAME", "OfflineAnalyser", "question_language", "services_in_question"]


# --------------------------------------------------------------------------- the model


class OfflineAnalyser:
    """The ChatModel of the embedded default: deterministic, rule-based, offline."""

    model_name = MODEL_NAME

    def __init__(self) -> None:
        # One model per run: the localisations of this run's evidence, each computed once.
        self._localisations = LocalisationMemo()

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None = None) -> OfflineAnalyser:
        return cls()

    def complete(self, request: ChatRequest) -> ChatReply:
        with remembering(self._localisations):
            return self._complete(request)

    def _complete(self, request: ChatRequest) -> ChatReply:
        started = time.perf_counter()
        si = request.structured_input
        if si is None and request.role not in ("simple", "aiops"):
            raise ModelNonRetryableError(
                f"The offline analyser reads the structured input of a {request.role} request; none was given",
                code="offline_no_structured_input", model=MODEL_NAME,
            )
        si = si or {}
        tool_calls: list[ToolCall] = []
        if request.role == "planner":
            content = _json(_plan(si).to_dict())
        elif request.role == "executor":
            content, tool_calls = _executor(request, si)
        elif request.role == "verifier":
            content = _json(verify(si).to_dict())
        elif request.role == "composer":
            content = _json(compose(si).to_dict())
        elif request.role == "simple":
            content = _simple(si, request)
        else:  # aiops: the alert-analysis supervisor's phases
            content, tool_calls = _aiops(request, si)
        return ChatReply(
            content=content, tool_calls=tool_calls, usage=_usage(request, content, tool_calls), model=MODEL_NAME,
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
            finish_reason="tool_calls" if tool_calls else "stop",
        )


def _usage(request: ChatRequest, content: str | None, calls: list[ToolCall]) -> Usage:
    """Approximate tokens (four characters each) so budgets and audits have figures."""
    prompt_chars = sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else len(_json(m.get("content")))
                       for m in request.messages if isinstance(m, Mapping))
    prompt_chars += len(_json(request.tools)) if request.tools else 0
    completion_chars = len(content or "") + sum(len(c.raw_arguments) + len(c.name) for c in calls)
    prompt, completion = max(1, prompt_chars // 4), max(1, completion_chars // 4)
    return Usage(prompt, completion, prompt + completion)
