"""The route a run took, drawn server-side as an SVG over its topology (no JS, no CDN).

Every node and edge of the topology is drawn; the nodes and transitions of the stored
``stategraph-v1`` orchestration trace are highlighted, numbered in order and annotated with
their retry attempts, so the console needs no network request to show where a run went.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from diagnosis.graph.aiops_topology import describe_aiops_topology
from diagnosis.graph.engine import END, START
from diagnosis.graph.topology import describe_diagnosis_topology
from diagnosis.graph.trace import TRACE_END
from traces.route_layout import Box, Layout, layered_layout

# Route keys shortened for display; the full keys stay in the edge's tooltip.
SHORT_LABELS = {"LOW_CONFID_with_binding": "LOW_CONFID+binding", "technical_retry": "retry"}
TERMINAL_LABELS = {START: "start", END: "end"}
FALLBACK_ROUTE = "fallback"


@lru_cache(maxsize=1)
def diagnosis_topology() -> dict[str, Any]:
    """The chat diagnosis graph's nodes and edges as plain data, from the compiled graph."""
    return describe_diagnosis_topology()


@lru_cache(maxsize=1)
def aiops_topology() -> dict[str, Any]:
    """The alert-analysis graph's nodes and edges as plain data, from the compiled graph."""
    return describe_aiops_topology()


def topology_for(flow: str) -> dict[str, Any]:
    """The topology a run of this agent flow ran on (``AI_OPS``: alert analysis; otherwise diagnosis)."""
    return aiops_topology() if flow == "AI_OPS" else diagnosis_topology()


def fallback_nodes(topology: dict[str, Any]) -> set[str]:
    """The nodes an edge labelled with the fallback route leads to (drawn amber when reached)."""
    return {e["target"] for e in topology["edges"] if e.get("label") == FALLBACK_ROUTE and e["target"] != END}


@dataclass
class Traversal:
    seq: int
    reason_code: str
    attempt: int


@dataclass
class RouteSummary:
    """What the stored trace says, keyed for drawing: node visits and edge traversals in order."""

    transitions: list[dict[str, Any]]
    visits: dict[str, int] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    traversals: dict[tuple[str, str], list[Traversal]] = field(default_factory=lambda: defaultdict(list))
    visited: set[str] = field(default_factory=set)
    final_node: str | None = None
    termination_reason: str = ""
    interrupted: bool = False
    degraded: bool = False
    evidence_retry_count: int = 0


def _node_id(name: Any) -> str:
    name = str(name)
    return END if name == TRACE_END else name


def _int(value: Any, default: int = 1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def summarise_route(trace: dict[str, Any] | None, entry: str = "planner") -> RouteSummary | None:
    """Visits, max attempts and numbered traversals of a parsed trace; None without a trace."""
    if not isinstance(trace, dict):
        return None
    raw = trace.get("transitions")
    transitions = [t for t in raw if isinstance(t, dict)] if isinstance(raw, list) else []
    summary = RouteSummary(transitions=transitions)
    if transitions:
        summary.visited.update({START, entry})
        summary.traversals[(START, _node_id(transitions[0].get("from", entry)))].append(Traversal(0, "start", 1))
    for seq, transition in enumerate(transitions, start=1):
        source, target = _node_id(transition.get("from")), _node_id(transition.get("to"))
        attempt = _int(transition.get("attempt"))
        summary.visited.update({source, target})
        summary.visits[source] = summary.visits.get(source, 0) + 1
        summary.attempts[source] = max(summary.attempts.get(source, 1), attempt)
        summary.traversals[(source, target)].append(
            Traversal(seq, str(transition.get("reason_code", "")), attempt)
        )
    final = trace.get("final_node")
    summary.final_node = _node_id(final) if final else None
    summary.termination_reason = str(trace.get("termination_reason") or "")
    summary.interrupted = summary.termination_reason.endswith("_interrupted")
    summary.degraded = trace.get("degraded") is True
    summary.evidence_retry_count = _int(trace.get("evidence_retry_count"), 0)
    return summary


# --------------------------------------------------------------------------- geometry


_DIRECTIONS = {"top": (0, -1), "bottom": (0, 1), "left": (-1, 0), "right": (1, 0)}


def _port_point(box: Box, side: str, slot: int, slots: int) -> tuple[float, float]:
    """A point on `side` of `box`, spread so several edges on one side do not share an arrowhead."""
    fraction = 0.5 if slots == 1 else 0.14 + 0.72 * slot / (slots - 1)
    if side == "top":
        return box.left + box.w * fraction, box.top
    if side == "bottom":
        return box.left + box.w * fraction, box.bottom
    if side == "left":
        return box.left, box.top + box.h * fraction
    return box.right, box.top + box.h * fraction


def _curve(p1, side1, p2, side2) -> tuple[str, tuple[float, float]]:
    """A cubic Bézier leaving and entering perpendicular to the sides; returns the path and its midpoint."""
    (x1, y1), (x2, y2) = p1, p2
    distance = ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5
    k = max(18.0, distance / 2.6)
    if side1 == side2 and side1 in ("left", "right"):  # a loop round: clear the boxes between its ends
        k = max(k, abs(x1 - x2) / 2 + 50)
    d1, d2 = _DIRECTIONS[side1], _DIRECTIONS[side2]
    c1 = (x1 + d1[0] * k, y1 + d1[1] * k)
    c2 = (x2 + d2[0] * k, y2 + d2[1] * k)
    mid = (
        0.125 * x1 + 0.375 * c1[0] + 0.375 * c2[0] + 0.125 * x2,
        0.125 * y1 + 0.375 * c1[1] + 0.375 * c2[1] + 0.125 * y2,
    )
    if abs(x1 - x2) < 0.5 or abs(y1 - y2) < 0.5:
        return f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}", ((x1 + x2) / 2, (y1 + y2) / 2)
    path = f"M{x1:.1f},{y1:.1f} C{c1[0]:.1f},{c1[1]:.1f} {c2[0]:.1f},{c2[1]:.1f} {x2:.1f},{y2:.1f}"
    return path, mid


def _self_loop(box: Box) -> tuple[str, tuple[float, float]]:
    """A small loop over the node's top-right corner (technical retries)."""
    x1, y1 = box.right - 34, box.top
    x2, y2 = box.right, box.top + 9
    path = f"M{x1:.1f},{y1:.1f} C{x1 + 2:.1f},{y1 - 34:.1f} {x2 + 40:.1f},{y2 - 4:.1f} {x2:.1f},{y2:.1f}"
    return path, (box.right - 20, box.top - 30)


# --------------------------------------------------------------------------- drawing


def _edge_state(source: str, target: str, route: RouteSummary | None, fallbacks: set[str]) -> str:
    if route is None or not route.traversals.get((source, target)):
        return "idle"
    return "fallback" if target in fallbacks or source in fallbacks else "visited"


def _node_state(node: str, route: RouteSummary | None, fallbacks: set[str]) -> str:
    if route is None or node not in route.visited:
        return "idle"
    if route.interrupted and node == route.final_node:
        return "interrupted"
    return "fallback" if node in fallbacks else "visited"


def _pill(x: float, y: float, text: str, css: str) -> str:
    width = 7 + 6.2 * len(text)
    return (
        f'<g class="{css}"><rect x="{x - width / 2:.1f}" y="{y - 8:.1f}" width="{width:.1f}" height="16" rx="8"/>'
        f'<text x="{x:.1f}" y="{y + 3.6:.1f}" text-anchor="middle">{escape(text)}</text></g>'
    )


def _traversal_text(items: list[Traversal]) -> str:
    parts = []
    for item in items:
        parts.append(f"#{item.seq}" + (f" try {item.attempt}" if item.attempt > 1 else ""))
    return " ".join(parts)


EdgeKey = tuple[str, str]


def render_route_svg(trace: dict[str, Any] | None, topology: dict[str, Any] | None = None) -> SafeString:
    """The topology with `trace`'s route highlighted; with no trace every node is drawn idle."""
    topology = topology or diagnosis_topology()
    route = summarise_route(trace, topology["entry"])
    fallbacks = fallback_nodes(topology)
    kinds, node_ids, merged = _drawn_graph(topology, route)
    layout = layered_layout({
        "nodes": [{"id": node, "kind": kinds[node]} for node in node_ids],
        "edges": [{"source": s, "target": t} for s, t in merged],
    })
    sides, points = _edge_ends(merged, layout)
    edge_svg: list[str] = []
    label_svg: list[str] = []
    for (source, target), info in merged.items():
        state = _edge_state(source, target, route, fallbacks)
        if source == target:
            path, label_at = _self_loop(layout.boxes[source])
        else:
            side1, side2 = sides[(source, target)]
            path, label_at = _curve(points[((source, target), "out")], side1, points[((source, target), "in")], side2)
        traversals = route.traversals.get((source, target), []) if route else []
        edge_svg.append(_edge_group(source, target, info, state, path, traversals))
        label_svg.extend(_edge_labels(source, target, info, state, label_at, traversals, layout.center_x))
    node_svg = [_node_group(node, layout.boxes[node], route, fallbacks) for node in node_ids]
    return _svg_document(topology, route, layout, edge_svg, node_svg, label_svg)


def _drawn_graph(
    topology: dict[str, Any], route: RouteSummary | None,
) -> tuple[dict[str, str], list[str], dict[EdgeKey, dict[str, Any]]]:
    """The nodes (kind by id, ids in order) and edges to draw: the topology's, with parallel edges (two
    route keys to one target) merged into one drawn edge with both labels, and whatever node or hop the
    trace names that the topology does not have (an older graph)."""
    kinds = {item["id"]: item["kind"] for item in topology["nodes"]}
    node_ids = [item["id"] for item in topology["nodes"]]
    merged: dict[EdgeKey, dict[str, Any]] = {}
    for edge in topology["edges"]:
        key = (edge["source"], edge["target"])
        entry = merged.setdefault(key, {"labels": [], "conditional": False})
        if edge.get("label"):
            entry["labels"].append(str(edge["label"]))
        entry["conditional"] = entry["conditional"] or bool(edge.get("conditional"))
    if route is not None:
        for source, target in route.traversals:
            for node in (source, target):
                if node not in kinds:
                    kinds[node] = "node"
                    node_ids.append(node)
            merged.setdefault((source, target), {"labels": [], "conditional": False, "unknown": True})
    return kinds, node_ids, merged


def _edge_ends(
    merged: dict[EdgeKey, dict[str, Any]], layout: Layout,
) -> tuple[dict[EdgeKey, tuple[str, str]], dict[tuple[EdgeKey, str], tuple[float, float]]]:
    """The sides each edge leaves and enters by, and its two end points: the ends sharing one side of one
    node are spread along it, ordered by where the other end lies."""
    boxes = layout.boxes
    ends: dict[tuple[str, str], list[tuple[float, EdgeKey, str]]] = defaultdict(list)
    sides: dict[EdgeKey, tuple[str, str]] = {}
    for source, target in merged:
        if source == target:
            continue
        side1, side2 = layout.ports(source, target)
        sides[(source, target)] = (side1, side2)
        s_box, t_box = boxes[source], boxes[target]
        order1 = t_box.cx if side1 in ("top", "bottom") else t_box.cy
        order2 = s_box.cx if side2 in ("top", "bottom") else s_box.cy
        ends[(source, side1)].append((order1, (source, target), "out"))
        ends[(target, side2)].append((order2, (source, target), "in"))
    points: dict[tuple[EdgeKey, str], tuple[float, float]] = {}
    for (node, side), items in ends.items():
        items.sort(key=lambda item: item[0])
        for slot, (_, key, direction) in enumerate(items):
            points[(key, direction)] = _port_point(boxes[node], side, slot, len(items))
    return sides, points


def _edge_group(source: str, target: str, info: dict[str, Any], state: str, path: str,
                traversals: list[Traversal]) -> str:
    """One drawn edge: its path with an arrowhead, its classes, and a tooltip listing its traversals."""
    classes = ["edge", state]
    if info["conditional"]:
        classes.append("conditional")
    if info.get("unknown"):
        classes.append("unknown")
    title = f"{source} → {target}"
    if info["labels"]:
        title += f" [{' | '.join(info['labels'])}]"
    for item in traversals:
        title += f"\n#{item.seq}: {item.reason_code} (attempt {item.attempt})"
    marker = {"idle": "arrow-idle", "visited": "arrow-visited", "fallback": "arrow-fallback"}[state]
    return (
        f'<g class="{" ".join(classes)}" data-source="{escape(source)}" data-target="{escape(target)}" '
        f'data-traversals="{len(traversals)}" data-seq="{",".join(str(t.seq) for t in traversals if t.seq)}">'
        f"<title>{escape(title)}</title>"
        f'<path d="{path}" marker-end="url(#{marker})"/></g>'
    )


def _edge_labels(source: str, target: str, info: dict[str, Any], state: str, label_at: tuple[float, float],
                 traversals: list[Traversal], center_x: float) -> list[str]:
    """An edge's route keys beside its midpoint, and a pill numbering its traversals."""
    labels = []
    label = " | ".join(SHORT_LABELS.get(text, text) for text in info["labels"] if text != "fallback")
    lx, ly = label_at
    on_main_line = source != target and abs(lx - center_x) < 2
    if label:
        anchor_x = lx + 8 if on_main_line else lx
        text_anchor = "start" if on_main_line else "middle"
        labels.append(
            f'<text class="edge-label {state}" x="{anchor_x:.1f}" y="{ly + 3.5:.1f}" '
            f'text-anchor="{text_anchor}">{escape(label)}</text>'
        )
    numbered = [t for t in traversals if t.seq]
    if numbered:
        text = _traversal_text(numbered)
        width = 7 + 6.2 * len(text)
        if source == target:  # beside the loop's label, above the loop
            px, py = lx + 20 + width / 2, ly
        elif on_main_line:
            px, py = lx - 8 - width / 2, ly
        else:
            px, py = lx, ly + 15 if label else ly
        labels.append(_pill(px, py, text, f"seq {state}"))
    return labels


def _node_group(node: str, box: Box, route: RouteSummary | None, fallbacks: set[str]) -> str:
    """One drawn node: a pill for start and end, else a box with its name and how often it ran."""
    state = _node_state(node, route, fallbacks)
    classes = ["node", *([box.kind] if box.kind != "node" else []), state]
    if route is not None and node == route.final_node:
        classes.append("final")
    visits = route.visits.get(node, 0) if route else 0
    attempt = route.attempts.get(node, 1) if route else 1
    title = node if box.kind == "node" else TERMINAL_LABELS.get(node, node)
    attrs = (
        f'class="{" ".join(classes)}" data-node="{escape(node)}" data-visits="{visits}" '
        f'data-max-attempt="{attempt}"'
    )
    tooltip = title
    if route is not None and node == route.final_node:
        tooltip += f"\nfinal node: {route.termination_reason}"
    if box.kind in ("start", "end"):
        return (
            f"<g {attrs}><title>{escape(tooltip)}</title>"
            f'<rect x="{box.left:.1f}" y="{box.top:.1f}" width="{box.w}" height="{box.h}" rx="{box.h / 2}"/>'
            f'<text class="name" x="{box.cx:.1f}" y="{box.cy + 4:.1f}" text-anchor="middle">'
            f"{escape(title)}</text></g>"
        )
    if state == "idle":
        sub = "not reached" if route is not None else ""
    elif state == "interrupted":
        sub = "interrupted"
    else:
        sub = f"{visits} run{'s' if visits != 1 else ''}" if visits else "reached"
        if attempt > 1:
            sub += f" · attempt {attempt}"
    name_y = box.cy + (-2 if sub else 4.5)
    parts = [
        f"<g {attrs}><title>{escape(tooltip)}</title>",
        f'<rect x="{box.left:.1f}" y="{box.top:.1f}" width="{box.w}" height="{box.h}" rx="9"/>',
        f'<text class="name" x="{box.cx:.1f}" y="{name_y:.1f}" text-anchor="middle">{escape(title)}</text>',
    ]
    if sub:
        parts.append(f'<text class="sub" x="{box.cx:.1f}" y="{box.cy + 13:.1f}" text-anchor="middle">'
                     f"{escape(sub)}</text>")
    parts.append("</g>")
    return "".join(parts)


def _svg_document(topology: dict[str, Any], route: RouteSummary | None, layout: Layout,
                  edge_svg: list[str], node_svg: list[str], label_svg: list[str]) -> SafeString:
    """The whole SVG: caption, arrowheads, style, then edges, nodes and labels (labels on top)."""
    caption = str(topology.get("title") or "Topology")
    if route is not None:
        ending = route.termination_reason or "no termination reason"
        caption += f", route ending at {route.final_node or '?'} ({ending})"
    svg = (
        f'<svg class="route-svg" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {layout.width:.0f} {layout.height:.0f}" '
        f'style="--route-width:{layout.width:.0f}px" role="img" aria-label="{escape(caption)}" data-has-trace="{"true" if route else "false"}">'
        f"<title>{escape(caption)}</title>"
        "<defs>"
        + "".join(
            f'<marker id="arrow-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" '
            f'markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" class="arrowhead {name}"/></marker>'
            for name in ("idle", "visited", "fallback")
        )
        + "</defs>"
        + f"<style>{SVG_STYLE}</style>"
        + '<g class="edges">' + "".join(edge_svg) + "</g>"
        + '<g class="nodes">' + "".join(node_svg) + "</g>"
        + '<g class="labels">' + "".join(label_svg) + "</g>"
        + "</svg>"
    )
    return mark_safe(svg)  # every interpolated name and label above is escaped


SVG_STYLE = """
.route-svg{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
.route-svg .edge path{fill:none;stroke:#c3c9d4;stroke-width:1.3}
.route-svg .edge.conditional.idle path{stroke-dasharray:4 3}
.route-svg .edge.visited path{stroke:#2563eb;stroke-width:2.6}
.route-svg .edge.fallback path{stroke:#d97706;stroke-width:2.6}
.route-svg .edge.unknown path{stroke-dasharray:2 2}
.route-svg .arrowhead.idle{fill:#c3c9d4}
.route-svg .arrowhead.visited{fill:#2563eb}
.route-svg .arrowhead.fallback{fill:#d97706}
.route-svg .node rect{fill:#fff;stroke:#cfd5df;stroke-width:1.2}
.route-svg .node .name{font-size:13px;font-weight:600;fill:#8a93a3}
.route-svg .node .sub{font-size:11px;fill:#a0a8b6}
.route-svg .node.start rect,.route-svg .node.end rect{fill:#f3f4f6}
.route-svg .node.start .name,.route-svg .node.end .name{font-size:11px;text-transform:uppercase;letter-spacing:.06em}
.route-svg .node.visited rect{fill:#eff6ff;stroke:#2563eb;stroke-width:1.8}
.route-svg .node.visited .name{fill:#1e3a8a}
.route-svg .node.visited .sub{fill:#1d4ed8}
.route-svg .node.fallback rect{fill:#fffbeb;stroke:#d97706;stroke-width:1.8}
.route-svg .node.fallback .name{fill:#92400e}
.route-svg .node.fallback .sub{fill:#b45309}
.route-svg .node.interrupted rect{fill:#fef2f2;stroke:#dc2626;stroke-width:1.8}
.route-svg .node.interrupted .name{fill:#991b1b}
.route-svg .node.interrupted .sub{fill:#b91c1c}
.route-svg .node.final rect{stroke-width:3}
.route-svg .edge-label{font-size:11px;fill:#8a93a3;paint-order:stroke;stroke:#fff;stroke-width:3px}
.route-svg .edge-label.visited{fill:#1d4ed8}
.route-svg .edge-label.fallback{fill:#b45309}
.route-svg .seq rect{fill:#2563eb}
.route-svg .seq.fallback rect{fill:#d97706}
.route-svg .seq text{font-size:10px;font-weight:600;fill:#fff}
"""
