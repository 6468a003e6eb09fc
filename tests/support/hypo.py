"""Example counts for property tests: the deterministic CI profile runs the stated count, the
randomised `explore` profile (HYPOTHESIS_PROFILE=explore, `make test-explore`) ten times more."""

from __future__ import annotations

import os

EXPLORE_FACTOR = 10


def examples(count: int) -> int:
    return count * EXPLORE_FACTOR if os.environ.get("HYPOTHESIS_PROFILE") == "explore" else count
