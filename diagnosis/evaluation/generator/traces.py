"""``traces.json`` of a generated incident: one healthy trace shape before the onset and one broken shape
after it, along a call path that ends at the root cause (or at the call into it)."""

from __future__ import annotations

from typing import Any

from diagnosis.evaluation.generator.callers import api_path
from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.story import Story
from diagnosis.evaluation.generator.world import World

MAX_HOPS = 3  # spans nest two levels a hop; the format allows 8


def _path(world: World, story: Story) -> list[Node]:
    """Affected nodes from the highest reachable one down to the root (or to the root's caller for a leaf)."""
    allowed = set(story.affected) | {story.root.name}
    path = [story.root]
    while len(path) <= MAX_HOPS:
        callers = [c for c in world.graph.callers(path[0].name) if c.name in allowed and c not in path]
        if not callers:
            break
        path.insert(0, callers[0])
    return path


def _leaf_client(world: World, caller: Node, leaf: Node, duration: float, broken: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"peer.service": leaf.name}
    if leaf.role == "datastore":
        attrs |= {"db.system": leaf.tech if leaf.tech != "postgres" else "postgresql", "db.namespace": leaf.database}
    elif leaf.role == "external":
        attrs |= {"server.address": leaf.host, "server.port": 443}
    else:
        attrs |= {"server.address": leaf.name, "server.port": leaf.port}
    span = {"service": caller.name, "operation": f"{leaf.name} {'query' if leaf.role == 'datastore' else 'call'}",
            "kind": "client", "start_ms": 1, "duration_ms": round(duration, 1), "attributes": attrs}
    if broken == "error":
        span |= {"status": "error", "status_message": "call failed"}
    elif broken == "slow":
        span["duration_ms"] = round(duration * 8, 1)
    return span


def _shape(world: World, story: Story, path: list[Node], broken: bool, base: dict[str, float]) -> dict[str, Any]:
    root = story.root
    mode = story.trace if broken else None

    def build(i: int) -> dict[str, Any]:
        node = path[i]
        own = base[node.name]
        children: list[dict[str, Any]] = []
        if i + 1 < len(path):
            nxt = path[i + 1]
            inner = build(i + 1)
            children.append({"service": node.name, "operation": f"{'POST' if i % 2 else 'GET'} {api_path(world, nxt)}",
                             "kind": "client", "start_ms": 1, "duration_ms": round(inner["duration_ms"] + 1.5, 1),
                             "attributes": {"peer.service": nxt.name, "server.port": nxt.port},
                             **({"status": "error", "status_message": "upstream failed"}
                                if inner.get("status") == "error" else {}),
                             "children": [inner]})
        elif root.is_leaf and node is not root:
            children.append(_leaf_client(world, node, root, base[root.name], mode))
        # a slow root's own calls are left uninstrumented: its slowness is its own time, not a callee's
        quiet = node is root and story.trace == "slow"
        for leaf in [] if quiet else world.graph.callees(node.name):
            if leaf.is_leaf and leaf is not root and len(children) < 3:
                span = _leaf_client(world, node, leaf, base[leaf.name], None)
                if mode == "error" and node is root:
                    span["attributes"].pop("peer.service")  # the root's own call fails before reaching the peer
                    span |= {"status": "error", "status_message": "connection not established"}
                children.append(span)
        total = own + sum(c["duration_ms"] for c in children)
        if mode == "slow" and node is root:
            total *= 6
        kind = "consumer" if story.kind == "data.poison_message" and node is root else "server"
        span = {"service": node.name, "operation": f"GET {api_path(world, node)}" if kind == "server"
                else f"process {node.name}", "kind": kind, "start_ms": 1 if i else 0, "duration_ms": round(total, 1),
                "attributes": {"http.route": api_path(world, node)} if kind == "server" else {"messaging.system": "kafka"},
                "children": children}
        failed = any(c.get("status") == "error" for c in children)
        if (mode == "error" and node is root) or (broken and failed):
            span |= {"status": "error", "status_message": "request failed"}
        return span

    return build(0)


VARIANTS = 5  # durations cycle over this many occurrences, as real requests vary


def _merge(shapes: list[dict[str, Any]]) -> dict[str, Any]:
    """One span tree whose ``duration_ms`` lists the durations of the same span across ``shapes``."""
    first = dict(shapes[0])
    first["duration_ms"] = [s["duration_ms"] for s in shapes]
    if first.get("children"):
        first["children"] = [_merge([s["children"][i] for s in shapes]) for i in range(len(first["children"]))]
    return first


def _varied(world: World, story: Story, path: list[Node], broken: bool, base: dict[str, float]) -> dict[str, Any]:
    rng = world.rng
    return _merge([_shape(world, story, path, broken, {k: v * rng.uniform(0.75, 1.3) for k, v in base.items()})
                   for _ in range(VARIANTS)])


def render_traces(world: World, story: Story | None) -> dict[str, Any]:
    """Two shapes around the story's onset; a world where nothing is wrong gets one healthy shape."""
    rng = world.rng
    base = {n.name: rng.uniform(2, 25) for n in world.graph.nodes}
    every = rng.choice((60, 90, 120, 180))
    if story is None:
        top = world.graph.of_role("frontend")[0]
        path = [top]
        while len(path) <= MAX_HOPS:
            nxt = [c for c in world.graph.callees(path[-1].name) if not c.is_leaf]
            if not nxt:
                break
            path.append(nxt[0])
        calm = Story("none", path[-1], 0, "", [], [], None)
        return {"traces": [{"name": "requests served normally", "from_offset_seconds": -3540, "to_offset_seconds": 0,
                            "every_seconds": every, "root": _varied(world, calm, path, False, base)}]}
    path = _path(world, story)
    healthy = {"name": "requests served normally", "from_offset_seconds": -3540,
               "to_offset_seconds": story.onset - 1, "every_seconds": every, "root": _varied(world, story, path, False, base)}
    broken = {"name": "requests after the onset", "from_offset_seconds": story.onset, "to_offset_seconds": 0,
              "every_seconds": every, "root": _varied(world, story, path, True, base)}
    return {"traces": [healthy, broken]}
