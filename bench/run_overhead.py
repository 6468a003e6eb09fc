"""Per-run overhead of the service: a whole diagnosis run (`run_execute`) with a zero-latency model.

Part 1, zero-latency: a scripted model (bench/_support.py: plan, two rounds of tool calls, evidence
citing the real invocation ids, PASS, answer; 6 model calls) and in-memory telemetry and knowledge
(4 tool calls). What remains is the service itself: the graph engine, the node adapters (prompts,
redaction, validation), the Gatekeeper, and the database (steps, invocations, progress events, run
updates, session memory). Runs are timed plain and, interleaved, with exclusive per-layer timers.

Part 2, offline analyser: the embedded default model and the real demo backend and BM25 knowledge
on the payment-db-pool-exhaustion scenario, with the same per-layer breakdown.

    .venv/bin/python bench/run_overhead.py            # SQLite in a temp folder
    .venv/bin/python bench/run_overhead.py --mysql    # MariaDB/MySQL at 127.0.0.1:3306, database bench_run_overhead
    .venv/bin/python bench/run_overhead.py --sqlite-tuned   # what-if: SQLite WAL + IMMEDIATE (bench/whatif_settings.py)
    .venv/bin/python bench/run_overhead.py --mysql --db-name bench_mine   # beside another run of the bench
    .venv/bin/python bench/run_overhead.py --mysql --code /work/main      # another checkout's service, same bench

Statements and commits are counted inside `run_execute` only (creating the run is the request's work).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from _support import (
    SCRIPTED_MODEL_CALLS, InMemoryKnowledge, InMemoryTelemetry, LayerTimer, Patches, ScriptedModel, bench_database,
    bench_user, machine_line, percentile, summary,
)

QUESTION = "Why is payment-service failing?"
MODEL_CALL_SECONDS = 0.5
GOAL_MS = 30.0
GOAL_SHARE = 0.02

# Reported layers, in order: (key, label).
LAYERS = [
    ("engine", "orchestration: graph engine + result mapping"),
    ("agents", "node adapters: prompts, redaction, validation"),
    ("gatekeeper", "gatekeeper + verified-input projection"),
    ("persist_write", "persistence: DB writes (steps, invocations, events, run, memory)"),
    ("db_read", "DB reads (gatekeeper lookup, memory, recorders)"),
    ("tools", "tools: backend + redaction + size cap"),
    ("model", "model"),
    ("rest", "rest: load/claim glue, counts, prompt audit"),
]


class TimedModel:
    def __init__(self, inner, timer: LayerTimer):
        self.complete = timer.wrap("model", inner.complete)


class TimedGraph:
    def __init__(self, graph, timer: LayerTimer):
        self.graph, self.timer = graph, timer

    def stream(self, state, config):
        return self.timer.wrap_iter("engine", iter(self.graph.stream(state, config)))


def instrument(timer: LayerTimer) -> Patches:
    """Wrap every layer of the run path with the exclusive timer (bench-only monkeypatching)."""
    from diagnosis.agents import nodes
    from diagnosis.services import execution, memory, observer, run_context, runs
    from diagnosis.tools import registry

    p = Patches()
    obs = observer.DbRunObserver  # buffers rows and events; `commit` writes a group
    for name in ("step_start", "step_finish", "record", "event", "__call__", "commit"):
        p.set(obs, name, timer.wrap("persist_write", getattr(obs, name)))
    p.set(obs, "lookup", timer.wrap("db_read", obs.lookup))
    p.set(obs, "__init__", timer.wrap("db_read", obs.__init__))
    p.set(execution, "run_claim", timer.wrap("persist_write", execution.run_claim))
    for name in ("run_heartbeat", "run_succeed"):
        p.set(run_context, name, timer.wrap("persist_write", getattr(run_context, name)))
    p.set(memory, "memory_append", timer.wrap("persist_write", memory.memory_append))
    p.set(memory, "memory_for_prompt", timer.wrap("db_read", memory.memory_for_prompt))
    agents = nodes.DiagnosisAgents
    for name in ("planner", "executor", "verifier", "composer", "evidence_retry", "fallback"):
        p.set(agents, name, timer.wrap("agents", getattr(agents, name)))
    for name in ("gatekeeper", "verified_input"):
        p.set(agents, name, timer.wrap("gatekeeper", getattr(agents, name)))
    p.set(registry.ToolBox, "call", timer.wrap("tools", registry.ToolBox.call))
    p.set(runs, "map_run_result", timer.wrap("engine", runs.map_run_result))
    build = runs.build_diagnosis_graph
    p.set(runs, "build_diagnosis_graph", lambda ports: TimedGraph(build(ports), timer))
    return p


class SqlCounter:
    """SQL statements by verb and the time inside the driver's execute; with `track(connection)`, also
    COMMITs, autocommit switches (each one more round trip to a MySQL server) and the writes run in
    autocommit (each one a transaction, and a commit, of its own)."""

    def __init__(self):
        self.count: dict[str, int] = {}
        self.seconds = 0.0
        self.commits = 0
        self.autocommit_switches = 0
        self.autocommit_writes = 0
        self.patches = Patches()

    def track(self, connection) -> None:
        commit, switch = connection._commit, connection._set_autocommit

        def counted_commit():
            self.commits += 1
            return commit()

        def counted_switch(autocommit):
            self.autocommit_switches += 1
            return switch(autocommit)

        self.patches.set(connection, "_commit", counted_commit)
        self.patches.set(connection, "_set_autocommit", counted_switch)

    def __call__(self, execute, sql, params, many, context):
        verb = sql.lstrip().split(None, 1)[0].upper()
        self.count[verb] = self.count.get(verb, 0) + 1
        if verb in ("INSERT", "UPDATE", "DELETE") and not context["connection"].in_atomic_block:
            self.autocommit_writes += 1
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - start


def new_run(user, question: str = QUESTION):
    from diagnosis.ids import new_session_id
    from diagnosis.models import ChatSession, DiagnosisRun

    session = ChatSession.objects.create(session_id=new_session_id(), owner=user)
    return DiagnosisRun.objects.create(session=session, question=question)


def execute(user, timer: LayerTimer | None = None, run=None):
    from diagnosis.services.execution import run_execute

    run = run or new_run(user)
    start = time.perf_counter()
    if timer is None:
        run_execute(run_id=run.run_id)
    else:
        timer.enter("rest")
        try:
            run_execute(run_id=run.run_id)
        finally:
            timer.exit()
    return time.perf_counter() - start, run


def check_run(run, *, verdict: str | None = "PASS") -> dict:
    from diagnosis.models import AgentStep, DiagnosisRun, RunEvent, ToolInvocation
    from diagnosis.selectors import run_events_after

    run = DiagnosisRun.objects.get(pk=run.pk)
    # Progress events: what a reader of the run's log sees; "event rows" the ones stored as run_event
    # (a step's start and end and a tool call are told by their own rows).
    rows = {"steps": AgentStep.objects.filter(run=run).count(), "invocations": ToolInvocation.objects.filter(run=run).count(),
            "events": len(run_events_after(run_pk=run.pk, after=0)), "event_rows": RunEvent.objects.filter(run=run).count()}
    # The scripted run must be the verified path itself (no fallback, one step per scripted call).
    if run.status != "SUCCESS" or (verdict and (run.effective_verdict != verdict or run.degraded
                                                or rows["steps"] != SCRIPTED_MODEL_CALLS)):
        raise SystemExit(f"the bench run did not take the expected path: status={run.status} verdict={run.effective_verdict} "
                         f"error={run.error_code} {run.error_message[:300]} degraded={run.degraded}")
    return {**rows, "verdict": run.effective_verdict, "degraded": run.degraded}


def measure(label: str, user, *, model_factory, runs: int, seconds: float, warmup: int) -> dict:
    """Interleave plain and instrumented runs; returns totals and per-layer samples (seconds)."""
    from django.db import connection

    from diagnosis.services import wiring

    p = Patches()
    plain_model = model_factory()
    p.set(wiring, "chat_model", lambda: plain_model)
    try:
        for _ in range(warmup):
            execute(user)
        rows = check_run(execute(user)[1], verdict="PASS" if model_factory is ScriptedModel else None)

        sql, sql_runs = SqlCounter(), 5
        counted = [new_run(user) for _ in range(sql_runs)]  # created outside the count
        sql.track(connection)
        try:
            with connection.execute_wrapper(sql):
                for run in counted:
                    execute(user, run=run)
        finally:
            sql.patches.undo()

        timer = LayerTimer()
        timed_model = TimedModel(model_factory(), timer)
        plain, cpu, instrumented, layers = [], [], [], {key: [] for key, _ in LAYERS}
        deadline = time.monotonic() + seconds
        while len(plain) < runs and time.monotonic() < deadline:
            cpu_start = time.process_time()
            plain.append(execute(user)[0])
            cpu.append(time.process_time() - cpu_start)
            patches = instrument(timer)
            patches.set(wiring, "chat_model", lambda: timed_model)
            timer.reset()
            try:
                total, _ = execute(user, timer)
            finally:
                patches.undo()
            instrumented.append(total)
            for key, _ in LAYERS:
                layers[key].append(timer.totals.get(key, 0.0))
            calls = dict(timer.calls)
    finally:
        p.undo()
    return {"label": label, "plain": plain, "cpu": cpu, "instrumented": instrumented, "layers": layers, "rows": rows,
            "sql": {verb: n / sql_runs for verb, n in sorted(sql.count.items())}, "sql_seconds": sql.seconds / sql_runs,
            "commits": sql.commits / sql_runs, "switches": sql.autocommit_switches / sql_runs,
            "autocommit_writes": sql.autocommit_writes / sql_runs, "calls": calls}


def report(result: dict, *, model_calls: float, engine: str, exclude_tools: bool = False) -> dict:
    plain_med, plain_p95 = summary(result["plain"])
    inst_med, inst_p95 = summary(result["instrumented"])
    layers = {key: statistics.median(v) for key, v in result["layers"].items()}
    layer_sum = sum(layers.values()) or 1.0
    print(f"\n== {result['label']} ({engine}) ==")
    rows = result["rows"]
    print(f"per run: {rows['steps']} agent steps, {rows['invocations']} tool invocations, {rows['events']} progress events ({rows['event_rows']} stored as run_event), "
          f"verdict {rows['verdict']}, degraded {rows['degraded']}")
    sql_total = sum(result["sql"].values())
    print("SQL statements per run: " + ", ".join(f"{verb} {n:g}" for verb, n in result["sql"].items())
          + f" (total {sql_total:g}; {result['sql_seconds'] * 1000:.2f} ms inside the driver's execute)")
    print(f"transactions per run: {result['commits'] + result['autocommit_writes']:g} commits = {result['commits']:g} explicit "
          f"COMMITs (atomic blocks) + {result['autocommit_writes']:g} writes in autocommit (each commits on its own); "
          f"{result['switches']:g} autocommit switches")
    print(f"runs timed: {len(result['plain'])} plain + {len(result['instrumented'])} instrumented, interleaved")
    print(f"total per run (plain)          median {plain_med * 1000:8.2f} ms   p95 {plain_p95 * 1000:8.2f} ms")
    print(f"total per run (instrumented)   median {inst_med * 1000:8.2f} ms   p95 {inst_p95 * 1000:8.2f} ms")
    cpu_med, cpu_p95 = summary(result["cpu"])
    print(f"CPU time of this process per run (plain)  median {cpu_med * 1000:6.2f} ms   p95 {cpu_p95 * 1000:6.2f} ms"
          f"   (the rest of the wall time is waiting: database round trips and commits)")
    # On a shared machine the neighbours only ever add CPU time: the least disturbed runs compare best.
    print(f"CPU time per run (plain), least disturbed runs: min {min(result['cpu']) * 1000:6.2f} ms"
          f"   p10 {percentile(result['cpu'], 10) * 1000:6.2f} ms")
    print(f"{'layer (exclusive time, median of instrumented runs)':<66}{'ms':>8}{'share':>8}")
    for key, label in LAYERS:
        print(f"  {label:<64}{layers[key] * 1000:8.2f}{layers[key] / layer_sum * 100:7.1f}%")
    model = layers["model"]
    # Part 1's tools are in-memory, so everything but the model is service overhead. In part 2 the
    # tools layer also holds the demo backend's own work, so it is left out of the overhead there.
    excluded = model + (layers["tools"] if exclude_tools else 0.0)
    overhead = max(0.0, plain_med - excluded)
    wall = overhead + model_calls * MODEL_CALL_SECONDS
    share = overhead / wall
    what = "model and tools time" if exclude_tools else "model time"
    print(f"service overhead per run (plain median minus {what}): {overhead * 1000:.2f} ms over {model_calls:g} model calls "
          f"= {overhead / model_calls * 1000:.2f} ms per model call")
    print(f"with {MODEL_CALL_SECONDS * 1000:.0f} ms per model call: overhead / wall = {overhead * 1000:.1f} / "
          f"{wall * 1000:.0f} ms = {share * 100:.2f}% (goal <= {GOAL_SHARE * 100:.0f}%: "
          f"{'met' if share <= GOAL_SHARE else 'MISSED'})")
    return {"median_ms": plain_med * 1000, "p95_ms": plain_p95 * 1000, "overhead_ms": overhead * 1000, "share": share}


def offline_factory():
    from diagnosis.services import wiring

    return wiring.chat_model()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mysql", action="store_true", help="use a fresh MySQL database bench_run_overhead")
    parser.add_argument("--db-name", default="bench_run_overhead",
                        help="name of the fresh database (bench_<word>): two benches at once need two names")
    parser.add_argument("--mysql-port", type=int, default=None,
                        help="port of the MySQL server on 127.0.0.1 (default 3306), e.g. a second instance with other settings")
    parser.add_argument("--runs", type=int, default=150, help="timed plain runs (and as many instrumented) of part 1")
    parser.add_argument("--offline-runs", type=int, default=25, help="timed plain runs of part 2")
    parser.add_argument("--seconds", type=float, default=50, help="time cap of each part's timed loop")
    parser.add_argument("--sqlite-tuned", action="store_true",
                        help="what-if: SQLite with WAL, synchronous=NORMAL, IMMEDIATE transactions (bench/whatif_settings.py)")
    parser.add_argument("--skip-offline", action="store_true", help="only part 1")
    parser.add_argument("--code", type=Path, default=None,
                        help="run the service from this checkout (e.g. /work/main, the code before a change), same bench")
    args = parser.parse_args()
    if args.code is not None:
        import _support

        _support.use_code(args.code)
    if args.sqlite_tuned and args.mysql:
        parser.error("--sqlite-tuned applies to SQLite only")
    if args.mysql_port is not None:
        if not args.mysql:
            parser.error("--mysql-port applies to --mysql only")
        import _support

        _support.MYSQL_PORT = args.mysql_port

    with bench_database(mysql=args.mysql, name=args.db_name, sqlite_tuned=args.sqlite_tuned) as db:
        from django.conf import settings

        from diagnosis.services import wiring
        from diagnosis.services.knowledge import knowledge_load_folder
        from diagnosis.tools.backends.demo import DemoBackend

        import diagnosis

        print(machine_line())
        print(f"service code: {Path(diagnosis.__file__).resolve().parents[1]}")
        print(f"database: {db.engine}{' (what-if: bench/whatif_settings.py)' if args.sqlite_tuned else ''} "
              f"({settings.DATABASES['default']['ENGINE']}), cache: "
              f"{settings.CACHES['default']['BACKEND'].rsplit('.', 1)[-1]}, DEBUG={settings.DEBUG}")
        user = bench_user()

        # Part 1: zero-latency model and tools.
        p = Patches()
        p.set(wiring, "KnowledgeSearch", InMemoryKnowledge)
        try:
            with wiring.telemetry_override(InMemoryTelemetry()):
                scripted = measure("zero-latency scripted model, in-memory tools", user, model_factory=ScriptedModel,
                                   runs=args.runs, seconds=args.seconds, warmup=10)
        finally:
            p.undo()
        headline = report(scripted, model_calls=SCRIPTED_MODEL_CALLS, engine=db.engine)
        if db.engine == "mysql":
            verdict = "met" if headline["median_ms"] <= GOAL_MS else "MISSED"
            print(f"goal: median <= {GOAL_MS:.0f} ms per diagnosis run on MySQL: {headline['median_ms']:.2f} ms ({verdict})")

        if args.skip_offline:
            return
        # Part 2: the offline analyser on the payment scenario, real demo backend and knowledge.
        root = Path(settings.DEMO_SCENARIOS_DIR)
        for folder in sorted(d / "runbooks" for d in root.iterdir() if (d / "runbooks").is_dir()):
            knowledge_load_folder(folder=folder, prefix="runbooks/")
        with wiring.telemetry_override(DemoBackend([root / "payment-db-pool-exhaustion"])):
            offline = measure("offline analyser, demo scenario payment-db-pool-exhaustion", user,
                              model_factory=offline_factory, runs=args.offline_runs, seconds=args.seconds, warmup=3)
        report(offline, model_calls=offline["rows"]["steps"], engine=db.engine, exclude_tools=True)
        print("\nnote: 'model' in part 2 is the offline analyser's own CPU time (rule-based analysis), not network latency;"
              " 'tools' includes the demo backend's filtering and BM25 over the loaded runbooks.")


if __name__ == "__main__":
    main()
