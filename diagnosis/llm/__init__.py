"""Model clients behind the ChatModel protocol: the OpenAI-compatible client and the offline analyser."""
from __future__ import annotations

from typing import Any, Mapping

from .base import (
    ROLES, ChatModel, ChatReply, ChatRequest, ModelDeadlineExceeded, ModelError, ModelInvalidOutputError,
    ModelNonRetryableError, ModelRetryableError, ToolCall, Usage, parse_json_object, validate_object,
)


def build_chat_model(config: Mapping[str, Any]) -> ChatModel:
    """See openai_model.build_chat_model; imported late so importing diagnosis.llm does not load `openai`."""
    from .openai_model import build_chat_model as build

    return build(config)


__all__ = [
    "ROLES", "ChatModel", "ChatReply", "ChatRequest", "ModelDeadlineExceeded", "ModelError",
    "ModelInvalidOutputError", "ModelNonRetryableError", "ModelRetryableError", "ToolCall", "Usage",
    "build_chat_model", "parse_json_object", "validate_object",
]
