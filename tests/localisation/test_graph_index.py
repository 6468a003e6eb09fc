"""The graph's edges of a service, and the path to the root, found through its index give what a walk over
all its edges gives (the long way, kept here)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnosis.localisation.graph import DependencyGraph

NAMES = st.sampled_from(["", "a", "b", "c", "d", "e", "f"])
EDGES = st.lists(st.tuples(NAMES, NAMES, st.sampled_from(["log", "metric", "placement"])), max_size=30)


def _graph(edges) -> DependencyGraph:
    graph = DependencyGraph()
    for caller, callee, via in edges:
        graph.add(caller, callee, via)
    return graph


def _long_path(subject, root, graph):
    for start in subject:
        if start == root:
            return []
        frontier, seen = [(start, [])], {start}
        while frontier:
            service, edges = frontier.pop(0)
            for edge in [e for (a, _), e in graph.edges.items() if a == service]:
                if edge.callee in seen:
                    continue
                if edge.callee == root:
                    return edges + [edge]
                seen.add(edge.callee)
                frontier.append((edge.callee, edges + [edge]))
    return []


@settings(max_examples=300, deadline=None)
@given(EDGES)
def test_the_edges_of_a_service_are_those_a_walk_over_all_edges_finds_in_the_same_order(edges):
    graph = _graph(edges)
    for name in "abcdefg":
        assert graph.dependencies(name) == [e for (a, _), e in graph.edges.items() if a == name]
        assert graph.callers(name) == [e for (_, b), e in graph.edges.items() if b == name]


@settings(max_examples=300, deadline=None)
@given(EDGES, st.lists(NAMES, max_size=3), NAMES)
def test_the_path_to_the_root_is_the_one_the_long_way_finds(edges, subject, root):
    graph = _graph(edges)
    assert graph.path(subject, root) == _long_path(subject, root, graph)


def test_the_edges_a_caller_gets_are_its_own_copy():
    graph = _graph([("a", "b", "log")])
    graph.dependencies("a").clear()
    graph.callers("b").clear()
    assert len(graph.dependencies("a")) == len(graph.callers("b")) == 1


def test_a_graph_shows_and_compares_by_its_edges_alone():
    assert repr(_graph([("a", "b", "log")])) == repr(_graph([("a", "b", "log")]))
    assert _graph([("a", "b", "log")]) == _graph([("a", "b", "log")])
