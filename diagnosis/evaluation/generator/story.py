"""A fault's story: what the root does, how its callers see it, and what the ground truth records.

A kind builder (``faults_*.py``) writes the root's own evidence into the world and returns a
``Story``; ``propagate`` then carries the fault up the call graph with delays: direct callers show the
story's effect (timeouts, 5xx, refused connections, slowness, or dependency-specific lines the builder
wrote itself), and their callers show errors or timeouts naming them in turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnosis.evaluation.generator.callers import caller_lines
from diagnosis.evaluation.generator.formats import Failure
from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.world import SAMPLES, World, first_sample_at

UPWARD = {"errors": "errors", "refused": "errors", "timeout": "timeout", "slow": "slow"}
HOP_DELAY = (20, 150)  # seconds between a callee's onset and its caller's
TIMEOUT_SECONDS = (5.0, 30.0)


@dataclass
class Story:
    kind: str
    root: Node
    onset: int
    root_cause: str
    keywords: list[str]
    evidence: list[str]
    effect: str | None  # what direct callers see (callers.EFFECTS), None when the builder wrote their lines
    direct: dict[str, tuple[int, str]] = field(default_factory=dict)  # caller -> (onset, effect it passes up)
    anomalous: list[dict[str, Any]] = field(default_factory=list)
    also_accepted: list[str] = field(default_factory=list)
    trace: str = "error"  # how the root's spans change: error | slow
    notes: str = ""
    affected: dict[str, tuple[int, str]] = field(default_factory=dict)  # filled by propagate


def spread(world: World, start: float, end: float, n: int) -> list[float]:
    """``n`` sorted offsets in [start, end] (<= 0) with millisecond fractions."""
    end = min(end, -0.5)
    start = min(start, end)
    if n <= 0:
        return []
    first = round(world.rng.uniform(start, min(end, start + 20)), 3)  # a story shows from its start
    return [first] + sorted(round(world.rng.uniform(start, end), 3) for _ in range(n - 1))


def degrade(world: World, node: Node, start: float, effect: str, strength: float | None = None) -> None:
    """Apply ``effect`` to the node's timeline from offset ``start`` on."""
    rng, tl = world.rng, world.timelines[node.name]
    i0 = first_sample_at(start)
    for i in range(i0, SAMPLES):
        ramp = min(1.0, (i - i0 + 1) / 2)
        if effect in ("errors", "refused"):
            tl.err[i] = max(tl.err[i], ramp * (strength or rng.uniform(0.25, 0.6)))
        elif effect == "timeout":
            tl.latency[i] = max(tl.latency[i], ramp * (strength or rng.uniform(*TIMEOUT_SECONDS)) / 3)
            tl.err[i] = max(tl.err[i], ramp * rng.uniform(0.15, 0.4))
        elif effect == "slow":
            tl.latency[i] = tl.latency[i] * (1 + ramp * ((strength or rng.uniform(4, 10)) - 1))


def write_lines(world: World, caller: Node, callee: Node, effect: str, start: float, count: int) -> None:
    for at in spread(world, start, 0, count):
        for line in caller_lines(world, caller, callee, effect):
            world.log(caller, at, line.level, line.text, failure=line.failure, raw=line.raw)


def client_lines(world: World, root: Node, onset: int, texts: dict[str, tuple[str, Failure | None]],
                  effect: str, count: tuple[int, int] = (2, 3)) -> dict[str, tuple[int, str]]:
    """Every direct caller logs what its client library says, naming ``root`` by connection string."""
    rng = world.rng
    direct = {}
    for caller in world.graph.callers(root.name):
        c_onset = onset + rng.randint(10, 90)
        text, failure = texts.get(caller.tech) or texts["*"]
        conn = world.conn_string(caller, root)
        for at in spread(world, c_onset, 0, rng.randint(*count)):
            world.log(caller, at, "ERROR", f"{text} [{conn}]" if rng.random() < 0.6 else f"{text} (target {conn})",
                      failure=failure)
        degrade(world, caller, c_onset, effect)
        direct[caller.name] = (c_onset, effect)
    return direct


def saturate(world: World, caller: Node, callee: Node, onset: int) -> None:
    """A caller waiting on a slow callee fills its own pool or worker threads: a symptom that looks like a
    cause (a saturation series and the line its stack writes)."""
    rng = world.rng
    prefix = world.names.plain((2, 2))
    name = rng.choice((f"{prefix}_http_client_pool_pending_requests", f"{prefix}_worker_threads_busy_ratio",
                       f"{prefix}_executor_queue_length"))
    i0 = first_sample_at(onset)
    full = 1.0 if name.endswith("_ratio") else float(rng.randint(50, 400))
    world.series.append({"labels": {"__name__": name, "service": caller.name}, "step_seconds": 60,
                         "values": [round(full * rng.uniform(0.02, 0.2), 3) if i < i0 else full for i in range(SAMPLES)]})
    url = world.url(callee, "/")
    text = {"java": f"Timeout waiting for connection from pool (route: {url})",
            "python": f"Connection pool is full, discarding connection: {callee.name}. Connection pool size: 10",
            "node": f"request queue for {url} is full ({int(full)} waiting), rejecting",
            }.get(caller.tech, f"all workers busy ({int(full)} queued) waiting on {callee.name}")
    for at in spread(world, onset + rng.randint(10, 60), 0, rng.randint(1, 2)):
        world.log(caller, at, "WARN", text)


def propagate(world: World, story: Story, lines_per_caller: int) -> None:
    """Carry the fault up the graph: every direct caller, then each affected node's callers (most of them)."""
    rng, graph = world.rng, world.graph
    affected: dict[str, tuple[int, str]] = {}
    frontier: list[tuple[Node, Node, int, str]] = []  # (caller, callee, callee onset, effect seen by caller)
    for caller in graph.callers(story.root.name):
        if caller.name in story.direct:
            affected[caller.name] = story.direct[caller.name]
            continue
        if story.effect is None:
            continue
        frontier.append((caller, story.root, story.onset, story.effect))
    while frontier:
        caller, callee, callee_onset, effect = frontier.pop(0)
        if caller.name in affected or caller.name == story.root.name:
            continue
        onset = min(-30, callee_onset + rng.randint(*HOP_DELAY))
        degrade(world, caller, onset, effect)
        write_lines(world, caller, callee, effect, onset, lines_per_caller)
        if effect in ("timeout", "slow") and caller.role == "service" and rng.random() < 0.5:
            saturate(world, caller, callee, onset)
        affected[caller.name] = (onset, UPWARD[effect])
    # further up: callers of affected nodes
    queue = list(affected.items())
    while queue:
        name, (onset, effect) = queue.pop(0)
        for caller in graph.callers(name):
            if caller.name in affected or caller.name == story.root.name:
                continue
            if rng.random() < 0.15 and graph.callers(caller.name):
                continue  # absorbs it (retries, a fallback); its own callers stay healthy
            up = effect if effect != "errors" or rng.random() < 0.7 else "timeout"
            caller_onset = min(-20, onset + rng.randint(*HOP_DELAY))
            degrade(world, caller, caller_onset, up)
            write_lines(world, caller, graph.by_name[name], up, caller_onset, max(1, lines_per_caller - 1))
            affected[caller.name] = (caller_onset, UPWARD[up])
            queue.append((caller.name, affected[caller.name]))
    story.affected = affected
