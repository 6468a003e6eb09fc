"""Scripts for the fake OpenAI-compatible server that drive a diagnosis through every node."""

from __future__ import annotations

import json
import re

from tests.support.fake_openai import Reply, answer_plan
from tests.support.fixtures import FAKE_API_KEY

PLAN = {"version": "planner_plan_v1", "goal": "explain payment-service errors", "services": ["payment-service"],
        "steps": [{"tool": "query_logs", "arguments": {"service": "payment-service", "query": "level:ERROR"}}]}
TOOL_CALL = Reply.tool_calls(("query_logs", {"service": "payment-service", "query": "level:ERROR"}, "call_1"))
VERDICT_PASS = {"verdict": "PASS", "score": 0.9, "claim_checks": [], "critical_evidence_gaps": []}
TOOL_OUTPUT_RE = re.compile(r'<tool_output invocation_id="(?P<id>inv-[0-9a-f]{8})" tool="(?P<tool>[a-z_]+)" status="(?P<status>[A-Z]+)">\n[^\n]*\n(?P<body>.*)\n</tool_output>', re.S)
ROLES = ("planner", "executor", "verifier", "composer")


def evidence_from_logs(request) -> Reply:
    """The executor's final report: cite the first pool-exhaustion log line really returned in this run."""
    claims = []
    for message in request.tool_results:
        match = TOOL_OUTPUT_RE.search(message.get("content") or "")
        if not match or match["tool"] != "query_logs" or match["status"] != "SUCCESS":
            continue
        for i, record in enumerate(json.loads(match["body"])["records"]):
            if "Connection is not available" in record["message"]:
                claims.append({"claim_id": "c1", "statement": "payment-service cannot get DB connections",
                               "evidence": [{"source_invocation_id": match["id"], "tool_name": "query_logs",
                                             "raw_path": f"$.records[{i}].message", "evidence_excerpt": record["message"]}]})
                break
    return Reply.json({"version": "executor_evidence_v2", "summary": "pool exhausted", "claims": claims, "open_questions": []})


def executor_step(request) -> Reply:
    """Call query_logs first; once its result is back, report the evidence."""
    return evidence_from_logs(request) if request.tool_results else TOOL_CALL


def compose_citing_evidence(request) -> Reply:
    return Reply.json(answer_plan(json.loads(request.messages[1]["content"])))


HAPPY = {"planner": Reply.json(PLAN), "executor": executor_step, "verifier": Reply.json(VERDICT_PASS),
         "composer": compose_citing_evidence}


def script_happy(fake, **override) -> None:
    """Every role answers correctly every time, unless `override` gives it another responder."""
    for role in ROLES:
        fake.always(override.get(role, HAPPY[role]), role=role)


def worker_model_env(fake, **extra: str) -> dict:
    """Environment for a worker subprocess whose model is `fake` (reachable on 127.0.0.1)."""
    return {"LLM_PROVIDER": "openai", "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_API_KEY,
            "OPENAI_MODEL": "fake-model", **extra}
