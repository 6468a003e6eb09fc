"""LOG_FORMAT=json and OpenTelemetry traces of runs (in-memory exporter and a real OTLP/HTTP receiver)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from diagnosis.observability import tracing
from diagnosis.observability.logs import JsonFormatter, RunContextFilter
from tests.api.conftest import alice_api, token_client  # noqa: F401
from tests.diagnosis.conftest import demo_knowledge  # noqa: F401
from tests.support.server import ROOT

pytestmark = pytest.mark.django_db(transaction=True)
QUESTION = "Why is payment-service failing?"


def run_chat(api) -> DiagnosisRun:
    body = api.post("/api/chat", {"question": QUESTION}, format="json").json()
    assert body["status"] == "SUCCESS", body
    return DiagnosisRun.objects.select_related("session").get(run_id=body["runId"])


def test_json_logs_carry_the_run_and_session_ids_on_every_record_of_a_run(alice_api, demo_knowledge, eager_tasks):  # noqa: F811
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RunContextFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        run = run_chat(alice_api)
    finally:
        root.removeHandler(handler)
    records = [json.loads(line) for line in stream.getvalue().splitlines()]  # one JSON object per line
    messages = [r["message"] for r in records]
    start = next(i for i, m in enumerate(messages) if m.startswith("run execution starts"))
    end = next(i for i, m in enumerate(messages) if m.startswith("run execution ends"))
    during = records[start:end + 1]
    assert len(during) >= 2
    assert all(r["run_id"] == run.run_id and r["session_id"] == run.session.session_id for r in during), during
    assert {"ts", "level", "logger", "message"} <= set(records[start])


def test_log_format_json_configures_the_service_logging():
    env = {**os.environ, "LOG_FORMAT": "json"}
    code = "import logging; logging.getLogger('diagnosis.probe').warning('hello %s', 'world')"
    result = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert any(r["message"] == "hello world" and r["logger"] == "diagnosis.probe" and r["run_id"] is None
               for r in lines), result.stderr[-2000:]


@pytest.fixture
def memory_spans():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    yield exporter
    tracing.use_provider(None)
    provider.shutdown()


def test_a_run_is_one_trace_with_spans_per_node_model_call_and_tool_call(alice_api, demo_knowledge, eager_tasks,  # noqa: F811
                                                                          memory_spans):
    run = run_chat(alice_api)
    spans = [s for s in memory_spans.get_finished_spans() if s.attributes.get("aiops.run_id") == run.run_id]
    assert len({s.context.trace_id for s in spans}) == 1  # one trace, every span tagged with the run id
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1 and roots[0].name == "run chat" and roots[0].attributes["aiops.status"] == "SUCCESS"
    root = roots[0]

    nodes = [s for s in spans if s.name.startswith("node ")]
    assert nodes and all(s.parent.span_id == root.context.span_id for s in nodes)
    assert nodes[0].attributes["aiops.node"] == "planner"

    models = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    steps = AgentStep.objects.filter(run=run)
    assert len(models) == steps.count() > 0
    node_ids = {s.context.span_id for s in nodes}
    assert all(s.parent.span_id in node_ids | {root.context.span_id} for s in models)
    by_index = {s.attributes["aiops.step_index"]: s for s in models}
    for step in steps:
        span = by_index[step.step_index]
        assert span.attributes["gen_ai.request.model"] == step.model_name
        assert span.attributes["gen_ai.usage.input_tokens"] == step.prompt_tokens
        assert span.attributes["gen_ai.usage.output_tokens"] == step.completion_tokens

    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    invocations = ToolInvocation.objects.filter(run=run)
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in tools) == sorted(i.invocation_id for i in invocations)
    assert all(s.start_time <= s.end_time and root.start_time <= s.start_time for s in spans)


class OtlpReceiver:
    """An OTLP/HTTP trace receiver: decodes every POST /v1/traces (protobuf) it gets."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.requests: list = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf":
                    message = ExportTraceServiceRequest()
                    message.ParseFromString(body)
                    receiver.requests.append(message)
                    self.send_response(200)
                else:
                    self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def spans(self):
        for request in self.requests:
            for resource in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource.resource.attributes}.get("service.name")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        yield service, span


def test_with_an_otlp_endpoint_each_run_is_exported_over_http(alice_api, demo_knowledge, eager_tasks, settings):  # noqa: F811
    receiver = OtlpReceiver()
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url
    tracing.use_provider(None)
    try:
        run = run_chat(alice_api)
    finally:
        provider = tracing._provider
        tracing.use_provider(None)
        if provider is not None:
            provider.shutdown()
        receiver.httpd.shutdown()
    exported = list(receiver.spans())
    assert exported, "the receiver got no span"
    services = {service for service, _ in exported}
    assert services == {"aiops-diagnosis"}

    def attrs(span):
        return {a.key: a.value for a in span.attributes}

    ours = [span for _, span in exported if attrs(span)["aiops.run_id"].string_value == run.run_id]
    names = [span.name for span in ours]
    assert "run chat" in names and any(n.startswith("node ") for n in names)
    models = [span for span in ours if attrs(span).get("gen_ai.operation.name") and
              attrs(span)["gen_ai.operation.name"].string_value == "chat"]
    assert models and all(attrs(s)["gen_ai.request.model"].string_value for s in models)
    assert len({span.trace_id for span in ours}) == 1
