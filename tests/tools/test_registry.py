"""The tool call path: allow-list, argument checks, recording, redaction, size caps, knowledge dedup."""

from __future__ import annotations

from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.registry import Backends, ToolBox, cap_result


class Recorder:
    def __init__(self):
        self.rows = []

    def record(self, **row):
        self.rows.append(row)
        return f"inv-{len(self.rows):08x}"


class Telemetry:
    def __init__(self, fail=False):
        self.fail = fail

    def query_logs(self, **kwargs):
        if self.fail:
            raise BackendError("loki unreachable at http://127.0.0.1:1: connection refused", backend="loki")
        return {"records": [{"message": "login ok password=hunter2 for bob"}], "service": kwargs.get("service")}

    def query_metrics(self, **kwargs):
        return {"series": []}

    def query_alerts(self):
        return {"alerts": []}


class Knowledge:
    def __init__(self):
        self.calls = []

    def search(self, *, query, top_k, exclude_chunk_ids):
        self.calls.append(set(exclude_chunk_ids))
        pool = [{"chunk_id": f"c{i}", "title": f"t{i}", "path": "p", "content": "x"} for i in range(5)]
        return [c for c in pool if c["chunk_id"] not in exclude_chunk_ids][:top_k]


def box(fail=False, max_calls=5):
    recorder = Recorder()
    telemetry = Telemetry(fail)
    return ToolBox(backends=Backends(telemetry, telemetry, telemetry, Knowledge()), recorder=recorder, max_calls=max_calls), recorder


def test_a_tool_outside_the_allow_list_is_recorded_blocked_and_never_runs():
    tools, recorder = box()
    outcome = tools.call("delete_cluster", {"confirm": True})
    assert outcome.status == "BLOCKED" and outcome.result is None
    assert recorder.rows[0]["status"] == "BLOCKED" and tools.calls == 0


def test_bad_arguments_give_an_error_invocation_naming_the_argument():
    tools, recorder = box()
    assert "service: is required" in tools.call("query_logs", {}).error
    assert "limit: must be between 1 and 500" in tools.call("query_logs", {"service": "a", "limit": 0}).error
    assert "unknown argument" in tools.call("query_alerts", {"x": 1}).error
    assert [r["status"] for r in recorder.rows] == ["ERROR", "ERROR", "ERROR"]


def test_a_backend_that_is_down_gives_an_error_invocation_not_an_empty_success():
    tools, recorder = box(fail=True)
    outcome = tools.call("query_logs", {"service": "payment-service"})
    assert outcome.status == "ERROR" and "unreachable" in outcome.error and outcome.result is None


def test_results_are_redacted_before_they_are_recorded():
    tools, recorder = box()
    outcome = tools.call("query_logs", {"service": "payment-service"})
    assert "hunter2" not in str(recorder.rows[0]["result"]) and "hunter2" not in str(outcome.result)


def test_the_tool_budget_blocks_further_calls():
    tools, recorder = box(max_calls=1)
    assert tools.call("query_alerts", {}).status == "SUCCESS"
    assert tools.call("query_alerts", {}).status == "BLOCKED"
    assert "budget" in recorder.rows[1]["error_message"]


def test_knowledge_never_returns_the_same_chunk_twice_in_a_run():
    tools, _ = box()
    first = tools.call("lookup_knowledge", {"query": "pool", "top_k": 3}).result["results"]
    second = tools.call("lookup_knowledge", {"query": "pool", "top_k": 3}).result["results"]
    assert not {c["chunk_id"] for c in first} & {c["chunk_id"] for c in second}


def test_an_oversized_result_keeps_the_newest_log_records_and_is_flagged():
    result = {"records": [{"message": f"line {i} " + "x" * 100} for i in range(1000)]}
    capped, truncated = cap_result(result, 20_000)
    assert truncated and capped["truncated"] is True and capped["omitted_items"] > 0
    assert capped["records"][-1]["message"].startswith("line 999 ")
