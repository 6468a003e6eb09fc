"""Broken dependencies: the task queue or the whole Redis stopped, metrics and logs backends down, the
database unreachable. Each answers honestly (503 naming the part, ERROR invocations, a degraded
answer) and no run is left PENDING."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from rest_framework.test import APIClient

from diagnosis.models import DiagnosisRun, ToolInvocation
from diagnosis.services.execution import run_execute
from tests.reliability.conftest import closed_port
from tests.reliability.scripted import PLAN, VERDICT_PASS, compose_citing_evidence, script_happy
from tests.support.fake_openai import Reply
from tests.support.worker import ROOT

INV_RE = re.compile(r"\binv-[0-9a-f]{8}\b")
QUESTION = "Why is payment-service failing?"


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def cited(run: DiagnosisRun) -> set[str]:
    return set(INV_RE.findall(run.answer))


# --- the task queue (Redis) -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("wait", [False, True])
def test_chat_with_the_broker_down_answers_503_and_records_the_run_failed(alice, dead_broker, wait):
    started = time.monotonic()
    response = api_for(alice).post("/api/chat", {"question": QUESTION, "wait": wait}, format="json")
    elapsed = time.monotonic() - started

    assert response.status_code == 503, response.content
    error = response.json()["error"]
    assert error["code"] == "broker_unavailable" and "task queue" in error["message"] and response["Retry-After"]
    runs = list(DiagnosisRun.objects.values_list("status", "error_code"))
    assert runs == [("FAILED", "broker_unavailable")]  # recorded, never an orphaned PENDING run
    assert elapsed < 10
    print(f"\nbroker down (wait={wait}): 503 in {elapsed:.2f}s, runs {len(runs)}, PENDING 0")


@pytest.mark.django_db(transaction=True)
def test_chat_with_the_whole_redis_down_answers_503_and_leaves_no_pending_run(alice, dead_broker, settings):
    """Broker and cache share REDIS_URL: when Redis stops, the throttle's counters are gone too."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": dead_broker,
                                   "KEY_PREFIX": "aiops", "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}}
    client = api_for(alice)
    client.raise_request_exception = False  # a crash must show as the 500 a real client would get

    started = time.monotonic()
    response = client.post("/api/chat", {"question": QUESTION, "wait": False}, format="json")
    elapsed = time.monotonic() - started

    assert response.status_code == 503, response.content
    assert "Redis" in response.json()["error"]["message"] and response["Retry-After"]
    assert not DiagnosisRun.objects.filter(status=DiagnosisRun.Status.PENDING).exists()
    print(f"\nredis down (broker + cache): 503 {response.json()['error']['code']} in {elapsed:.2f}s, "
          f"runs created {DiagnosisRun.objects.count()}, PENDING 0")


@pytest.mark.django_db
def test_health_reports_the_broker_down(dead_broker):
    response = APIClient().get("/api/health")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["broker"]["ok"] is False and checks["broker"]["error"]
    assert checks["database"] == {"ok": True}
    print(f"\nhealth, broker down: 503, broker error {checks['broker']['error'][:80]!r}")


# --- the database -------------------------------------------------------------------------------------


def manage_shell(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    environ.update(PYTHONUNBUFFERED="1", DJANGO_SETTINGS_MODULE="config.settings", LOG_LEVEL="ERROR", **env)
    return subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=60)


HEALTH = ("import json; from rest_framework.test import APIClient; r = APIClient().get('/api/health'); "
          "print('RESULT', json.dumps({'status': r.status_code, 'body': r.json()}))")


def result_of(proc: subprocess.CompletedProcess) -> dict:
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, f"no result (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return json.loads(line[len("RESULT "):])


def test_health_reports_the_database_unreachable_from_a_real_process(settings):
    """A server process whose DATABASE_URL points at a port where no MySQL listens."""
    redis_env = {"REDIS_URL": settings.REDIS_URL} if settings.REDIS_URL else {}
    started = time.monotonic()
    result = result_of(manage_shell(HEALTH, DATABASE_URL=f"mysql://root@127.0.0.1:{closed_port()}/aiops_gone", **redis_env))
    elapsed = time.monotonic() - started

    assert result["status"] == 503 and result["body"]["status"] == "unavailable"
    database = result["body"]["checks"]["database"]
    assert database["ok"] is False and "OperationalError" in database["error"] and "connect" in database["error"]
    assert result["body"]["checks"]["cache"] == {"ok": True} and result["body"]["checks"]["broker"] == {"ok": True}
    print(f"\nhealth, database unreachable (real process): 503 in {elapsed:.1f}s, {database['error'][:90]!r}")


API_WITH_DB_DOWN = (
    "import json; from rest_framework.test import APIClient; c = APIClient(); c.raise_request_exception = False; "
    "c.credentials(HTTP_AUTHORIZATION='Token ' + 'a' * 40); out = []; "
    "rs = [c.get('/api/runs/run-0123456789abcdef0123456789abcdef'), c.post('/api/chat', {'question': 'q'}, format='json'), "
    "c.get('/api/diagnosis/s-1/runs'), c.get('/api/runs/run-0123456789abcdef0123456789abcdef/events'), "
    "c.post('/api/feedback', {'sessionId': 's', 'runId': 'run-0123456789abcdef0123456789abcdef', 'feedback': 'useful'}, format='json')]; "
    "print('RESULT', json.dumps([{'status': r.status_code, 'type': r['Content-Type'], 'retry': r.get('Retry-After'), "
    "'body': r.content.decode()[:300]} for r in rs]))"
)


def test_with_the_database_unreachable_every_api_call_answers_503_json_with_retry_after(settings):
    """A server process whose database is gone: authentication itself cannot run. Never an HTML 500."""
    redis_env = {"REDIS_URL": settings.REDIS_URL} if settings.REDIS_URL else {}
    results = result_of(manage_shell(API_WITH_DB_DOWN, DATABASE_URL=f"mysql://root@127.0.0.1:{closed_port()}/aiops_gone",
                                     **redis_env))
    for result in results:
        assert result["status"] == 503 and result["retry"], result
        assert json.loads(result["body"])["error"]["code"] == "database_unavailable"
        # the events endpoint too: an error is a JSON body labelled as JSON, never an event stream
        assert result["type"] == "application/json", result
    print(f"\ndatabase unreachable (real process): {len(results)} API calls, all 503 database_unavailable JSON with Retry-After")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_process_whose_redis_is_stopped_answers_503_and_orphans_no_run(alice):
    """The whole process against a stopped Redis (broker, result backend and cache), on the real MySQL."""
    from tests.support.worker import test_database_url

    code = ("import json; from django.contrib.auth.models import User; from rest_framework.test import APIClient; "
            "c = APIClient(); c.raise_request_exception = False; c.force_authenticate(User.objects.get(username='alice')); "
            f"r = c.post('/api/chat', {{'question': {QUESTION!r}, 'wait': False}}, format='json'); "
            "h = APIClient().get('/api/health'); "
            "print('RESULT', json.dumps({'status': r.status_code, 'body': r.json() if r.status_code != 500 else None, "
            "'health': h.json()}))")
    result = result_of(manage_shell(code, DATABASE_URL=test_database_url(), REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0"))

    assert result["status"] == 503, result
    assert "Redis" in result["body"]["error"]["message"]
    assert not DiagnosisRun.objects.filter(status=DiagnosisRun.Status.PENDING).exists()
    checks = result["health"]["checks"]
    assert checks["broker"]["ok"] is False and checks["cache"]["ok"] is False and checks["database"]["ok"] is True
    print(f"\nredis stopped (real process, MySQL): chat 503 {result['body']['error']['code']}, "
          f"runs {DiagnosisRun.objects.count()}, PENDING 0; health broker+cache down")


# --- telemetry backends ----------------------------------------------------------------------------------


def backends_down(settings, *which: str) -> None:
    settings.BACKEND_TIMEOUT_SECONDS = 1.0
    if "metrics" in which:
        settings.METRICS_BACKEND, settings.PROMETHEUS_URL = "prometheus", f"http://127.0.0.1:{closed_port()}"
    if "logs" in which:
        settings.LOGS_BACKEND, settings.LOKI_URL = "loki", f"http://127.0.0.1:{closed_port()}"


def assert_honest_answer(run: DiagnosisRun, down_tools: set[str]) -> dict:
    invocations = list(ToolInvocation.objects.filter(run=run))
    errors = [i for i in invocations if i.tool_name in down_tools]
    assert errors and all(i.status == "ERROR" and i.result is None for i in errors)
    assert any("unreachable" in i.error_message for i in errors)
    succeeded = {i.invocation_id for i in invocations if i.status == "SUCCESS"}
    assert cited(run) <= succeeded, "the answer cites a failed invocation"
    assert run.status == "SUCCESS" and run.answer.strip()
    assert run.degraded or run.effective_verdict != "PASS"  # never a confident answer with a source missing
    return {"invocations": len(invocations), "errors": len(errors)}


@pytest.mark.django_db
def test_with_the_logs_backend_down_the_answer_says_what_it_could_not_check(make_run, demo_knowledge, settings):
    backends_down(settings, "logs")
    run = run_execute(run_id=make_run(QUESTION).run_id)
    figures = assert_honest_answer(run, {"query_logs"})
    assert "logs would confirm or refute" in run.answer and "Log:" not in run.answer
    print(f"\nlogs backend down: {figures['errors']}/{figures['invocations']} invocations ERROR, "
          f"verdict {run.effective_verdict or None}, degraded {run.degraded}, missing logs named in the answer")


@pytest.mark.django_db
def test_with_the_metrics_backend_down_the_answer_says_what_it_could_not_check(make_run, demo_knowledge, settings):
    backends_down(settings, "metrics")
    run = run_execute(run_id=make_run(QUESTION).run_id)
    figures = assert_honest_answer(run, {"query_metrics", "query_alerts"})
    assert "metrics would confirm or refute" in run.answer and "Metric:" not in run.answer and "Alert:" not in run.answer
    print(f"\nmetrics backend down: {figures['errors']}/{figures['invocations']} invocations ERROR, "
          f"verdict {run.effective_verdict or None}, degraded {run.degraded}, missing metrics named in the answer")


@pytest.mark.django_db
def test_with_every_telemetry_backend_down_the_answer_is_degraded_and_names_no_root_cause(make_run, demo_knowledge, settings):
    backends_down(settings, "metrics", "logs")
    run = run_execute(run_id=make_run(QUESTION).run_id)
    figures = assert_honest_answer(run, {"query_metrics", "query_alerts", "query_logs"})
    assert run.degraded and run.effective_verdict == "" and "No verified root cause" in run.answer
    print(f"\nall telemetry down: {figures['errors']}/{figures['invocations']} invocations ERROR, degraded answer, no root cause")


@pytest.mark.django_db
def test_a_model_that_cites_a_failed_metrics_query_as_proof_is_not_believed(openai_llm, make_run, demo_knowledge, settings):
    """A scripted model claims a root cause 'proven' by the metrics query that failed: the Gatekeeper drops it."""
    backends_down(settings, "metrics")
    plan = {**PLAN, "steps": [{"tool": "query_metrics", "arguments": {"metric": "db_pool_active_connections", "service": "payment-service"}}]}

    def executor(request):
        if not request.tool_results:
            return Reply.tool_calls(("query_metrics", {"metric": "db_pool_active_connections", "service": "payment-service"}, "c1"))
        failed = re.search(r'invocation_id="(inv-[0-9a-f]{8})"', request.tool_results[0]["content"])[1]
        return Reply.json({"version": "executor_evidence_v2", "summary": "pool exhausted", "open_questions": [], "claims": [
            {"claim_id": "c1", "statement": "the DB pool of payment-service is at 50/50",
             "evidence": [{"source_invocation_id": failed, "tool_name": "query_metrics", "raw_path": "$.series[0].stats.max",
                           "evidence_excerpt": "50"}]}]})

    script_happy(openai_llm, planner=Reply.json(plan), executor=executor, verifier=Reply.json(VERDICT_PASS), composer=compose_citing_evidence)
    run = run_execute(run_id=make_run(QUESTION).run_id)

    failed = ToolInvocation.objects.get(run=run, tool_name="query_metrics")
    assert failed.status == "ERROR" and "unreachable" in failed.error_message
    assert run.degraded and failed.invocation_id not in run.answer and "No verified root cause" in run.answer
    assert run.self_evaluation["rule_evaluation"]["claims_verified"] == 0
    assert not openai_llm.requests_for("composer")  # the fabricated claim never reached an answer
    print(f"\nmodel cites the failed metrics query as proof: 1 ERROR invocation, 0 claims verified, composer never called, "
          f"degraded answer without the claim")
