"""Secrets canaries: an OpenAI key, an AWS access key, a JWT, a PEM private key, a password in a
database URL and a password=… pair, placed in the question, in the logs a tool returns and in a
runbook, are found nowhere afterwards: in no text or JSON column of any diagnosis/traces table,
in no application log record (DEBUG), in no request sent to the model, in no API response.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from django.apps import apps
from django.db import models

from diagnosis.demo.loader import scenario_dir
from diagnosis.models import DiagnosisRun
from diagnosis.services import wiring
from diagnosis.services.knowledge import knowledge_load_folder
from diagnosis.tools.backends.demo import DemoBackend
from tests.api.conftest import sse_events, token_client
from tests.security.test_prompt_injection import tool_outputs
from tests.diagnosis.conftest import user_payload
from tests.support.fake_openai import Reply, answer_plan

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

SCENARIO = "payment-db-pool-exhaustion"
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAcanaryPEMbodyQ0FOQVJZ\n"
       "c2VjcmV0LWNhbmFyeS1ib2R5LWxpbmUy\n-----END RSA PRIVATE KEY-----")
CANARIES = {
    "openai key": "sk-canary7f3a9b2c4d5e6f708192a3b4c5d6e7f8",
    "aws access key": "AKIACANARY0123456789",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnktdXNlciJ9.Y2FuYXJ5LXNpZ25hdHVyZS14eXo",
    "pem private key": PEM,
    "url password": "postgres://svc:CanaryPass42xyz@db.internal:5432/payments",
    "password pair": "password=CanaryPw-9913abc",
    "odbc password": "Server=db.internal,1433;Database=pay;Uid=svc;Pwd=CanaryOdbc-7731xyz;Encrypt=yes",
}
# What must never be found: the secret part of each canary (a URL host or a PEM header may stay).
NEEDLES = {
    "openai key": ["sk-canary7f3a9b2c4d5e6f708192a3b4c5d6e7f8", "canary7f3a9b2c4d5e6f70"],
    "aws access key": ["AKIACANARY0123456789", "CANARY0123456789"],
    "jwt": ["eyJzdWIiOiJjYW5hcnktdXNlciJ9", "Y2FuYXJ5LXNpZ25hdHVyZS14eXo"],
    "pem private key": ["MIIEowIBAAKCAQEAcanaryPEMbodyQ0FOQVJZ", "c2VjcmV0LWNhbmFyeS1ib2R5LWxpbmUy"],
    "url password": ["CanaryPass42xyz"],
    "password pair": ["CanaryPw-9913abc"],
    "odbc password": ["CanaryOdbc-7731xyz"],
}
QUESTION = ("Why is payment-service failing? Our config, in case it helps: OPENAI_API_KEY={openai key} "
            "AWS_ACCESS_KEY_ID={aws access key} session token {jwt} DATABASE_URL={url password} {password pair} "
            "ODBC={odbc password} "
            "and the signing key:\n{pem private key}").format(**CANARIES)


def secret_scenario(folder: Path) -> Path:
    """The scenario with every canary in ERROR log lines of payment-service and in its runbook."""
    target = folder / SCENARIO
    shutil.copytree(scenario_dir(SCENARIO), target)
    lines = [f"db connect retry with DATABASE_URL={CANARIES['url password']}",
             f"auth failed for Authorization: Bearer {CANARIES['jwt']}",
             f"S3 upload rejected for AWS key {CANARIES['aws access key']}",
             f"openai call failed, api_key={CANARIES['openai key']}",
             f"config reload: {CANARIES['password pair']} HikariPool-1 Connection is not available",
             f"legacy report job: connection {CANARIES['odbc password']} refused",
             f"TLS setup read key {CANARIES['pem private key']}"]
    with (target / "logs.jsonl").open("a", encoding="utf-8") as logs:
        for i, message in enumerate(lines * 2):
            logs.write(json.dumps({"offset_seconds": -800 + i * 30, "service": "payment-service", "level": "ERROR",
                                   "message": message}) + "\n")
    runbook = target / "runbooks" / "payment-db-connection-pool.md"
    runbook.write_text(runbook.read_text(encoding="utf-8").replace(
        "## Remediation\n",
        "## Remediation\n\nEmergency access: connect with `{url password}` ({password pair}); admin token {jwt}; "
        "AWS {aws access key}; OpenAI {openai key}.\n\n```\n{pem private key}\n```\n\n".format(**CANARIES), 1),
        encoding="utf-8")
    return target


def dump_database() -> dict[str, str]:
    """Every text and JSON column of every row of every diagnosis and traces table, as text."""
    dumped = {}
    for label in ("diagnosis", "traces"):
        for model in apps.get_app_config(label).get_models():
            columns = [f.attname for f in model._meta.concrete_fields
                       if isinstance(f, (models.CharField, models.TextField, models.JSONField))]
            if not columns:
                continue
            for row in model.objects.values("pk", *columns):
                dumped[f"{model._meta.db_table}#{row['pk']}"] = json.dumps(row, ensure_ascii=False, default=str)
    return dumped


def found(haystacks: dict[str, str]) -> list[tuple[str, str]]:
    return [(kind, where) for kind, needles in NEEDLES.items() for where, text in haystacks.items()
            if any(n in text for n in needles)]


def honest_model(fake) -> None:
    """A model that does its job: plans, queries, cites what the tools returned, answers from it."""
    fake.always(Reply.json({"version": "planner_plan_v1", "goal": "explain the errors", "services": ["payment-service"],
                            "steps": [{"tool": "query_logs", "arguments": {"service": "payment-service"}}]}),
                role="planner")

    def executor(request) -> Reply:
        outputs = tool_outputs(request)
        if not outputs:
            return Reply.tool_calls(("query_logs", {"service": "payment-service", "query": "level:ERROR", "limit": 30}, "l"),
                                    ("lookup_knowledge", {"query": "payment-service connection pool remediation"}, "k"))
        logs = next(o for o in outputs if o["tool"] == "query_logs")
        claims = []
        # Cite every line that held a secret, as the model received it: the evidence carries it on.
        for i, record in enumerate(logs["result"]["records"]):
            if "REDACTED" in record["message"] or "Connection is not available" in record["message"]:
                claims.append({"claim_id": f"c{i}", "statement": f"payment-service logged: {record['message'][:120]}",
                               "evidence": [{"source_invocation_id": logs["invocation_id"], "tool_name": "query_logs",
                                             "raw_path": f"$.records[{i}].message",
                                             "evidence_excerpt": record["message"]}]})
        return Reply.json({"version": "executor_evidence_v2", "summary": "pool and credential errors",
                           "claims": claims[:12], "open_questions": []})

    def composer(request) -> Reply:
        return Reply.json(answer_plan(user_payload(request)))

    fake.always(executor, role="executor")
    fake.always(Reply.json({"verdict": "PASS", "score": 0.9, "claim_checks": [], "critical_evidence_gaps": []}),
                role="verifier")
    fake.always(composer, role="composer")


def leaky_model(fake) -> None:
    """A model that writes every canary into every output it produces, as if it had memorised them."""
    honest_model(fake)
    everything = " ".join(CANARIES.values())
    fake.always(Reply.json({"version": "planner_plan_v1", "goal": f"explain the errors {everything}",
                            "services": ["payment-service"],
                            "steps": [{"tool": "query_logs", "arguments": {"service": "payment-service"},
                                       "purpose": everything}]}), role="planner")
    honest_executor = fake._always["executor"]

    def executor(request) -> Reply:
        reply = honest_executor(request)
        if reply.calls:
            return reply
        evidence = json.loads(reply.content)
        evidence["summary"] = everything
        evidence["open_questions"] = [everything]
        for claim in evidence["claims"]:
            claim["statement"] += " " + everything
        return Reply.json(evidence)

    def composer(request) -> Reply:
        return Reply.json(answer_plan(user_payload(request), next_steps=[{"text": f"Credentials: {everything}"}]))

    fake.always(executor, role="executor")
    fake.always(Reply.json({"verdict": "PASS", "score": 0.9, "claim_checks": [], "critical_evidence_gaps": [],
                            "rationale": everything, "fact_checks": [{"fact": everything}]}), role="verifier")
    fake.always(composer, role="composer")


@pytest.fixture
def scenario(tmp_path, db):
    folder = secret_scenario(tmp_path)
    knowledge_load_folder(folder=folder / "runbooks", prefix="runbooks/")
    with wiring.telemetry_override(DemoBackend([folder])):
        yield folder


def ask_and_read_back(alice) -> dict[str, str]:
    """POST the question through the API, then read the run back through every API that shows it."""
    client = token_client(alice)
    response = client.post("/api/chat", {"question": QUESTION, "mode": "diagnosis"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "SUCCESS", body
    run = DiagnosisRun.objects.get(run_id=body["runId"])
    assert run.tool_count >= 2
    seen = {"POST /api/chat": response.content.decode()}
    for path in (f"/api/runs/{run.run_id}", f"/api/diagnosis/{run.session.session_id}/trace?runId={run.run_id}",
                 f"/api/diagnosis/{run.session.session_id}/runs"):
        seen[path] = client.get(path).content.decode()
    seen["events"] = json.dumps(sse_events(client.get(f"/api/runs/{run.run_id}/events")), ensure_ascii=False)
    from django.core.cache import cache

    seen["session memory"] = json.dumps(cache.get(f"session-memory:{run.session.session_id}"), ensure_ascii=False)
    # Every other free text a user supplies: a feedback comment, and the annotations of an alert.
    everything = " ".join(CANARIES.values())
    feedback = client.post("/api/feedback", {"sessionId": run.session.session_id, "runId": run.run_id,
                                             "feedback": "not_useful", "comment": f"see {everything}"}, format="json")
    assert feedback.status_code == 200, feedback.content
    seen["POST /api/feedback"] = feedback.content.decode()
    alert = {"labels": {"alertname": "PaymentErrors", "service": "payment-service", "severity": "critical"},
             "annotations": {"summary": "payment-service 5xx", "description": f"runbook says: {everything}"}}
    aiops = client.post("/api/ai_ops", {"alerts": [alert], "stream": False}, format="json")
    assert aiops.status_code in (200, 202), aiops.content
    seen["POST /api/ai_ops"] = aiops.content.decode()
    seen["trace after feedback"] = client.get(f"/api/diagnosis/{run.session.session_id}/trace?runId={run.run_id}").content.decode()
    from django.conf import settings

    if settings.REDIS_URL:  # the services pass: every key of the Redis database (cache, broker, results)
        import redis

        r = redis.Redis.from_url(settings.REDIS_URL)
        for key in r.scan_iter(count=1000):
            kind = r.type(key).decode()
            value = (r.get(key) if kind == "string" else r.hgetall(key) if kind == "hash"
                     else r.lrange(key, 0, -1) if kind == "list" else r.smembers(key) if kind == "set" else b"")
            seen[f"redis {key!r}"] = repr(value)
    return seen


def canaries_reached_the_system(run_text: str) -> None:
    """The secrets really went in: their redaction markers are in what was stored."""
    for kind in ("openai_key", "aws_access_key", "jwt", "private_key", "url_password", "secret"):
        assert f"[REDACTED:{kind}]" in run_text, kind


@pytest.mark.parametrize("model", ["offline", "honest scripted", "leaky scripted"])
def test_canary_secrets_are_found_nowhere_after_a_run(model, request, alice, scenario, caplog):
    fake = None
    if model != "offline":
        fake = request.getfixturevalue("openai_llm")
        (honest_model if model == "honest scripted" else leaky_model)(fake)
    # DEBUG everywhere: the root and every logger that set its own level (django, celery, openai, httpx …).
    caplog.set_level(logging.DEBUG)
    for name in list(logging.root.manager.loggerDict):
        caplog.set_level(logging.DEBUG, logger=name)
    api_responses = ask_and_read_back(alice)
    database = dump_database()
    logs = {f"log {r.name}#{i}": f"{r.getMessage()} {r.exc_text or ''}" for i, r in enumerate(caplog.records)}
    logs["caplog"] = caplog.text
    model_requests = {f"model request #{i}": r.raw_text for i, r in enumerate(fake.requests)} if fake else {}
    canaries_reached_the_system("\n".join(database.values()))
    leaks = found({**database, **logs, **model_requests, **api_responses})
    print(f"\nsecrets ({model}): {len(CANARIES)} canaries x 3 places; searched {len(database)} rows, "
          f"{len(caplog.records)} log records, {len(model_requests)} model requests, {len(api_responses)} API reads; "
          f"{len(leaks)} leaks")
    assert not leaks, leaks[:10]
    if fake:
        # The model API key itself travels in request headers only, never into a log line or a row.
        from tests.support.fixtures import FAKE_API_KEY

        assert not [where for where, text in {**database, **logs}.items() if FAKE_API_KEY in text]
        assert not fake.responder_errors, fake.responder_errors
        assert len(fake.requests) >= 4


def test_a_runbook_with_secrets_is_stored_masked(tmp_path, db):
    folder = secret_scenario(tmp_path)
    counts = knowledge_load_folder(folder=folder / "runbooks", prefix="runbooks/")
    assert counts["documents"] >= 1
    stored = dump_database()
    assert not found(stored)
    assert any("[REDACTED:private_key]" in text for text in stored.values())
    # Loading the same files again is still recognised as unchanged.
    assert knowledge_load_folder(folder=folder / "runbooks", prefix="runbooks/")["unchanged"] == counts["documents"]
