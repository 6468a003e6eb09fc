"""A failure category of the incident lexicon, and the helpers that build one."""

from __future__ import annotations

import re
from dataclasses import dataclass


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


@dataclass(frozen=True)
class Cause:
    """One failure category: how it shows in text and metrics, what it is called, what to do."""

    key: str
    label_en: str
    label_zh: str
    text: tuple[re.Pattern[str], ...]
    metrics: tuple[tuple[re.Pattern[str], str], ...]  # (metric-name pattern, "up" | "down" | "changed")
    search: str
    actions_en: tuple[str, ...]
    actions_zh: tuple[str, ...]
    remote: bool = False  # the cause usually lives in a dependency of the service that reports it

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

    def label(self, language: str) -> str:
        return self.label_zh if language == "zh" else self.label_en

    def actions(self, language: str) -> tuple[str, ...]:
        return self.actions_zh if language == "zh" else self.actions_en


def _m(pattern: str, direction: str) -> tuple[re.Pattern[str], str]:
    return re.compile(pattern, re.IGNORECASE), direction
