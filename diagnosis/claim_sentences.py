"""A verified claim in words: its statement, its quoted excerpts with their citations, and a free suggestion
made safe to show.

The sentence primitives every renderer of verified claims shares (the answer, ``diagnosis.answer_render``;
the alert-analysis report, ``diagnosis.alert_render``), and the plain statement the services store. Every
text passes through secret masking (``diagnosis.redaction``) and becomes inert Markdown
(``diagnosis.markdown_text``); a suggestion carrying an id-like token is refused, so nothing unverified
looks cited. Framework-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnosis.contracts import KNOWLEDGE_TOOLS
from diagnosis import i18n
from diagnosis.markdown_text import md_inline, plain_line
from diagnosis.model_text import cap_text, id_like_tokens
from diagnosis.redaction import redact_text

MAX_STATEMENT_CHARS = 400
MAX_EXCERPT_CHARS = 240
MAX_EXCERPTS_PER_CLAIM = 3
MAX_SUGGESTION_CHARS = 300

SIMILAR_PREFIX = i18n.mark("A similar past incident or runbook describes: ")
KNOWLEDGE_PREFIX = i18n.mark("From the knowledge base (not this run's telemetry): ")


def plain_statement(value: Any) -> str:
    """A claim statement as plain text (for JSON fields): one line, secrets masked, capped."""
    return cap_text(redact_text(plain_line(value)), MAX_STATEMENT_CHARS)


def clean_statement(value: Any) -> str:
    """A claim statement as inert inline Markdown (diagnosis.markdown_text)."""
    return md_inline(plain_statement(value))


def excerpt_text(value: Any) -> str:
    """An evidence excerpt as inert inline Markdown: one line, secrets masked, capped with an ellipsis."""
    flat = plain_line(value)
    if len(flat) > MAX_EXCERPT_CHARS:
        flat = flat[:MAX_EXCERPT_CHARS].rstrip() + "…"
    return md_inline(redact_text(flat))


def claim_text(claim: Mapping[str, Any]) -> str:
    """A claim's statement and its quoted excerpts, as one text (what a reader would act on)."""
    excerpts = [str(b.get("evidence_excerpt", "")) for b in claim.get("evidence") or () if isinstance(b, Mapping)]
    return " \n".join([str(claim.get("statement", "")), *excerpts])


def knowledge_only(claim: Mapping[str, Any]) -> bool:
    tools = {str(b.get("tool_name")) for b in claim.get("evidence") or () if isinstance(b, Mapping)}
    return bool(tools) and tools <= KNOWLEDGE_TOOLS


def claim_sentence(claim: Mapping[str, Any], language: str, *, similar: bool = False,
                   knowledge: bool = False) -> tuple[str, list[str]]:
    """``statement — “excerpt” [inv-…]; “excerpt” [inv-…]`` and the invocation ids it cites."""
    statement = clean_statement(claim.get("statement", ""))
    quotes, ids = [], []
    for b in [b for b in claim.get("evidence") or () if isinstance(b, Mapping)][:MAX_EXCERPTS_PER_CLAIM]:
        invocation_id = str(b.get("source_invocation_id"))
        quotes.append(f"“{excerpt_text(b.get('evidence_excerpt', ''))}” [{invocation_id}]")
        ids.append(invocation_id)
    prefix = i18n.text(SIMILAR_PREFIX, language) if similar else i18n.text(KNOWLEDGE_PREFIX, language) if knowledge else ""
    return f"{prefix}{statement} — {'; '.join(quotes)}", ids


def clean_suggestion(value: Any, prompt_echoed=None) -> tuple[str | None, str | None]:
    """(text, None) for a usable suggestion, else (None, why it was dropped)."""
    flat = plain_line(value)
    if not flat:
        return None, "empty"
    if id_like_tokens(flat):
        return None, "citation_like_token"
    if prompt_echoed is not None and prompt_echoed(flat):
        return None, "prompt_echo"
    return md_inline(cap_text(redact_text(flat), MAX_SUGGESTION_CHARS)), None
