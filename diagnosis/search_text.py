"""What the console's text search reads besides the question: the root cause's summary and the CJK
bigram terms of the answer and that summary (no Django imports: the model, the lifecycle and the
migrations share it).

MariaDB's full-text parser never splits Chinese, so every pair of adjacent CJK characters is also
stored as one ASCII token (``数据`` → ``6570636e``) in ``question_terms`` / ``answer_terms``, each
with a FULLTEXT index (traces/fulltext.py).
"""

from __future__ import annotations

import re
from typing import Any

CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]{2,}")
ROOT_SUMMARY_CHARS = 2_000


def cjk_bigrams(text: str) -> list[str]:
    """Every pair of adjacent CJK characters of `text`, each as one ASCII token: the two code points in
    hex (``数据`` → ``6570636e``), 8 characters, so any full-text parser indexes it as a word."""
    tokens: list[str] = []
    for run in CJK_RUN.findall(text or ""):
        tokens.extend(f"{ord(a):04x}{ord(b):04x}" for a, b in zip(run, run[1:]))
    return tokens


def cjk_terms(text: str) -> str | None:
    """The distinct bigram tokens of `text`, space-separated, or None when it has no CJK pair."""
    return " ".join(dict.fromkeys(cjk_bigrams(text))) or None


def root_summary_of(diagnosis: Any) -> str | None:
    """`diagnosis.rootCause.summary` of a structured diagnosis (None without one)."""
    root = diagnosis.get("rootCause") if isinstance(diagnosis, dict) else None
    summary = root.get("summary") if isinstance(root, dict) else None
    return str(summary)[:ROOT_SUMMARY_CHARS] if summary else None


def answer_terms_of(answer: str | None, diagnosis: Any) -> str | None:
    """`answer_terms`: the CJK bigram terms of the answer and the root cause's summary."""
    return cjk_terms(f"{answer or ''}\n{root_summary_of(diagnosis) or ''}")
