"""A small, bounded state-graph engine: build -> compile (validate) -> stream/invoke.

Stdlib only. Nodes run one at a time; each takes ``(state, config)`` and returns a partial
update (a dict, or None). The state a node sees is a read-only mapping over a fresh dict per
step, so nothing a node does can change what the engine or an earlier step holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

START = "__start__"
END = "__end__"

DEFAULT_RECURSION_LIMIT = 25

State = Mapping[str, Any]
NodeFn = Callable[[State, "RunConfig"], Any]
Router = Callable[[State], Any]
Reducer = Callable[[Any, Any], Any]


# --------------------------------------------------------------------------- errors


class GraphError(Exception):
    """Base class of every engine error; ``code`` is stable and safe to store on a run."""

    code = "graph_error"


class GraphValidationError(GraphError):
    """The builder describes a graph that cannot run; ``problems`` lists every reason."""

    code = "graph_invalid"

    def __init__(self, problems: Iterable[str]):
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


class GraphRunError(GraphError):
    """A run stopped early; carries the last real state and the node outputs so far."""

    code = "graph_run_failed"

    def __init__(self, message: str, *, node: str, partial_state: State, events: tuple):
        super().__init__(message)
        self.node = node
        self.partial_state = dict(partial_state)
        self.events = events


class NodeExecutionError(GraphRunError):
    """A node raised; the original exception is chained as ``__cause__``."""

    code = "graph_node_failed"


class InvalidUpdateError(GraphRunError):
    """A node (or the initial state) produced something that is not a valid state update."""

    code = "graph_invalid_update"


class GraphRoutingError(GraphRunError):
    """A router raised or chose a key its mapping does not know."""

    code = "graph_routing_failed"


class GraphRecursionError(GraphRunError):
    """The run needed more node steps than the recursion limit allows."""

    code = "graph_recursion_limit"

    def __init__(self, message: str, *, limit: int, **kwargs: Any):
        super().__init__(message, **kwargs)
        self.limit = limit


# --------------------------------------------------------------------------- primitives


def replace(current: Any, update: Any) -> Any:
    """Default reducer: the update wins."""
    return update


def append(current: Any, update: Any) -> tuple:
    """Append reducer: items of the update (a list or tuple) follow the current ones, kept as a tuple."""
    if not isinstance(update, (list, tuple)):
        raise TypeError(f"append expects a list or tuple, got {type(update).__name__}")
    if current is None:
        return tuple(update)
    return (*current, *update)


@dataclass(frozen=True)
class RunConfig:
    """What every node receives besides the state: the thread (run) id and run metadata.

    ``recursion_limit`` may lower, never raise, the compiled graph's limit for one call.
    """

    thread_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    recursion_limit: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    @classmethod
    def for_run(cls, *, run_id: str, session_id: str, recursion_limit: int | None = None) -> RunConfig:
        """The config of one diagnosis run: thread_id = run_id, metadata {session_id, run_id}."""
        return cls(
            thread_id=run_id,
            metadata={"session_id": session_id, "run_id": run_id},
            recursion_limit=recursion_limit,
        )


# --------------------------------------------------------------------------- builder


class StateGraph:
    """Collects nodes, edges and reducers; ``compile()`` validates them into a CompiledGraph."""

    def __init__(
        self,
        *,
        state_keys: Iterable[str] | None = None,
        reducers: Mapping[str, Reducer] | None = None,
    ):
        self.state_keys = frozenset(state_keys) if state_keys is not None else None
        self.reducers = dict(reducers or {})
        self.nodes: dict[str, NodeFn] = {}
        self.edges: list[tuple[str, str]] = []
        self.conditional_edges: dict[str, tuple[Router, dict[Any, str]]] = {}
        self.entry: str | None = None

    def add_node(self, name: str, fn: NodeFn) -> StateGraph:
        if name in (START, END):
            raise GraphValidationError([f"Node name {name!r} is reserved; choose another name"])
        if not isinstance(name, str) or not name:
            raise GraphValidationError([f"Node name {name!r} must be a non-empty string"])
        if name in self.nodes:
            raise GraphValidationError([f"Node {name!r} already exists; add each node once"])
        if not callable(fn):
            raise GraphValidationError([f"Node {name!r} needs a callable (state, config) -> update"])
        self.nodes[name] = fn
        return self

    def add_edge(self, src: str, dst: str) -> StateGraph:
        if src == END:
            raise GraphValidationError([f"END cannot have an outgoing edge (to {dst!r}); remove it"])
        if dst == START:
            raise GraphValidationError([f"Edge from {src!r} cannot target START; use a node name or END"])
        if src == START:
            return self.set_entry(dst)
        self.edges.append((src, dst))
        return self

    def add_conditional_edges(self, source: str, router: Router, mapping: Mapping[Any, str] | Iterable[str]) -> StateGraph:
        """``router(state)`` returns a key of ``mapping``; the mapped node (or END) runs next."""
        if not callable(router):
            raise GraphValidationError([f"Router of {source!r} must be callable (state) -> key"])
        if source in self.conditional_edges:
            raise GraphValidationError(
                [f"Node {source!r} already has conditional edges; put every route in one mapping"]
            )
        table = dict(mapping) if isinstance(mapping, Mapping) else {name: name for name in mapping}
        self.conditional_edges[source] = (router, table)
        return self

    def set_entry(self, name: str) -> StateGraph:
        self.entry = name
        return self

    def compile(self, *, recursion_limit: int = DEFAULT_RECURSION_LIMIT) -> CompiledGraph:
        problems = self._problems(recursion_limit)
        if problems:
            raise GraphValidationError(problems)
        return CompiledGraph(self, recursion_limit)

    def _problems(self, recursion_limit: int) -> list[str]:
        """Why it is long: a flat list of independent checks of a graph, each saying how to fix it."""
        problems: list[str] = []
        known = self.nodes.keys()

        def target_problem(where: str, dst: str) -> str | None:
            if dst == END or dst in known:
                return None
            return f"{where} target {dst!r} not found; add it with add_node({dst!r}, ...)"

        if not isinstance(recursion_limit, int) or recursion_limit < 1:
            problems.append(f"recursion_limit must be a positive int, got {recursion_limit!r}")
        if self.entry is None:
            problems.append("Graph has no entry node; call set_entry('<node>') or add_edge(START, '<node>')")
        elif self.entry not in known:
            problems.append(f"Entry node {self.entry!r} not found; add it with add_node({self.entry!r}, ...)")

        outgoing: dict[str, list[str]] = {}
        for src, dst in self.edges:
            if src not in known:
                problems.append(f"Edge source {src!r} not found; add it with add_node({src!r}, ...)")
            problem = target_problem(f"Edge {src!r} -> {dst!r}:", dst)
            if problem:
                problems.append(problem)
            outgoing.setdefault(src, []).append(dst)
        for src, (_, table) in self.conditional_edges.items():
            if src not in known:
                problems.append(
                    f"Conditional edge source {src!r} not found; add it with add_node({src!r}, ...)"
                )
            if not table:
                problems.append(f"Conditional edges of {src!r} have an empty mapping; map each route key to a node")
            for key, dst in table.items():
                problem = target_problem(f"Conditional edge {src!r} [{key!r}]:", dst)
                if problem:
                    problems.append(problem)
            outgoing.setdefault(src, []).extend(table.values())

        for name in known:
            static = sum(1 for src, _ in self.edges if src == name)
            if static > 1:
                problems.append(
                    f"Node {name!r} has {static} plain outgoing edges; nodes run one at a time, "
                    f"so route with add_conditional_edges({name!r}, ...)"
                )
            if static and name in self.conditional_edges:
                problems.append(
                    f"Node {name!r} has both a plain edge and conditional edges; keep only add_conditional_edges"
                )
            if name not in outgoing:
                problems.append(
                    f"Node {name!r} has no outgoing edge; add add_edge({name!r}, END) or "
                    f"add_conditional_edges({name!r}, ...)"
                )

        if self.entry in known:
            reachable = _walk(self.entry, outgoing)
            for name in known:
                if name not in reachable:
                    problems.append(
                        f"Node {name!r} is unreachable from the entry {self.entry!r}; "
                        f"add an edge to it or remove the node"
                    )
            incoming: dict[str, list[str]] = {}
            for src, dsts in outgoing.items():
                for dst in dsts:
                    incoming.setdefault(dst, []).append(src)
            can_finish = _walk(END, incoming)
            for name in known:
                if name in reachable and name not in can_finish and name in outgoing:
                    problems.append(f"Node {name!r} can never reach END; give one of its routes a path to END")

        if self.state_keys is not None:
            for key in self.reducers:
                if key not in self.state_keys:
                    problems.append(f"Reducer declared for unknown state key {key!r}; add it to state_keys")
        return problems


def _walk(start: str, graph: Mapping[str, list[str]]) -> set[str]:
    seen = {start}
    queue = deque([start])
    while queue:
        for nxt in graph.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


# --------------------------------------------------------------------------- compiled graph


class CompiledGraph:
    """A validated graph. It only runs and renders; it never changes."""

    def __init__(self, builder: StateGraph, recursion_limit: int):
        self.entry: str = builder.entry  # type: ignore[assignment]
        self.recursion_limit = recursion_limit
        self.state_keys = builder.state_keys
        self._reducers = dict(builder.reducers)
        self._reducer_keys = tuple(self._reducers)
        # One lookup per step: node -> (fn, static next or None, router, route table).
        self._plan: dict[str, tuple[NodeFn, str | None, Router | None, dict | None]] = {}
        for name, fn in builder.nodes.items():
            static = next((dst for src, dst in builder.edges if src == name), None)
            router, table = builder.conditional_edges.get(name, (None, None))
            self._plan[name] = (fn, static, router, dict(table) if table is not None else None)

    # ------------------------------------------------------------------ running

    def stream(self, state: State, config: RunConfig | None = None) -> Iterator[tuple[str, Any, State]]:
        """Run the graph, yielding ``(node, update, state)`` after every node.

        ``state`` is the read-only state after the node's update. A failure raises a
        GraphRunError subclass carrying the last real state and the outputs so far.
        Why it is long: node call, update, routing and failure handling in one loop: every exit has the state."""
        if config is None:
            config = RunConfig()
        limit = self.recursion_limit
        if config.recursion_limit is not None and config.recursion_limit < limit:
            limit = config.recursion_limit

        events: list[tuple[str, Any]] = []
        current = self._initial(state)
        view = MappingProxyType(current)
        schema = self.state_keys
        reducers = self._reducers
        reducer_keys = self._reducer_keys
        plan = self._plan
        node = self.entry
        steps = 0

        while node != END:
            if steps >= limit:
                raise GraphRecursionError(
                    f"Recursion limit of {limit} steps reached before node {node!r}; "
                    f"the graph loops more than allowed (raise recursion_limit only if the loop is bounded)",
                    limit=limit,
                    node=node,
                    partial_state=view,
                    events=tuple(events),
                )
            steps += 1
            fn, static, router, table = plan[node]
            try:
                update = fn(view, config)
            except Exception as exc:
                raise NodeExecutionError(
                    f"Node {node!r} raised {type(exc).__name__}: {exc}",
                    node=node,
                    partial_state=view,
                    events=tuple(events),
                ) from exc

            if update:
                if type(update) is not dict:
                    update = self._coerce(node, update, view, events)
                if schema is not None and not update.keys() <= schema:
                    self._reject_keys(node, update, view, events)
                current = current.copy()
                current.update(update)
                for key in reducer_keys:
                    if key in update:
                        try:
                            current[key] = reducers[key](view.get(key), update[key])
                        except Exception as exc:
                            raise self._reducer_error(node, key, exc, view, events) from exc
                view = MappingProxyType(current)
            elif update is not None and type(update) is not dict:
                self._coerce(node, update, view, events)

            events.append((node, update))
            yield node, update, view

            if static is not None:
                node = static
                continue
            try:
                route = router(view)
            except Exception as exc:
                raise GraphRoutingError(
                    f"Router of {node!r} raised {type(exc).__name__}: {exc}",
                    node=node, partial_state=view, events=tuple(events),
                ) from exc
            try:
                node = table[route]
            except (KeyError, TypeError):
                raise GraphRoutingError(
                    f"Router of {node!r} returned {route!r}, which is not in its mapping "
                    f"{sorted(map(str, table))}; add it to add_conditional_edges({node!r}, ...)",
                    node=node, partial_state=view, events=tuple(events),
                ) from None

    def invoke(self, state: State, config: RunConfig | None = None) -> dict[str, Any]:
        """Run the graph to END and return the final state as a new dict."""
        final: State = MappingProxyType({})
        for _, _, final in self.stream(state, config):
            pass
        return dict(final)

    def _initial(self, state: State) -> dict[str, Any]:
        if not isinstance(state, Mapping):
            raise InvalidUpdateError(
                f"Initial state must be a mapping, got {type(state).__name__}",
                node=START, partial_state={}, events=(),
            )
        if self.state_keys is not None and not state.keys() <= self.state_keys:
            unknown = sorted(set(state) - self.state_keys)
            raise InvalidUpdateError(
                f"Initial state has unknown keys {unknown}; declare them in state_keys",
                node=START, partial_state={}, events=(),
            )
        current = dict(state)
        for key in self._reducer_keys:
            if key in current:
                try:
                    current[key] = self._reducers[key](None, current[key])
                except Exception as exc:
                    raise InvalidUpdateError(
                        f"Initial state key {key!r} has a shape its reducer rejects ({exc})",
                        node=START, partial_state={}, events=(),
                    ) from exc
        return current

    def _reducer_error(self, node: str, key: str, exc: Exception, view: State, events: list) -> InvalidUpdateError:
        return InvalidUpdateError(
            f"Node {node!r} wrote {key!r} in a shape its reducer rejects ({exc}); "
            f"return the type the reducer expects (a list for append)",
            node=node, partial_state=view, events=tuple(events),
        )

    def _coerce(self, node: str, update: Any, view: State, events: list) -> dict[str, Any]:
        if isinstance(update, Mapping):
            return dict(update)
        raise InvalidUpdateError(
            f"Node {node!r} returned {type(update).__name__}; return a dict of state updates or None",
            node=node, partial_state=view, events=tuple(events),
        )

    def _reject_keys(self, node: str, update: Mapping, view: State, events: list) -> None:
        unknown = sorted(set(update) - self.state_keys)  # type: ignore[operator]
        raise InvalidUpdateError(
            f"Node {node!r} wrote unknown state keys {unknown}; declare them in state_keys",
            node=node, partial_state=view, events=tuple(events),
        )

    # ------------------------------------------------------------------ rendering

    def describe(self) -> dict[str, Any]:
        """The topology as plain data for a console: nodes (with START/END) and labelled edges."""
        nodes = [{"id": START, "kind": "start"}]
        nodes += [{"id": name, "kind": "node"} for name in self._plan]
        nodes.append({"id": END, "kind": "end"})
        edges = [{"source": START, "target": self.entry, "label": None, "conditional": False}]
        for name, (_, static, _, table) in self._plan.items():
            if static is not None:
                edges.append({"source": name, "target": static, "label": None, "conditional": False})
            for key, dst in (table or {}).items():
                edges.append({"source": name, "target": dst, "label": str(key), "conditional": True})
        return {"entry": self.entry, "nodes": nodes, "edges": edges}
