"""The cyclic garbage collector held off while one localisation runs.

A localisation allocates a record and its reference per log line and sample lists per series, and keeps
most of them until it returns. Those allocations set off the cyclic collector again and again, and each
full collection walks every object alive, the caller's tool results included: the bigger the run, the
more often a collection walks the more objects, so the collector alone grows faster than the run
(at 300 services × 100,000 lines it took some 250-320 ms of 1,550, at 30 × 10,000 some 15 of 125). What the
localiser drops, reference counting frees as it goes; what only the collector can free (cycles) waits
for its first run after the localisation, a bounded run's worth.

The switch is process-wide: while a localisation runs, no other thread's cycles are collected (they are
once it ends). It is turned back on only if it was on when the localisation began, so a caller that keeps
it off keeps it off. Of two localisations at once, the first turns it off and back on when it ends (the
other then runs on with it on, only slower): it is never left off.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
