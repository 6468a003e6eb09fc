"""A layered layout of a compiled graph's topology, computed from its nodes and edges alone.

No node name is known here: a node or an edge added to a topology is placed by the same rules.

1. **Spine.** From START, follow each node's first forward route (the first route of its mapping, so
   a topology lists its main route first) until END; the spine runs down the middle column.
2. **Ranks.** Back edges (found by a depth-first walk that tries routes in mapping order) and
   self-loops are set aside; every node's rank is then its longest path from START, so every
   forward edge points down. END takes the last rank.
3. **Columns.** A node off the spine goes to the side column (right, then left, then further out)
   whose cells between its nearest neighbour's rank and its own are emptiest, so long edges into
   a shared node (a fallback) do not cross other boxes.
4. **Ports.** Forward edges leave downward or sideways toward their target; back edges leave upward
   and enter from the side that faces their source; self-loops are drawn by the renderer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NODE_W, NODE_H = 150, 44
SIDE_W = 132
TERMINAL_W, TERMINAL_H = 72, 28
COLUMN = 200  # distance between column centres
ROW = 82
TOP = 26
MARGIN = 12
PORT_GAP = 14  # vertical room per edge ending on one side of a box


@dataclass
class Box:
    node: str
    kind: str  # start | end | node
    cx: float
    cy: float
    w: float
    h: float
    rank: int = 0
    column: int = 0

    # The four edges, one line of arithmetic each.
    left = property(lambda self: self.cx - self.w / 2)
    right = property(lambda self: self.cx + self.w / 2)
    top = property(lambda self: self.cy - self.h / 2)
    bottom = property(lambda self: self.cy + self.h / 2)


@dataclass
class Layout:
    boxes: dict[str, Box]
    width: float
    height: float
    center_x: float
    spine: tuple[str, ...]
    back_edges: frozenset[tuple[str, str]]

    def ports(self, source: str, target: str) -> tuple[str, str]:
        """The sides an edge leaves and enters by (never called for a self-loop)."""
        s, t = self.boxes[source], self.boxes[target]
        back = (source, target) in self.back_edges or t.rank < s.rank
        toward = "right" if t.column > s.column else "left"
        facing = "left" if t.column > s.column else "right"  # the side of the target that faces the source
        if s.column == t.column:
            if back or t.rank == s.rank:  # up the same column: out and back in on its outer side
                side = "left" if s.column < 0 else "right"
                return side, side
            return "bottom", "top"
        if t.rank == s.rank:
            return toward, facing
        outward = abs(t.column) > abs(s.column)
        if back:
            if outward:
                return toward, "bottom"
            between = any(b.column == s.column and t.rank < b.rank < s.rank for b in self.boxes.values())
            if between:  # a box above in its own column: leave by the outer side and loop round it
                return ("right" if s.column > 0 else "left"), facing
            return "top", facing
        return (toward, "top") if outward else ("bottom", facing)


def _outgoing(node_ids: Iterable[str], edges: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {node: [] for node in node_ids}
    for edge in edges:
        targets = out.setdefault(edge["source"], [])
        if edge["target"] not in targets:
            targets.append(edge["target"])
        out.setdefault(edge["target"], [])
    return out


def _back_edges(start: str, out: Mapping[str, list[str]]) -> set[tuple[str, str]]:
    """Edges into a node still on the depth-first stack (routes tried in mapping order)."""
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str) -> None:
        state[node] = 1
        for nxt in out.get(node, ()):
            if nxt == node:
                continue
            if state.get(nxt) == 1:
                back.add((node, nxt))
            elif nxt not in state:
                visit(nxt)
        state[node] = 2

    visit(start)
    for node in out:  # nodes the entry cannot reach (a trace's unknown hop) still get ranked
        if node not in state:
            visit(node)
    return back


def _ranks(order: list[str], out: Mapping[str, list[str]], back: set[tuple[str, str]], end: str) -> dict[str, int]:
    forward = {n: [t for t in out.get(n, ()) if t != n and (n, t) not in back] for n in order}
    indegree = {n: 0 for n in order}
    for n in order:
        for t in forward[n]:
            indegree[t] += 1
    rank = {n: 0 for n in order}
    ready = [n for n in order if indegree[n] == 0]
    while ready:
        node = ready.pop(0)
        for t in forward[node]:
            rank[t] = max(rank[t], rank[node] + 1)
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    if end in rank:
        rank[end] = max(rank.values()) if len(rank) == 1 else max(r for n, r in rank.items() if n != end) + 1
    return rank


def _spine(start: str, end: str, out: Mapping[str, list[str]], back: set[tuple[str, str]]) -> list[str]:
    spine, node = [start], start
    while node != end:
        nxt = next((t for t in out.get(node, ()) if t != node and (node, t) not in back and t not in spine), None)
        if nxt is None:
            break
        spine.append(nxt)
        node = nxt
    return spine


def layered_layout(topology: Mapping[str, Any]) -> Layout:
    """Boxes for every node of ``topology`` (``CompiledGraph.describe()``'s shape)."""
    kinds = {item["id"]: item["kind"] for item in topology["nodes"]}
    order = [item["id"] for item in topology["nodes"]]
    out = _outgoing(order, topology["edges"])
    order += [n for n in out if n not in kinds]
    start = next((n for n in order if kinds.get(n) == "start"), order[0])
    end = next((n for n in order if kinds.get(n) == "end"), order[-1])
    back = _back_edges(start, out)
    rank = _ranks(order, out, back, end)
    spine = _spine(start, end, out, back)
    column = _columns(order, out, rank, spine)
    boxes, center_x = _boxes(order, kinds, rank, column)
    layout = Layout(boxes, 0, 0, center_x, tuple(spine), frozenset(back))
    _grow_for_arrowheads(layout, out)
    layout.width = max(b.right for b in boxes.values()) + MARGIN + 70  # room for a self-loop and its order badge
    layout.height = max(b.bottom for b in boxes.values()) + 30
    return layout


def _columns(order: list[str], out: Mapping[str, list[str]], rank: Mapping[str, int],
             spine: list[str]) -> dict[str, int]:
    """The spine in column 0; every other node, by rank, in the side column whose cells between its
    nearest neighbour's rank and its own are emptiest (then the nearest to its neighbours)."""
    incoming: dict[str, list[str]] = {n: [] for n in order}
    for src, targets in out.items():
        for t in targets:
            if t != src:
                incoming[t].append(src)

    column: dict[str, int] = {n: 0 for n in spine}
    occupied: set[tuple[int, int]] = {(0, rank[n]) for n in spine}
    side_order = [1, -1, 2, -2, 3, -3]
    for node in sorted((n for n in order if n not in column), key=lambda n: (rank[n], order.index(n))):
        neighbours = [m for m in incoming[node] + out.get(node, []) if m in column and m != node]
        low = min([rank[m] for m in neighbours] + [rank[node]])
        high = max([rank[m] for m in neighbours] + [rank[node]])
        own = {(column[m], rank[m]) for m in neighbours}

        def cost(col: int) -> tuple[int, int, int]:
            blocked = (col, rank[node]) in occupied
            crossings = sum(1 for r in range(low, high + 1) if (col, r) in occupied and (col, r) not in own)
            distance = sum(abs(col - column[m]) for m in neighbours)
            return (1 if blocked else 0, crossings, distance)

        best = min(side_order, key=lambda col: (cost(col), side_order.index(col)))
        column[node] = best
        occupied.add((best, rank[node]))
    return column


def _boxes(order: list[str], kinds: Mapping[str, str], rank: Mapping[str, int],
           column: Mapping[str, int]) -> tuple[dict[str, Box], float]:
    """A box per node at its rank and column, and the x of the middle column."""
    left_col = min(column.values())
    center_x = MARGIN + max(NODE_W / 2, -left_col * COLUMN + SIDE_W / 2)
    boxes: dict[str, Box] = {}
    for node in order:
        kind = kinds.get(node, "node")
        if kind in ("start", "end"):
            w, h = TERMINAL_W, TERMINAL_H
        elif column[node] == 0:
            w, h = NODE_W, NODE_H
        else:
            w, h = SIDE_W, NODE_H
        boxes[node] = Box(node, kind, center_x + column[node] * COLUMN, TOP + rank[node] * ROW, w, h,
                          rank[node], column[node])
    return boxes, center_x


def _grow_for_arrowheads(layout: Layout, out: Mapping[str, list[str]]) -> None:
    """Room for the arrowheads: a box grows with the edges that end on one of its sides."""
    ends_per_side: dict[str, int] = {}
    for src, targets in out.items():
        for t in targets:
            if t != src:
                side = layout.ports(src, t)[1]
                if side in ("left", "right"):
                    ends_per_side[f"{t}:{side}"] = ends_per_side.get(f"{t}:{side}", 0) + 1
    for key, count in ends_per_side.items():
        node = key.rsplit(":", 1)[0]
        box = layout.boxes[node]
        if box.kind == "node":
            box.h = max(box.h, PORT_GAP * (count + 1))
