"""Trace API on large runs: query count and latency of GET /api/diagnosis/{sessionId}/trace against
a naive nested-serializer baseline.

Runs with 32, 200 and 1,000 agent steps and one tool invocation per step (realistic payloads: a
~1.5 KB model input, a ~0.5 KB model output and a ~1 KB tool result each) are written directly.
The real endpoint is called through the Django test client (the whole stack: URL routing,
middleware, DRF, JSON rendering) with a force-authenticated user. The baseline is a DRF
ModelSerializer with nested step and invocation serializers and a per-row lookup of each
invocation's step (the classic N+1), defined in this script and called like the real view through
APIRequestFactory; the real view is called the same way for a like-for-like ratio.

    .venv/bin/python bench/trace_api.py            # SQLite in a temp folder
    .venv/bin/python bench/trace_api.py --mysql    # database bench_trace_api on 127.0.0.1:3306
"""

from __future__ import annotations

import argparse
import gc
import time

from _support import bench_database, bench_user, machine_line, summary

SIZES = (32, 200, 1000)
NODES = ("planner", "executor", "executor", "executor", "verifier", "composer")


def make_run(user, steps: int):
    from diagnosis.ids import new_session_id
    from diagnosis.models import AgentStep, ChatSession, DiagnosisRun, ToolInvocation

    session = ChatSession.objects.create(session_id=new_session_id(), owner=user, title=f"trace bench {steps}")
    run = DiagnosisRun.objects.create(
        session=session, question="Why is payment-service failing?", status="SUCCESS", answer="**Root cause:** pool " * 20,
        effective_verdict="PASS", step_count=steps, tool_count=steps,
        self_evaluation={"rule_evaluation": {"citation_validity_rate": 1.0, "claims_verified": 3}},
        orchestration_trace={"version": "stategraph-v1", "transitions": [{"from": "planner", "to": "executor",
                             "reason_code": "completed", "attempt": 1}] * 6, "final_node": "composer",
                             "termination_reason": "composer_completed", "degraded": False, "evidence_retry_count": 0},
    )
    prompt = "You are the executor. Use the tools to collect evidence. " * 25  # ~1.5 KB
    AgentStep.objects.bulk_create([
        AgentStep(run=run, session_id=session.session_id, step_index=i, node=NODES[i % len(NODES)],
                  agent=NODES[i % len(NODES)], attempt=1, model_name="bench-model", status="COMPLETED",
                  model_input=[{"role": "system", "content": prompt}, {"role": "user", "content": f"step {i}"}],
                  model_output={"content": "{\"claims\": []} " * 30, "tool_calls": [], "usage": {"prompt_tokens": 400}},
                  duration_ms=5, prompt_tokens=400, completion_tokens=80)
        for i in range(steps)
    ], batch_size=200)
    step_ids = list(AgentStep.objects.filter(run=run).order_by("step_index").values_list("id", flat=True))
    records = [{"timestamp": f"2026-01-01T00:0{k}:00Z", "service": "payment-service", "level": "ERROR",
                "message": "HikariPool-1 - Connection is not available, request timed out after 30000ms."} for k in range(8)]
    ToolInvocation.objects.bulk_create([
        ToolInvocation(run=run, session_id=session.session_id, step_id=step_ids[i], invocation_id=f"inv-{i:08x}",
                       tool_name="query_logs", arguments={"service": "payment-service", "query": "level:ERROR"},
                       status="SUCCESS", result={"backend": "demo", "total": 8, "records": records}, duration_ms=1)
        for i in range(steps)
    ], batch_size=200)
    return run


def naive_view():
    """The baseline: nested ModelSerializers, no select_related/annotate, a per-invocation step lookup."""
    from rest_framework import serializers
    from rest_framework.response import Response
    from rest_framework.views import APIView

    from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation

    class StepSerializer(serializers.ModelSerializer):
        class Meta:
            model = AgentStep
            fields = ["step_index", "node", "agent", "attempt", "status", "model_name", "model_input", "model_output",
                      "has_tool_call", "duration_ms", "prompt_tokens", "completion_tokens", "error", "started_at",
                      "finished_at"]

    class InvocationSerializer(serializers.ModelSerializer):
        step_index = serializers.SerializerMethodField()

        class Meta:
            model = ToolInvocation
            fields = ["invocation_id", "step_index", "tool_name", "arguments", "status", "result", "truncated",
                      "error_message", "retrieval_details", "evidence_refs", "duration_ms", "created_at"]

        def get_step_index(self, obj):
            return obj.step.step_index if obj.step_id else None  # one query per invocation

    class RunSerializer(serializers.ModelSerializer):
        session_id = serializers.CharField(source="session.session_id")
        session_title = serializers.CharField(source="session.title")
        steps = StepSerializer(many=True)
        tool_invocations = InvocationSerializer(many=True)

        class Meta:
            model = DiagnosisRun
            fields = ["run_id", "session_id", "session_title", "agent_flow", "strategy", "status", "question", "answer",
                      "degraded", "effective_verdict", "self_evaluation", "orchestration_trace", "feedback",
                      "error_code", "error_message", "duration_ms", "step_count", "tool_count", "prompt_tokens",
                      "completion_tokens", "model_name", "prompt_version", "created_at", "started_at", "finished_at",
                      "steps", "tool_invocations"]

    class NaiveTraceView(APIView):
        def get(self, request, session_id):
            run = DiagnosisRun.objects.get(run_id=request.query_params["runId"], session__session_id=session_id,
                                           session__owner=request.user)
            return Response(RunSerializer(run).data)

    return NaiveTraceView.as_view()


def queries_of(fn) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        fn()
    return len(captured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mysql", action="store_true", help="use a fresh MySQL database bench_trace_api")
    parser.add_argument("--seconds", type=float, default=40, help="time cap per run size")
    args = parser.parse_args()

    with bench_database(mysql=args.mysql, name="bench_trace_api") as db:
        from django.urls import reverse
        from rest_framework.test import APIClient, APIRequestFactory, force_authenticate

        from traces.api import TraceApi

        print(machine_line())
        print(f"database: {db.engine}; user force-authenticated (token auth would add one query)")
        user = bench_user()
        client = APIClient()
        client.force_authenticate(user)
        factory = APIRequestFactory()
        real, naive = TraceApi.as_view(), naive_view()

        header = (f"{'steps':>6} {'inv':>5} {'KB':>6} | {'endpoint q':>10} {'p50 ms':>8} {'p95 ms':>8} | "
                  f"{'view q':>6} {'p50 ms':>8} | {'naive q':>7} {'p50 ms':>8} {'p95 ms':>8} | {'naive/view':>10}")
        print(header)
        print("-" * len(header))
        for steps in SIZES:
            run = make_run(user, steps)
            sid = run.session.session_id
            url = reverse("diagnosis-trace", kwargs={"session_id": sid}) + f"?runId={run.run_id}"

            def via_client():
                response = client.get(url)
                assert response.status_code == 200, response.content[:300]
                return response

            def via_view(view):
                def call():
                    request = factory.get(url)
                    force_authenticate(request, user=user)
                    response = view(request, session_id=sid)
                    response.render()
                    assert response.status_code == 200, response.content[:300]
                    return response
                return call

            body = via_client().content
            data = via_client().json()
            assert len(data["steps"]) == steps and len(data["toolInvocations"]) == steps
            assert all(i["stepIndex"] is not None for i in data["toolInvocations"])
            naive_body = via_view(naive)().content
            q_client, q_view, q_naive = queries_of(via_client), queries_of(via_view(real)), queries_of(via_view(naive))

            samples = {"client": [], "view": [], "naive": []}
            calls = {"client": via_client, "view": via_view(real), "naive": via_view(naive)}
            for fn in calls.values():  # warm-up
                fn()
            deadline = time.monotonic() + args.seconds
            rounds = max(20, min(200, 20000 // steps))
            for _ in range(rounds):
                for name, fn in calls.items():
                    gc.collect()  # each sample starts from a clean heap, so one call's garbage is not billed to the next
                    start = time.perf_counter()
                    fn()
                    samples[name].append((time.perf_counter() - start) * 1000)
                if time.monotonic() > deadline:
                    break
            c50, c95 = summary(samples["client"])
            v50, _ = summary(samples["view"])
            n50, n95 = summary(samples["naive"])
            print(f"{steps:>6} {steps:>5} {len(body) / 1024:>6.0f} | {q_client:>10} {c50:>8.2f} {c95:>8.2f} | "
                  f"{q_view:>6} {v50:>8.2f} | {q_naive:>7} {n50:>8.2f} {n95:>8.2f} | {n50 / v50:>9.2f}x"
                  f"   (n={len(samples['client'])}, naive body {len(naive_body) / 1024:.0f} KB)")
        print("endpoint = the real GET through the test client; view = the real view through APIRequestFactory; "
              "naive = the nested-ModelSerializer baseline through APIRequestFactory; q = SQL queries per request.")


if __name__ == "__main__":
    main()
