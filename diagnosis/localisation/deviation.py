"""How far a series moved from its own baseline, and when it began.

One mean shift is located in closed form: for every split ``k`` the least-squares gain of modelling
the series as two constant segments is ``k (n - k) / n · (mean_after - mean_before)²``, computed for
all ``k`` from prefix sums in one pass. This is the single-change-point case of what ``ruptures``
(``Binseg``/``Dynp`` with the ``l2`` cost) computes; one change is all a 60-point incident window
needs, and the closed form costs O(n) instead of a dependency and a C extension for every one of
thousands of series per run.

The shift is then scored robustly against the baseline before it, as BARO does: the distance of the
incident median from the baseline median in units of the baseline's scaled MAD (with a floor, so a
perfectly flat baseline does not turn a rounding step into an anomaly). A shift only counts when it
is sustained (most points after the onset are beyond the noise band) and still present at the end of
the window: a spike that came and went is noise, not an incident in progress.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import accumulate
from statistics import median

MIN_BASELINE = 8  # points before the onset needed to know what normal is
MIN_INCIDENT = 3  # points after it: one or two points are a blip
BAND = 3.0  # a point is beyond the noise band at this many robust deviations


@dataclass(frozen=True)
class Shift:
    onset: float  # time of the first point of the shifted segment
    index: int
    baseline: float  # median before the onset
    level: float  # median from the onset on
    peak: float  # the extreme value after the onset, in the shift's direction
    scale: float  # the robust noise of the baseline
    score: float  # |level - baseline| / scale
    direction: int  # +1 up, -1 down
    sustained: bool

    @property
    def relative(self) -> float:
        """The shift relative to the baseline (for floors such as "at least 20 % higher")."""
        return abs(self.level - self.baseline) / max(abs(self.baseline), 1e-9)


def robust_scale(values: list[float], centre: float) -> float:
    deviations = sorted(abs(v - centre) for v in values)
    mad = median(deviations) * 1.4826 if deviations else 0.0
    spread = (max(values) - min(values)) / 6 if values else 0.0
    return max(mad, spread * 0.5, abs(centre) * 0.02, 1e-6)


def best_split(values: list[float]) -> int | None:
    n = len(values)
    if n < MIN_BASELINE + MIN_INCIDENT:
        return None
    prefix = list(accumulate(values, initial=0.0))
    total = prefix[-1]
    if math.isfinite(total):  # then no gain is NaN, and the first largest is the one the loop below keeps
        splits = range(MIN_BASELINE, n - MIN_INCIDENT + 1)
        gains = [k * (n - k) / n * ((total - prefix[k]) / (n - k) - prefix[k] / k) ** 2 for k in splits]
        return splits[max(range(len(gains)), key=gains.__getitem__)]
    best, best_gain = None, -1.0
    for k in range(MIN_BASELINE, n - MIN_INCIDENT + 1):
        before = prefix[k] / k
        after = (total - prefix[k]) / (n - k)
        gain = k * (n - k) / n * (after - before) ** 2
        if gain > best_gain:
            best, best_gain = k, gain
    return best


def shift(times: list[float], values: list[float]) -> Shift | None:
    """The series' one sustained shift from its baseline, or None when it has none worth a look."""
    k = best_split(values)
    if k is None:
        return None
    base = values[:k]
    centre = median(base)
    scale = robust_scale(base, centre)
    after = values[k:]
    level = median(after)
    direction = 1 if level >= centre else -1
    # The onset: walk back over points already beyond the band (a ramp that began before the split).
    while k > MIN_BASELINE and (values[k - 1] - centre) * direction > BAND * scale:
        k -= 1
    after = values[k:]
    beyond = [(v - centre) * direction > BAND * scale for v in after]
    tail = values[-min(3, len(values) - k):]
    # Sustained: most points since the onset are beyond the band, and it is still there at the end, or it
    # keeps coming back (a sawtooth: memory that climbs to its limit, drops at a restart and climbs again).
    share = sum(beyond) / len(beyond)
    still = (median(tail) - centre) * direction > BAND * scale
    sustained = share >= 0.7 and still or share >= 0.6 and len(beyond) >= 10
    peak = max(after) if direction > 0 else min(after)
    level = median(after)
    return Shift(times[k], k, centre, level, peak, scale, abs(level - centre) / scale, direction, sustained)


def rates(times: list[float], values: list[float]) -> tuple[list[float], list[float]]:
    """A counter as its per-second rate between samples; a drop is a reset and counts from zero."""
    out_t, out_v = [], []
    for i in range(1, len(values)):
        dt = times[i] - times[i - 1]
        if dt <= 0:
            continue
        delta = values[i] - values[i - 1]
        if delta < 0:
            delta = values[i]
        out_t.append(times[i])
        out_v.append(delta / dt)
    return out_t, out_v


def ratio(num: tuple[list[float], list[float]], den: tuple[list[float], list[float]]) -> tuple[list[float], list[float]]:
    """Pointwise num/den at the times both have (a histogram's mean from its rate of sum and of count)."""
    by_time = dict(zip(*den))
    out_t, out_v = [], []
    for t, v in zip(*num):
        d = by_time.get(t)
        if d:
            out_t.append(t)
            out_v.append(v / d)
    return out_t, out_v
