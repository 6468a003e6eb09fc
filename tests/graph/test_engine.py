"""The generic engine: validation, streaming, reducers, immutability, failures and the step limit."""

from types import MappingProxyType

import pytest

from diagnosis.graph.engine import (
    END,
    START,
    GraphError,
    GraphRecursionError,
    GraphRoutingError,
    GraphRunError,
    GraphValidationError,
    InvalidUpdateError,
    NodeExecutionError,
    RunConfig,
    StateGraph,
    append,
)


def set_key(key, value):
    return lambda state, config: {key: value}


def linear(*names, **kwargs):
    graph = StateGraph(**kwargs)
    for name in names:
        graph.add_node(name, set_key(name, True))
    graph.set_entry(names[0])
    for src, dst in zip(names, names[1:]):
        graph.add_edge(src, dst)
    graph.add_edge(names[-1], END)
    return graph


def loop_graph():
    graph = StateGraph(reducers={"visits": append})
    graph.add_node("a", lambda state, config: {"visits": ["a"]})
    graph.add_node("b", lambda state, config: {"visits": ["b"]})
    graph.set_entry("a")
    graph.add_edge("a", "b")
    graph.add_conditional_edges("b", lambda state: "again" if len(state["visits"]) < 100 else "done",
                                {"again": "a", "done": END})
    return graph


# --------------------------------------------------------------------------- compile()


def problems_of(graph):
    with pytest.raises(GraphValidationError) as caught:
        graph.compile()
    assert caught.value.code == "graph_invalid"
    return caught.value.problems


def test_compile_rejects_an_edge_to_an_unknown_node_and_says_how_to_add_it():
    graph = linear("a")
    graph.add_node("b", set_key("b", 1))
    graph.add_edge("b", "x")
    graph.add_edge("a", "b")

    problems = problems_of(graph)

    assert any("target 'x' not found; add it with add_node('x', ...)" in p for p in problems)


def test_compile_rejects_an_edge_from_an_unknown_node():
    graph = linear("a")
    graph.add_edge("ghost", "a")

    assert any("Edge source 'ghost' not found; add it with add_node('ghost', ...)" in p for p in problems_of(graph))


def test_compile_rejects_a_conditional_route_to_an_unknown_node():
    graph = StateGraph()
    graph.add_node("a", set_key("a", 1))
    graph.set_entry("a")
    graph.add_conditional_edges("a", lambda state: "go", {"go": "nowhere", "stop": END})

    assert any("'a' ['go']: target 'nowhere' not found; add it with add_node('nowhere', ...)" in p
               for p in problems_of(graph))


def test_compile_rejects_an_unreachable_node_by_name():
    graph = linear("a")
    graph.add_node("island", set_key("island", 1))
    graph.add_edge("island", END)

    assert any("Node 'island' is unreachable from the entry 'a'" in p for p in problems_of(graph))


def test_compile_rejects_a_graph_without_an_entry():
    graph = StateGraph()
    graph.add_node("a", set_key("a", 1))
    graph.add_edge("a", END)

    assert any("no entry node; call set_entry('<node>')" in p for p in problems_of(graph))


def test_compile_rejects_an_entry_that_is_not_a_node():
    graph = linear("a")
    graph.set_entry("b")

    assert any("Entry node 'b' not found; add it with add_node('b', ...)" in p for p in problems_of(graph))


def test_compile_rejects_a_node_without_an_outgoing_edge_by_name():
    graph = StateGraph()
    graph.add_node("a", set_key("a", 1))
    graph.add_node("dead_end", set_key("b", 1))
    graph.set_entry("a")
    graph.add_edge("a", "dead_end")

    assert any("Node 'dead_end' has no outgoing edge; add add_edge('dead_end', END)" in p for p in problems_of(graph))


def test_compile_rejects_a_node_with_two_plain_edges():
    graph = linear("a", "b")
    graph.add_edge("a", END)

    assert any("Node 'a' has 2 plain outgoing edges" in p for p in problems_of(graph))


def test_compile_rejects_a_loop_that_can_never_reach_end():
    graph = StateGraph()
    graph.add_node("a", set_key("a", 1))
    graph.add_node("b", set_key("b", 1))
    graph.set_entry("a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "a")

    problems = problems_of(graph)

    assert any("Node 'a' can never reach END" in p for p in problems)
    assert any("Node 'b' can never reach END" in p for p in problems)


def test_compile_rejects_a_reducer_for_a_key_outside_the_schema():
    graph = linear("a", state_keys={"a"}, reducers={"events": append})

    assert any("Reducer declared for unknown state key 'events'; add it to state_keys" in p for p in problems_of(graph))


def test_compile_lists_every_problem_in_one_error():
    graph = StateGraph()
    graph.add_node("a", set_key("a", 1))
    graph.add_edge("a", "x")
    graph.add_edge("y", "a")

    problems = problems_of(graph)

    assert len(problems) >= 3
    assert "no entry node" in str(GraphValidationError(problems))


@pytest.mark.parametrize("name", [START, END])
def test_the_builder_refuses_reserved_node_names(name):
    with pytest.raises(GraphValidationError, match="reserved"):
        StateGraph().add_node(name, set_key("a", 1))


def test_the_builder_refuses_a_node_added_twice():
    graph = StateGraph().add_node("a", set_key("a", 1))

    with pytest.raises(GraphValidationError, match="Node 'a' already exists"):
        graph.add_node("a", set_key("a", 1))


def test_the_builder_refuses_edges_out_of_end():
    with pytest.raises(GraphValidationError, match="END cannot have an outgoing edge"):
        StateGraph().add_edge(END, "a")


def test_an_edge_from_start_sets_the_entry():
    graph = StateGraph().add_node("a", set_key("a", 1)).add_edge(START, "a").add_edge("a", END)

    assert graph.compile().invoke({}) == {"a": 1}


# --------------------------------------------------------------------------- stream / invoke


def test_stream_yields_each_node_its_update_and_the_state_after_it():
    graph = linear("a", "b", "c").compile()

    steps = list(graph.stream({"seed": 1}))

    assert [node for node, _, _ in steps] == ["a", "b", "c"]
    assert [update for _, update, _ in steps] == [{"a": True}, {"b": True}, {"c": True}]
    assert dict(steps[0][2]) == {"seed": 1, "a": True}
    assert dict(steps[-1][2]) == {"seed": 1, "a": True, "b": True, "c": True}


def test_each_streamed_state_is_a_separate_snapshot():
    graph = linear("a", "b").compile()

    first, second = [state for _, _, state in graph.stream({})]

    assert "b" not in first
    assert "b" in second


def test_invoke_returns_the_final_state_as_a_new_dict():
    graph = linear("a", "b").compile()

    final = graph.invoke({"seed": 1})

    assert final == {"seed": 1, "a": True, "b": True}
    assert type(final) is dict


def test_a_node_returning_none_leaves_the_state_unchanged():
    graph = StateGraph().add_node("a", lambda state, config: None).set_entry("a").add_edge("a", END)

    assert graph.compile().invoke({"x": 1}) == {"x": 1}


def test_every_node_receives_the_run_config():
    seen = []
    graph = StateGraph().add_node("a", lambda state, config: seen.append(config)).set_entry("a")
    graph.add_edge("a", END)
    config = RunConfig.for_run(run_id="run-1", session_id="s-1")

    graph.compile().invoke({}, config)

    assert seen == [config]
    assert config.thread_id == "run-1"
    assert dict(config.metadata) == {"session_id": "s-1", "run_id": "run-1"}


def test_the_run_config_metadata_cannot_be_changed_by_a_node():
    config = RunConfig.for_run(run_id="run-1", session_id="s-1")

    with pytest.raises(TypeError):
        config.metadata["run_id"] = "run-2"


def test_conditional_edges_follow_the_router_key():
    graph = StateGraph()
    graph.add_node("check", lambda state, config: {"ok": state["n"] > 0})
    graph.add_node("yes", set_key("path", "yes"))
    graph.add_node("no", set_key("path", "no"))
    graph.set_entry("check")
    graph.add_conditional_edges("check", lambda state: "good" if state["ok"] else "bad", {"good": "yes", "bad": "no"})
    graph.add_edge("yes", END)
    graph.add_edge("no", END)
    compiled = graph.compile()

    assert compiled.invoke({"n": 1})["path"] == "yes"
    assert compiled.invoke({"n": 0})["path"] == "no"


# --------------------------------------------------------------------------- reducers and schema


def test_an_append_key_accumulates_and_every_other_key_is_replaced():
    graph = StateGraph(reducers={"events": append})
    graph.add_node("a", lambda state, config: {"events": [{"node": "a"}], "last": "a"})
    graph.add_node("b", lambda state, config: {"events": [{"node": "b"}], "last": "b"})
    graph.set_entry("a").add_edge("a", "b").add_edge("b", END)

    final = graph.compile().invoke({"events": [{"node": "seed"}], "last": None})

    assert list(final["events"]) == [{"node": "seed"}, {"node": "a"}, {"node": "b"}]
    assert final["last"] == "b"


def test_an_append_key_is_stored_as_an_immutable_tuple():
    graph = StateGraph(reducers={"events": append})
    graph.add_node("a", lambda state, config: {"events": [1]}).set_entry("a").add_edge("a", END)

    assert graph.compile().invoke({"events": []})["events"] == (1,)


def test_an_append_key_written_as_a_single_item_is_rejected():
    graph = StateGraph(reducers={"events": append})
    graph.add_node("a", lambda state, config: {"events": {"node": "a"}}).set_entry("a").add_edge("a", END)

    with pytest.raises(InvalidUpdateError, match="'a' wrote 'events' in a shape its reducer rejects") as caught:
        graph.compile().invoke({})
    assert caught.value.code == "graph_invalid_update"


def test_a_schema_rejects_an_update_with_an_unknown_key_naming_the_node():
    graph = StateGraph(state_keys={"a", "b"})
    graph.add_node("a", set_key("surprise", 1)).set_entry("a").add_edge("a", END)

    with pytest.raises(InvalidUpdateError, match=r"Node 'a' wrote unknown state keys \['surprise'\]"):
        graph.compile().invoke({})


def test_a_schema_rejects_an_initial_state_with_an_unknown_key():
    graph = linear("a", state_keys={"a"})

    with pytest.raises(InvalidUpdateError, match=r"Initial state has unknown keys \['b'\]"):
        graph.compile().invoke({"b": 1})


def test_a_node_returning_something_other_than_a_dict_is_rejected():
    graph = StateGraph().add_node("a", lambda state, config: ["a"]).set_entry("a").add_edge("a", END)

    with pytest.raises(InvalidUpdateError, match="Node 'a' returned list; return a dict"):
        graph.compile().invoke({})


# --------------------------------------------------------------------------- immutability


def test_a_node_cannot_assign_into_its_state():
    def rogue(state, config):
        state["x"] = 2

    graph = StateGraph().add_node("rogue", rogue).set_entry("rogue").add_edge("rogue", END)

    with pytest.raises(NodeExecutionError) as caught:
        graph.compile().invoke({"x": 1})
    assert isinstance(caught.value.__cause__, TypeError)
    assert caught.value.partial_state == {"x": 1}


def test_a_node_cannot_append_to_an_append_key_in_place():
    def rogue(state, config):
        state["events"].append("forged")

    graph = StateGraph(reducers={"events": append})
    graph.add_node("rogue", rogue).set_entry("rogue").add_edge("rogue", END)

    with pytest.raises(NodeExecutionError) as caught:
        graph.compile().invoke({"events": ["real"]})
    assert caught.value.partial_state == {"events": ("real",)}


def test_the_callers_initial_state_is_never_modified():
    initial = {"events": [], "x": 1}
    graph = StateGraph(reducers={"events": append})
    graph.add_node("a", lambda state, config: {"events": [1], "x": 2}).set_entry("a").add_edge("a", END)

    graph.compile().invoke(initial)

    assert initial == {"events": [], "x": 1}


def test_a_node_sees_a_read_only_mapping():
    seen = []
    graph = StateGraph().add_node("a", lambda state, config: seen.append(type(state))).set_entry("a")
    graph.add_edge("a", END)

    graph.compile().invoke({})

    assert seen == [MappingProxyType]


def test_a_node_mutating_the_update_it_returned_later_cannot_change_the_state():
    kept = {}

    def sneaky(state, config):
        kept["update"] = {"x": 1}
        return kept["update"]

    def later(state, config):
        kept["update"]["x"] = 99

    graph = StateGraph().add_node("a", sneaky).add_node("b", later).set_entry("a").add_edge("a", "b")
    graph.add_edge("b", END)

    assert graph.compile().invoke({})["x"] == 1


# --------------------------------------------------------------------------- failures


def test_a_node_that_raises_yields_the_last_real_state_and_the_outputs_so_far():
    def broken(state, config):
        raise ValueError("model timed out")

    graph = StateGraph(reducers={"events": append})
    graph.add_node("a", lambda state, config: {"events": ["a"], "plan": "p"})
    graph.add_node("b", broken)
    graph.set_entry("a").add_edge("a", "b").add_edge("b", END)

    with pytest.raises(NodeExecutionError) as caught:
        graph.compile().invoke({"events": []})

    error = caught.value
    assert error.code == "graph_node_failed"
    assert error.node == "b"
    assert error.partial_state == {"events": ("a",), "plan": "p"}
    assert error.events == (("a", {"events": ["a"], "plan": "p"}),)
    assert isinstance(error.__cause__, ValueError)
    assert "Node 'b' raised ValueError: model timed out" in str(error)


def test_a_streaming_caller_keeps_every_state_before_the_failure():
    def broken(state, config):
        raise RuntimeError("boom")

    graph = StateGraph().add_node("a", set_key("a", 1)).add_node("b", broken).set_entry("a")
    graph.add_edge("a", "b").add_edge("b", END)
    seen = []

    with pytest.raises(NodeExecutionError):
        for node, _, state in graph.compile().stream({}):
            seen.append((node, dict(state)))

    assert seen == [("a", {"a": 1})]


def test_a_router_choosing_an_unmapped_key_raises_a_routing_error_naming_the_node():
    graph = StateGraph().add_node("a", set_key("a", 1)).set_entry("a")
    graph.add_conditional_edges("a", lambda state: "sideways", {"up": END})

    with pytest.raises(GraphRoutingError, match="Router of 'a' returned 'sideways', which is not in its mapping") as c:
        graph.compile().invoke({})
    assert c.value.code == "graph_routing_failed"
    assert c.value.partial_state == {"a": 1}


def test_a_router_that_raises_is_reported_with_its_cause():
    graph = StateGraph().add_node("a", set_key("a", 1)).set_entry("a")
    graph.add_conditional_edges("a", lambda state: state["missing"], {"up": END})

    with pytest.raises(GraphRoutingError) as caught:
        graph.compile().invoke({})
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_graph_forced_past_its_recursion_limit_raises_the_named_error():
    graph = loop_graph().compile(recursion_limit=7)

    with pytest.raises(GraphRecursionError) as caught:
        graph.invoke({"visits": []})

    error = caught.value
    assert error.code == "graph_recursion_limit"
    assert error.limit == 7
    assert error.node == "b"  # the eighth step would have been b
    assert error.partial_state["visits"] == ("a", "b", "a", "b", "a", "b", "a")
    assert len(error.events) == 7
    assert "Recursion limit of 7 steps reached before node 'b'" in str(error)


def test_a_run_may_use_exactly_the_recursion_limit():
    graph = linear("a", "b", "c").compile(recursion_limit=3)

    assert graph.invoke({}) == {"a": True, "b": True, "c": True}


def test_a_call_can_lower_but_never_raise_the_compiled_recursion_limit():
    graph = loop_graph().compile(recursion_limit=10)

    with pytest.raises(GraphRecursionError) as lowered:
        graph.invoke({"visits": []}, RunConfig(recursion_limit=3))
    with pytest.raises(GraphRecursionError) as raised:
        graph.invoke({"visits": []}, RunConfig(recursion_limit=1000))

    assert lowered.value.limit == 3
    assert raised.value.limit == 10


def test_every_engine_error_carries_a_stable_code():
    classes = [GraphError, GraphValidationError, GraphRunError, NodeExecutionError, InvalidUpdateError,
               GraphRoutingError, GraphRecursionError]

    codes = [cls.code for cls in classes]

    assert len(set(codes)) == len(codes)
    assert all(code.startswith("graph_") for code in codes)
    assert all(issubclass(cls, GraphError) for cls in classes)


# --------------------------------------------------------------------------- rendering


def test_describe_lists_nodes_and_edges_for_a_console_drawing():
    topology = linear("a", "b").compile().describe()

    assert topology["entry"] == "a"
    assert [n["id"] for n in topology["nodes"]] == [START, "a", "b", END]
    assert {(e["source"], e["target"]) for e in topology["edges"]} == {(START, "a"), ("a", "b"), ("b", END)}
