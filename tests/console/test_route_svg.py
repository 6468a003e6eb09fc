"""The route drawn over the diagnosis topology: every node and edge, the visited ones marked in order
with their retry attempts, for a happy path, an evidence-retry path and a fallback path."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from diagnosis.graph.engine import END, START
from diagnosis.graph.state import NodeName
from diagnosis.graph.topology import COMPOSER_ROUTES, build_diagnosis_topology
from traces.route_svg import aiops_topology, diagnosis_topology, render_route_svg
from tests.console.scenarios import EVIDENCE_RETRY_ROUTE, FALLBACK_ROUTE, HAPPY_ROUTE, orchestration_trace

SVG = "{http://www.w3.org/2000/svg}"


class Drawing:
    """The rendered SVG parsed, with lookups by node and by edge."""

    def __init__(self, trace, topology=None):
        self.markup = str(render_route_svg(trace, topology))
        self.root = ET.fromstring(self.markup)
        groups = list(self.root.iter(f"{SVG}g"))
        self.nodes = {g.get("data-node"): g for g in groups if "node" in (g.get("class") or "").split()}
        self.edges = {(g.get("data-source"), g.get("data-target")): g
                      for g in groups if "edge" in (g.get("class") or "").split()}

    def node_classes(self, name):
        return set(self.nodes[name].get("class").split())

    def edge_classes(self, source, target):
        return set(self.edges[(source, target)].get("class").split())

    def visited_nodes(self):
        return {name for name, g in self.nodes.items() if {"visited", "fallback", "interrupted"} & set(g.get("class").split())}

    def visited_edges(self):
        return {key for key, g in self.edges.items() if {"visited", "fallback"} & set(g.get("class").split())}

    def box(self, name):
        rect = self.nodes[name].find(f"{SVG}rect")
        x, y = float(rect.get("x")), float(rect.get("y"))
        return x, y, x + float(rect.get("width")), y + float(rect.get("height"))

    def assert_boxes_apart_and_inside(self):
        _, _, width, height = map(float, self.root.get("viewBox").split())
        boxes = {name: self.box(name) for name in self.nodes}
        for name, (x1, y1, x2, y2) in boxes.items():
            assert 0 <= x1 and x2 <= width and 0 <= y1 and y2 <= height, name
        names = sorted(boxes)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                ax1, ay1, ax2, ay2 = boxes[a]
                bx1, by1, bx2, by2 = boxes[b]
                assert ax2 <= bx1 or bx2 <= ax1 or ay2 <= by1 or by2 <= ay1, f"{a} overlaps {b}"

    def texts(self, name):
        return [t.text for t in self.nodes[name].iter(f"{SVG}text")]

    def pills(self):
        return [t.text for g in self.root.iter(f"{SVG}g") if "seq" in (g.get("class") or "").split()
                for t in g.iter(f"{SVG}text")]


def test_every_node_and_edge_of_the_topology_is_drawn_even_without_a_trace():
    topology = diagnosis_topology()
    drawing = Drawing(None)
    assert set(drawing.nodes) == {n["id"] for n in topology["nodes"]}
    assert set(drawing.edges) == {(e["source"], e["target"]) for e in topology["edges"]}
    assert drawing.visited_nodes() == set() and drawing.visited_edges() == set()
    assert drawing.root.get("data-has-trace") == "false"


def test_a_happy_path_marks_the_straight_route_and_nothing_else():
    drawing = Drawing(orchestration_trace(HAPPY_ROUTE))
    assert drawing.visited_nodes() == {START, "planner", "executor", "gatekeeper", "verified_input", "verifier",
                                       "composer", END}
    assert drawing.visited_edges() == {(START, "planner")} | {(a, END if b == "END" else b) for a, b, _, _ in HAPPY_ROUTE}
    for idle in ("evidence_retry", "fallback"):
        assert "idle" in drawing.node_classes(idle) and "not reached" in drawing.texts(idle)
    assert "final" in drawing.node_classes("composer")
    assert drawing.edges[("composer", END)].get("data-seq") == "6"
    assert drawing.pills() == ["#1", "#2", "#3", "#4", "#5", "#6"]
    assert "1 run" in drawing.texts("planner")


def test_an_evidence_retry_path_marks_the_loop_and_numbers_each_pass():
    drawing = Drawing(orchestration_trace(EVIDENCE_RETRY_ROUTE, evidence_retry_count=1))
    assert {("verifier", "evidence_retry"), ("evidence_retry", "planner")} <= drawing.visited_edges()
    assert "visited" in drawing.node_classes("evidence_retry")
    assert drawing.nodes["planner"].get("data-visits") == "2"
    assert "2 runs" in drawing.texts("planner")
    # the second pass goes down the same edges: each carries both transition numbers
    assert drawing.edges[("planner", "executor")].get("data-traversals") == "2"
    assert drawing.edges[("planner", "executor")].get("data-seq") == "1,7"
    assert "#1 #7" in drawing.pills()
    # the verifier's technical retry, then its exhausted second attempt into the fallback
    assert drawing.edges[("verifier", "verifier")].get("data-seq") == "11"
    assert drawing.nodes["verifier"].get("data-max-attempt") == "2"
    assert "3 runs · attempt 2" in drawing.texts("verifier")
    assert "#12 try 2" in drawing.pills()
    assert "fallback" in drawing.edge_classes("verifier", "fallback")
    assert "final" in drawing.node_classes("fallback")
    assert "idle" in drawing.node_classes("composer")


def test_a_fallback_path_marks_the_planner_retry_and_the_fallback_in_amber():
    drawing = Drawing(orchestration_trace(FALLBACK_ROUTE))
    assert drawing.visited_edges() == {(START, "planner"), ("planner", "planner"), ("planner", "executor"),
                                       ("executor", "gatekeeper"), ("gatekeeper", "fallback"), ("fallback", END)}
    assert "visited" in drawing.edge_classes("planner", "planner")
    assert drawing.nodes["planner"].get("data-max-attempt") == "2"
    assert "2 runs · attempt 2" in drawing.texts("planner")
    assert "#2 try 2" in drawing.pills()  # planner → executor on its second attempt
    assert {"fallback", "final"} <= drawing.node_classes("fallback")
    assert "fallback" in drawing.edge_classes("gatekeeper", "fallback")
    assert {"verified_input", "verifier", "composer", "evidence_retry"}.isdisjoint(drawing.visited_nodes())
    titles = [t.text for t in drawing.edges[("gatekeeper", "fallback")].iter(f"{SVG}title")]
    assert "#4: gatekeeper_reject (attempt 1)" in titles[0]


def test_an_interrupted_run_marks_the_node_it_stopped_at():
    trace = orchestration_trace(HAPPY_ROUTE[:3])
    trace.update(final_node="verified_input", termination_reason="verified_input_interrupted")
    drawing = Drawing(trace)
    assert "interrupted" in drawing.node_classes("verified_input")
    assert "interrupted" in drawing.texts("verified_input")


def test_a_node_the_topology_does_not_know_is_still_drawn_and_names_are_escaped():
    trace = orchestration_trace([("planner", "<script>x</script>", "completed", 1)])
    drawing = Drawing(trace)  # parsing would fail on an unescaped tag
    assert "<script>x</script>" in drawing.nodes
    assert "unknown" in drawing.edge_classes("planner", "<script>x</script>")
    assert "<script>" not in drawing.markup


def test_the_drawing_is_self_contained():
    markup = str(render_route_svg(orchestration_trace(EVIDENCE_RETRY_ROUTE)))
    assert "href=" not in markup and "@import" not in markup and "url(http" not in markup


def test_the_layout_keeps_every_box_apart_and_inside_the_drawing():
    Drawing(None).assert_boxes_apart_and_inside()
    Drawing(orchestration_trace(EVIDENCE_RETRY_ROUTE)).assert_boxes_apart_and_inside()
    Drawing(None, aiops_topology()).assert_boxes_apart_and_inside()


def test_the_alert_analysis_topology_is_drawn_from_its_compiled_graph_with_its_main_route_down_the_middle():
    topology = aiops_topology()
    drawing = Drawing(None, topology)
    assert set(drawing.nodes) == {n["id"] for n in topology["nodes"]}
    assert set(drawing.edges) == {(e["source"], e["target"]) for e in topology["edges"]}
    spine = [START, "aiops_intake", "aiops_planner", "aiops_reporter", "aiops_report_check", END]
    centres = {round((drawing.box(n)[0] + drawing.box(n)[2]) / 2) for n in spine}
    assert len(centres) == 1  # the first route of every routing table, straight down
    tops = [drawing.box(n)[1] for n in spine]
    assert tops == sorted(tops)
    for side in ("aiops_executor", "aiops_gatekeeper", "aiops_fallback"):
        assert round((drawing.box(side)[0] + drawing.box(side)[2]) / 2) not in centres
    assert "Alert-analysis topology" in drawing.markup


def _port(state, config):
    return None


def test_a_node_and_an_edge_added_to_the_topology_are_drawn_with_no_drawing_change():
    """The layout is computed from the compiled graph: a new route and node need no table in the drawing."""
    builder = build_diagnosis_topology({name: _port for name in NodeName.ALL})
    router, table = builder.conditional_edges[NodeName.COMPOSER]
    builder.conditional_edges[NodeName.COMPOSER] = (router, {**table, "escalate": "human_review"})
    builder.add_node("human_review", _port)
    builder.add_edge("human_review", END)
    topology = builder.compile().describe()
    assert dict(table) == COMPOSER_ROUTES  # the real topology is untouched

    trace = orchestration_trace(HAPPY_ROUTE[:-1] + [("composer", "human_review", "escalate", 1),
                                                     ("human_review", "END", "completed", 1)])
    drawing = Drawing(trace, topology)
    assert set(drawing.nodes) == {n["id"] for n in topology["nodes"]}
    assert {("composer", "human_review"), ("human_review", END)} <= set(drawing.edges)
    assert "unknown" not in drawing.edge_classes("composer", "human_review")
    assert {("composer", "human_review"), ("human_review", END)} <= drawing.visited_edges()
    assert "visited" in drawing.node_classes("human_review") and "1 run" in drawing.texts("human_review")
    drawing.assert_boxes_apart_and_inside()
    # placed between the node it follows and END, not in a fixed spare column
    _, top, _, bottom = drawing.box("human_review")
    assert drawing.box("composer")[3] < top and bottom < drawing.box(END)[1]
