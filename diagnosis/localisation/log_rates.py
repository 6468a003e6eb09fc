"""When a log template's rate changed against its own baseline, and whether it still occurs.

A template's lines are a point process: its rate before a split and after it are compared by their
Poisson log-likelihood ratio against one rate for the whole window, the log-side counterpart of a
metric's mean shift (``deviation.py``).
"""

from __future__ import annotations

import math

LOG_LLR = 4.0  # log-likelihood ratio of a template's rate change to count
MIN_BASELINE_S = 480  # seconds of logs before a change needed to call it a change
NEW_EXPECTED = 1.0  # lines its own spacing would have put in the baseline (none then has a chance under e^-1)


def unseen_before(change: tuple[float, float, int, int], times: list[float], low: float) -> bool:
    """Whether a template seen only since ``change``'s split would have shown in the baseline at the spacing
    of its own lines (first to last, so a job that failed four times and stopped keeps its pace): four lines
    900 s apart after 485 quiet seconds are a sparse routine shape whose baseline was too short to hold one
    (e^-0.5, an even chance), not a new one."""
    _llr_, at, before, after = change
    if before or after < 2:
        return False
    spacing = max(times[-1] - at, 1.0) / (after - 1)
    return (at - low) / spacing >= NEW_EXPECTED


def _llr(n1: int, d1: float, n2: int, d2: float) -> float:
    """Log-likelihood ratio of two Poisson rates against one (a rate change of a template)."""
    n, d = n1 + n2, d1 + d2
    if n == 0 or d1 <= 0 or d2 <= 0:
        return 0.0
    lam = n / d

    def term(k: int, t: float) -> float:
        return k * math.log(k / (lam * t)) if k else 0.0

    return term(n1, d1) + term(n2, d2)


BLIP_SILENCE = 10.0  # a silence this many times the burst's own spacing ends the lines before it as blips
BLIP_BURST = 3  # ... when the burst has at least this many lines, and this many times as many as came before


def rate_change(times: list[float], low: float, high: float) -> tuple[float, float, int, int] | None:
    """The split that best separates a lower rate before from a higher rate after: (llr, at, before, after).

    A template first seen after a quiet baseline begins at its first line, however its rate grows
    later, unless its lines before the best split are blips: a few (a third of the burst's at most), then
    a silence of at least ``BLIP_SILENCE`` times the spacing of the burst that follows it, a burst of at
    least ``BLIP_BURST`` lines that counts by itself."""
    best = first = None
    for i, at in enumerate(times):
        if at - low < MIN_BASELINE_S:
            continue
        n1, n2 = i, len(times) - i
        d1, d2 = at - low, max(high - at, 60.0)
        if n2 / d2 <= n1 / d1:
            continue
        score = _llr(n1, d1, n2, d2)
        if best is None or score > best[0]:
            best = (score, at, n1, n2)
        if n1 == 0 and first is None:
            first = best
    if first is None or best is first:
        return best
    _score, at, before, after = best
    silence = at - times[before - 1]
    burst = max(high - at, 60.0) / after
    blips = after >= BLIP_BURST * before and after >= BLIP_BURST
    return best if blips and best[0] >= LOG_LLR and silence >= BLIP_SILENCE * burst else first


STOPPED_P = 0.01  # a template has stopped when a silence this long had under this chance at its own rate


def ongoing(last: float, change: tuple[float, float, int, int] | None, high: float) -> bool:
    """Whether a template still occurs at the end of the window: its last line is recent (10 minutes, or
    half the time since its onset), or the silence since is one its own rate since the onset makes likely
    (three lines in a quarter of an hour leave gaps of ten minutes; three hundred do not)."""
    gap = high - last
    since = high - (change[1] if change else high)
    if gap <= max(600.0, 0.5 * since):
        return True
    after = change[3] if change else 0
    return math.exp(-after * gap / max(since, 60.0)) >= STOPPED_P
