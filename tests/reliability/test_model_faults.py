"""Model faults at every node: a scripted OpenAI-compatible server answers 429, 500, a stall past the
read timeout, malformed JSON, a tool outside the allow-list or unparsable tool arguments, at the
planner, executor, verifier or composer, once (transient) or every time (persistent).

Every run ends SUCCESS (degraded when the fallback answered) or FAILED with a reason, never
RUNNING; the requests each role sent are exactly what the retry caps allow, and the answer cites
only evidence that really exists."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from diagnosis.services.execution import run_execute
from tests.reliability.scripted import HAPPY, PLAN, ROLES, TOOL_CALL, evidence_from_logs, script_happy
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db

# A stall must outlast the read timeout, and every other answer, retries included, must come back well
# within it. At 0.3 s a loaded machine once answered the client's retry after a 429 too late: the
# executor (which the graph never retries) took the fallback and the request counts differed. So the
# read timeout is short only where a stall is scripted, and has room to spare (READ_TIMEOUT < STALL).
READ_TIMEOUT, STALL, MAX_RETRIES = 1.0, 3.0, 1
ANSWER_READ_TIMEOUT = 10.0  # a scripted fault that is not a stall: no answer comes near it
GRAPH_ATTEMPTS = {"planner": 2, "executor": 1, "verifier": 2, "composer": 2}  # MAX_TECHNICAL_RETRIES = 1; executor never
HAPPY_REQUESTS = {"planner": 1, "executor": 2, "verifier": 1, "composer": 1}  # a tool call, then the evidence report
FAULTS = {
    "http_429": Reply.error(429, "slow down", retry_after=0),
    "http_500": Reply.error(500, "upstream exploded"),
    "stall": Reply.stall(STALL),
    "malformed_json": Reply.malformed_json(),
    "invalid_tool_name": Reply.tool_calls(("run_shell", {"cmd": "cat /etc/passwd"}, "call_x")),
    "invalid_tool_args": Reply.invalid_tool_args(),
}
RETRYABLE = {"http_429", "http_500", "stall"}  # retried by the client; the rest are invalid output
INV_RE = re.compile(r"\binv-[0-9a-f]{8}\b")

TALLY: Counter = Counter()


@pytest.fixture(scope="module", autouse=True)
def _print_tally():
    yield
    if TALLY:
        print(f"\nmodel faults: {TALLY['runs']} diagnosis runs (6 faults x 4 nodes x transient/persistent), "
              f"SUCCESS {TALLY['SUCCESS']} (degraded {TALLY['degraded']}), FAILED {TALLY['FAILED']}, "
              f"left RUNNING/PENDING {TALLY['stuck']}, model requests {TALLY['requests']}, requests over cap {TALLY['over_cap']}")


@pytest.fixture
def scripted(openai_llm, settings, demo_knowledge, request):
    callspec = getattr(request.node, "callspec", None)
    fault = callspec.params.get("fault") if callspec else None
    settings.LLM_READ_TIMEOUT = ANSWER_READ_TIMEOUT if fault in FAULTS and fault != "stall" else READ_TIMEOUT
    settings.LLM_MAX_RETRIES = MAX_RETRIES
    return openai_llm


def expected_requests(fault: str, node: str, persistent: bool) -> dict[str, int]:
    """How many requests each role may send: the caps, counted exactly."""
    retryable = fault in RETRYABLE
    per_attempt = 1 + MAX_RETRIES if retryable else 1
    order = list(ROLES)
    counts = {role: 0 for role in ROLES}
    for role in order[:order.index(node)]:
        counts[role] = HAPPY_REQUESTS[role]
    if persistent:
        counts[node] = GRAPH_ATTEMPTS[node] * per_attempt
        return counts  # the node never recovers: the fallback answers, nothing after it is asked
    if retryable:  # the client's retry absorbs one fault
        counts[node] = HAPPY_REQUESTS[node] + 1
    elif node == "executor":  # invalid output at the executor is never retried: fallback
        return {**counts, "executor": 1}
    else:  # one technical retry in the graph
        counts[node] = HAPPY_REQUESTS[node] + 1
    for role in order[order.index(node) + 1:]:
        counts[role] = HAPPY_REQUESTS[role]
    return counts


def expected_route(fault: str, node: str) -> list[tuple[str, str, str]]:
    """The transitions out of a node that fails every time: one technical retry, then the fallback."""
    if node == "executor":
        reason = "failed" if fault in RETRYABLE else "tool_blocked" if fault == "invalid_tool_name" else "invalid_output"
        return [("executor", "fallback", reason)]
    first = "retryable_failed" if fault in RETRYABLE else "invalid_output"
    return [(node, node, first), (node, "fallback", "retry_exhausted")]


def route_from(run: DiagnosisRun, node: str) -> list[tuple[str, str, str]]:
    return [(t["from"], t["to"], t["reason_code"]) for t in run.orchestration_trace["transitions"] if t["from"] == node]


def inject(fake, fault: str, node: str, persistent: bool) -> None:
    script_happy(fake)
    if persistent:
        fake.always(FAULTS[fault], role=node)
    else:
        fake.enqueue(FAULTS[fault], role=node)


def assert_honest(run: DiagnosisRun) -> None:
    """The answer cites only invocations of this run that succeeded; nothing is left running."""
    assert run.status in DiagnosisRun.TERMINAL
    assert not AgentStep.objects.filter(run=run, status="RUNNING").exists()
    succeeded = set(ToolInvocation.objects.filter(run=run, status="SUCCESS").values_list("invocation_id", flat=True))
    assert set(INV_RE.findall(run.answer)) <= succeeded, run.answer
    if run.status == DiagnosisRun.Status.FAILED:
        assert run.error_code and run.error_message
    else:
        assert run.answer.strip() and not run.error_code


@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "transient"])
@pytest.mark.parametrize("node", ROLES)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_model_fault_at_a_node_ends_in_retry_or_fallback_within_the_caps(scripted, make_run, fault, node, persistent):
    inject(scripted, fault, node, persistent)

    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)

    run.refresh_from_db()
    sent = {role: len(scripted.requests_for(role)) for role in ROLES}
    TALLY.update(runs=1, faults=1, requests=sum(sent.values()), **{run.status: 1},
                 degraded=int(run.degraded), stuck=int(not run.is_terminal),
                 over_cap=sum(max(0, sent[r] - n) for r, n in expected_requests(fault, node, persistent).items()))
    assert_honest(run)
    assert sent == expected_requests(fault, node, persistent)
    trace = run.orchestration_trace
    degraded = persistent or (node == "executor" and fault not in RETRYABLE)
    assert run.status == DiagnosisRun.Status.SUCCESS
    assert run.degraded is degraded and (trace["final_node"] == "fallback") is degraded
    if persistent:
        assert AgentStep.objects.filter(run=run, node=node).count() == GRAPH_ATTEMPTS[node]
        assert route_from(run, node) == expected_route(fault, node)
        assert "degraded answer" in run.answer
        # never a fabricated verdict: a degraded (fallback) answer has none; the trace keeps the verifier's
        assert run.effective_verdict == ""
        verifier_verdict = run.self_evaluation["verifier_evaluation"]["verifierVerdict"]
        assert verifier_verdict == ("PASS" if node == "composer" else None)
    if fault == "invalid_tool_name" and node == "executor":
        blocked = ToolInvocation.objects.get(run=run, tool_name="run_shell")
        assert blocked.status == "BLOCKED" and blocked.result is None
        assert any(t["reason_code"] == "tool_blocked" for t in trace["transitions"])
    if not degraded:
        assert run.effective_verdict == "PASS" and INV_RE.search(run.answer)


@pytest.mark.parametrize("fault", ["http_429", "http_500", "stall"])
def test_a_simple_chat_whose_model_keeps_failing_ends_in_the_degraded_fallback_with_the_reason(scripted, make_run, fault):
    scripted.always(FAULTS[fault])
    run = run_execute(run_id=make_run("hello there", strategy=DiagnosisRun.Strategy.SIMPLE).run_id)
    assert_honest(run)
    code = {"http_429": "model_rate_limited", "http_500": "model_server_error", "stall": "model_timeout"}[fault]
    assert run.status == DiagnosisRun.Status.SUCCESS and run.degraded
    assert "degraded answer" in run.answer and code in run.answer
    assert run.self_evaluation["rule_evaluation"]["fallback_reason"] == code
    assert len(scripted.requests) == 1 + MAX_RETRIES
    assert AgentStep.objects.get(run=run).status == "FAILED"
    print(f"\nsimple chat, model {fault} every time: degraded fallback ({code}) after {len(scripted.requests)} requests (cap {1 + MAX_RETRIES})")


# --- per-run budgets ---------------------------------------------------------------------------------


def budget_of(run: DiagnosisRun) -> dict:
    return run.self_evaluation["rule_evaluation"]["budget"]


def test_the_model_call_budget_stops_the_run_at_its_limit(scripted, make_run, settings):
    settings.DIAGNOSIS_MAX_MODEL_CALLS = 2
    script_happy(scripted)
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    budget = budget_of(run)
    print(f"\nbudget model calls: limit 2, requests sent {len(scripted.requests)}, recorded {budget['model_calls']}, exceeded={budget['exceeded']!r}")
    assert len(scripted.requests) == 2  # planner, executor's tool call; the third call is refused before it is sent
    assert run.status == "SUCCESS" and run.degraded and "model-call budget of 2" in budget["exceeded"]
    assert budget["model_calls"] <= budget["max_model_calls"] == 2
    refused = AgentStep.objects.filter(run=run).order_by("step_index").last()
    assert refused.status == "FAILED" and refused.error.startswith("budget_exceeded")


def test_the_tool_call_budget_blocks_calls_beyond_its_limit(scripted, make_run, settings):
    settings.DIAGNOSIS_MAX_TOOL_CALLS = 1
    three_calls = Reply.tool_calls(*[("query_logs", {"service": "payment-service", "query": "level:ERROR"}, f"call_{i}") for i in range(3)])
    script_happy(scripted, executor=lambda request: evidence_from_logs(request) if request.tool_results else three_calls)
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    statuses = Counter(ToolInvocation.objects.filter(run=run).values_list("status", flat=True))
    budget = budget_of(run)
    print(f"\nbudget tool calls: limit 1, asked 3, executed {statuses['SUCCESS']}, blocked {statuses['BLOCKED']}")
    assert statuses == {"SUCCESS": 1, "BLOCKED": 2}
    assert all("tool-call budget of 1" in e for e in ToolInvocation.objects.filter(run=run, status="BLOCKED").values_list("error_message", flat=True))
    assert (budget["tool_calls"], budget["max_tool_calls"]) == (1, 1)
    assert run.status == "SUCCESS" and run.self_evaluation["rule_evaluation"]["tool_calls_by_status"] == {"SUCCESS": 1, "BLOCKED": 2}


def test_the_token_budget_stops_the_run_once_spent(scripted, make_run, settings):
    settings.DIAGNOSIS_MAX_TOKENS = 1000
    script_happy(scripted, planner=Reply.json(PLAN, usage=(900, 200)))
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    budget = budget_of(run)
    print(f"\nbudget tokens: limit 1000, spent {budget['prompt_tokens'] + budget['completion_tokens']}, "
          f"requests after the limit {len(scripted.requests) - 1}, exceeded={budget['exceeded']!r}")
    assert [r.role for r in scripted.requests] == ["planner"]
    assert run.status == "SUCCESS" and run.degraded and "token budget of 1000" in budget["exceeded"]
    assert (run.prompt_tokens, run.completion_tokens) == (900, 200)


def test_the_wall_time_budget_stops_the_run_once_spent(scripted, make_run, settings):
    settings.DIAGNOSIS_MAX_SECONDS = 1
    settings.LLM_READ_TIMEOUT = 3.0
    script_happy(scripted, planner=Reply.stall(1.2, then=Reply.json(PLAN)))
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    budget = budget_of(run)
    print(f"\nbudget wall time: limit 1s, elapsed {budget['elapsed_seconds']}s, exceeded={budget['exceeded']!r}")
    assert [r.role for r in scripted.requests] == ["planner"]
    assert run.status == "SUCCESS" and run.degraded and "wall-time budget of 1s" in budget["exceeded"]
    assert budget["elapsed_seconds"] < 3


def test_a_stalled_model_never_holds_a_run_past_timeout_times_attempts(scripted, make_run):
    """The worst case for a node is bounded: attempts x (read timeout + backoff), not the stall."""
    script_happy(scripted, planner=Reply.stall(30))
    run = run_execute(run_id=make_run("Why is payment-service failing?").run_id)
    assert run.status == "SUCCESS" and run.degraded
    bound = GRAPH_ATTEMPTS["planner"] * (1 + MAX_RETRIES) * (READ_TIMEOUT + 2.0)
    assert run.duration_ms < 1000 * bound
    print(f"\nplanner stalls 30s every time: run ended degraded in {run.duration_ms / 1000:.1f}s (bound {bound:g}s), "
          f"{len(scripted.requests_for('planner'))} planner requests")
