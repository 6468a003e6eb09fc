"""A failure category of the incident lexicon, and the helpers that build one."""

from __future__ import annotations

import re
from dataclasses import dataclass


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


@dataclass(frozen=True)
class Cause:
    """One failure category of the lexicon: how it shows in text and metrics, and what it is (``label_en``, an
    English description for the code's reader; no answer shows it, so it has no translation). It only picks
    which lines and runbook steps speak of a kind of fault; the localiser decides the kind, and an answer
    names the kind with its label from ``diagnosis.localisation.taxonomy``."""

    key: str
    label_en: str
    text: tuple[re.Pattern[str], ...]
    metrics: tuple[tuple[re.Pattern[str], str], ...]  # (metric-name pattern, "up" | "down" | "changed")

    def matches_text(self, text: str) -> bool:
        return any(p.search(text) for p in self.text)

    def matches_series(self, name: str, direction: str | None) -> bool:
        if direction is None:
            return False
        wanted = {"saturated": "up"}.get(direction, direction)
        return any(p.search(name) and want == wanted for p, want in self.metrics)

    def watches(self, name: str) -> bool:
        """True when a series of this name is one the category would move (whatever it did)."""
        return any(p.search(name) for p, _ in self.metrics)


def _m(pattern: str, direction: str) -> tuple[re.Pattern[str], str]:
    return re.compile(pattern, re.IGNORECASE), direction
