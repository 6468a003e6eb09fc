"""The one normaliser for model-written text, and the citation scan of text a reader will see.

Stdlib only. Every check on model text (the prompt-echo guard, the citation scan) runs on
``normalise_model_text``: NFKC, no format characters (Unicode category Cf: zero-width spaces and
joiners, bidi controls, soft hyphens …), every hyphen look-alike folded to ``-``. A check on the raw
text would be defeated by one invisible character per line.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Collection
from typing import Any

from diagnosis.contracts import CANONICAL_CITATION_RE

# Dashes, minus signs and other characters a reader takes for "-" (NFKC keeps most of them).
HYPHEN_LOOKALIKES = (
    "\u00ad\u02d7\u058a\u05be\u1400\u1806\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u207b\u208b\u2212"
    "\u2e17\u2e1a\u2e3a\u2e3b\u2e40\u301c\u3030\u30a0\ufe31\ufe32\ufe58\ufe63\uff0d"
)

# Anything a reader could take for an invocation id, searched in *normalised* text: any case, any
# separator (or none), any number of hex digits or other letters after it.
# "inventory-service" or "invalid" are words, not ids: after a separator the token must start with
# four hex digits, without one it needs six.
ID_LIKE_RE = re.compile(
    r"(?<![0-9A-Za-z])inv(?:[\s_\-.:#]{1,3}[0-9a-f]{4}|[0-9a-f]{6})[0-9a-z_]*", re.IGNORECASE,
)
# A sentence ends at . ! ? 。 ！ ？ followed by space or end, or at a line break.
_SENTENCE_RE = re.compile(r"[^\n]*?(?:[.!?](?=\s|$)|[。！？]|\n|$)")


def normalise_model_text(text: Any) -> str:
    """NFKC, format characters removed, hyphen look-alikes folded to '-'."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if text.isascii():  # NFKC keeps ASCII as it is, and no format character or look-alike is ASCII
        return text
    return unicodedata.normalize("NFKC", text).translate(_format_and_hyphen_table())


@functools.cache
def _format_and_hyphen_table() -> dict[int, int | None]:
    """One `str.translate` table: every format character (Cf) deleted, every other look-alike to '-'.

    Built from this Python's `unicodedata` on the first non-ASCII text (a scan of all code points,
    well under 0.1 s), so it follows the Unicode version the old per-character check followed.
    """
    table: dict[int, int | None] = {ord(c): ord("-") for c in HYPHEN_LOOKALIKES}
    table.update((cp, None) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf")
    return table


def id_like_tokens(text: Any) -> list[str]:
    """Every id-like token of the normalised text."""
    return [m.group(0) for m in ID_LIKE_RE.finditer(normalise_model_text(text))]


def foreign_citations(text: Any, allowed: Collection[str]) -> list[str]:
    """The id-like tokens of ``text`` that are not a canonical citation of an ``allowed`` id.

    A token counts as canonical only when the raw text carries it byte for byte (``inv-`` + eight
    lower-case hex digits, ASCII hyphen, nothing invisible inside) and it is in ``allowed``.
    """
    raw = text if isinstance(text, str) else ("" if text is None else str(text))
    canonical = [m.group(0) for m in CANONICAL_CITATION_RE.finditer(raw)]
    found = id_like_tokens(raw)
    bad = [t for t in found if not CANONICAL_CITATION_RE.fullmatch(t) or t not in allowed]
    # More id-like tokens after normalisation than canonical ones in the raw text: one of them hides
    # a look-alike that normalises to a canonical id (zero-width character, fullwidth digits …).
    remaining = list(canonical)
    for token in found:
        if token in remaining:
            remaining.remove(token)
        elif token not in bad:
            bad.append(token)
    return bad


def split_sentences(text: str) -> list[str]:
    """Sentences and line breaks of ``text``; joining them gives ``text`` back."""
    return [m.group(0) for m in _SENTENCE_RE.finditer(text) if m.group(0)]


def scrub_sentences(text: str, allowed: Collection[str]) -> tuple[str, list[dict[str, Any]]]:
    """Remove every sentence that carries an id-like token which is not an allowed canonical citation.

    Returns the kept text and one audit entry per removed sentence (its tokens, capped text).
    """
    kept: list[str] = []
    removed: list[dict[str, Any]] = []
    for sentence in split_sentences(text):
        bad = foreign_citations(sentence, allowed)
        if bad:
            removed.append({"tokens": [cap_text(t, 40) for t in bad[:5]], "sentence": cap_text(sentence.strip(), 200)})
            if sentence.endswith("\n"):
                kept.append("\n")
            continue
        kept.append(sentence)
    return "".join(kept), removed


CUT_MARKER = "…[cut {n} chars]"


def cap_text(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, with a marker saying how much was cut."""
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return text[:limit] + CUT_MARKER.format(n=len(text) - limit)


def cap_strings(value: Any, limit: int, *, max_items: int = 200, depth: int = 0) -> Any:
    """Every string inside a JSON-like value capped with ``cap_text``; long lists cut with a marker item."""
    if isinstance(value, str):
        return cap_text(value, limit)
    if depth > 20:
        return "…[cut: nested too deep]"
    if isinstance(value, dict):
        return {cap_text(str(k), 200): cap_strings(v, limit, max_items=max_items, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [cap_strings(v, limit, max_items=max_items, depth=depth + 1) for v in list(value)[:max_items]]
        if len(value) > max_items:
            items.append(f"…[cut {len(value) - max_items} items]")
        return items
    return value
