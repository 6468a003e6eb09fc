"""Runs as OpenTelemetry traces (OTLP over HTTP) when OTEL_EXPORTER_OTLP_ENDPOINT is set.

A run is exported once it has finished, from what it recorded — the same audit rows the console
shows — so the trace and the audit can never disagree and the run's own code carries no tracing:

    run (root: aiops.run_id, session, flow, status, verdict)
      └─ node <name>            one per graph node, from the node's progress events
           ├─ chat <model>      one per model call (GenAI semantic conventions: gen_ai.request.model,
           │                    gen_ai.usage.input_tokens / output_tokens)
           └─ execute_tool <t>  one per tool call (gen_ai.tool.name, gen_ai.tool.call.id)
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from django.conf import settings

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_provider = None


def enabled() -> bool:
    return bool(settings.OTEL_EXPORTER_OTLP_ENDPOINT) or _provider is not None


def use_provider(provider) -> None:
    """Export through this TracerProvider (tests install one with an in-memory exporter); None resets."""
    global _provider
    with _lock:
        _provider = provider


def _tracer_provider():
    global _provider
    with _lock:
        if _provider is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(resource=Resource.create({"service.name": settings.OTEL_SERVICE_NAME}))
            exporter = OTLPSpanExporter(endpoint=f"{settings.OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces", timeout=5)
            provider.add_span_processor(BatchSpanProcessor(exporter))
            _provider = provider
        return _provider


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def export_run(run_id: str) -> None:
    """Export one finished run as a trace; never raises (tracing must not break a run)."""
    if not enabled():
        return
    try:
        provider = _tracer_provider()
        _build(provider.get_tracer("aiops.diagnosis"), run_id)
        provider.force_flush(timeout_millis=5000)
    except Exception:  # noqa: BLE001
        logger.exception("could not export the trace of run %s", run_id)


def _build(tracer, run_id: str) -> None:
    """Why it is long: one span per kind of row of the run (steps, tool calls, events), built in one pass under
    the run's root span."""
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    from diagnosis.models import AgentStep, DiagnosisRun, RunEvent, ToolInvocation

    run = DiagnosisRun.objects.select_related("session").filter(run_id=run_id).first()
    if run is None or not run.is_terminal:
        return
    begin = run.started_at or run.created_at
    end = max(run.finished_at or begin, begin)
    common = {"aiops.run_id": run.run_id, "aiops.session_id": run.session.session_id}
    root = tracer.start_span(
        f"run {run.agent_flow.lower()}", start_time=_ns(begin),
        attributes={**common, "aiops.flow": run.agent_flow, "aiops.strategy": run.strategy, "aiops.status": run.status,
                    "aiops.verdict": run.effective_verdict or "", "aiops.degraded": run.degraded,
                    "aiops.error_code": run.error_code or "", "aiops.step_count": run.step_count,
                    "aiops.tool_count": run.tool_count},
    )
    if run.status == DiagnosisRun.Status.FAILED:
        root.set_status(Status(StatusCode.ERROR, run.error_code or "failed"))
    root_ctx = trace.set_span_in_context(root)

    nodes = []  # (start, end, span)
    boundary = begin
    for event in RunEvent.objects.filter(run_id=run.pk, kind="node").order_by("id"):
        name = str(event.data.get("node") or "node")
        finished = max(event.created_at, boundary)
        span = tracer.start_span(
            f"node {name}", context=root_ctx, start_time=_ns(boundary),
            attributes={**common, "aiops.node": name, "aiops.outcome": str(event.data.get("outcome") or ""),
                        "aiops.reason_code": str(event.data.get("reason_code") or ""),
                        "aiops.attempt": int(event.data.get("attempt") or 1)},
        )
        nodes.append((boundary, finished, span))
        boundary = finished

    def parent_at(moment: datetime):
        for start, finish, span in nodes:
            if start <= moment <= finish:
                return trace.set_span_in_context(span)
        return root_ctx

    for step in AgentStep.objects.filter(run_id=run.pk).order_by("step_index"):
        finished = step.finished_at or (step.started_at + timedelta(milliseconds=step.duration_ms or 0))
        model = step.model_name or "unknown"
        span = tracer.start_span(
            f"chat {model}", context=parent_at(step.started_at), start_time=_ns(step.started_at),
            attributes={**common, "gen_ai.operation.name": "chat", "gen_ai.provider.name": settings.LLM_PROVIDER,
                        "gen_ai.system": settings.LLM_PROVIDER, "gen_ai.request.model": model,
                        "gen_ai.usage.input_tokens": step.prompt_tokens,
                        "gen_ai.usage.output_tokens": step.completion_tokens,
                        "aiops.agent": step.agent, "aiops.node": step.node, "aiops.attempt": step.attempt,
                        "aiops.step_index": step.step_index},
        )
        if step.status == AgentStep.Status.FAILED:
            span.set_status(Status(StatusCode.ERROR, (step.error or "failed")[:200]))
        span.end(end_time=_ns(max(finished, step.started_at)))

    for call in ToolInvocation.objects.filter(run_id=run.pk).order_by("id"):
        started = call.created_at - timedelta(milliseconds=call.duration_ms or 0)  # the row is written after the call
        backend = call.result.get("backend") if isinstance(call.result, dict) else None
        span = tracer.start_span(
            f"execute_tool {call.tool_name}", context=parent_at(started), start_time=_ns(started),
            attributes={**common, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool_name,
                        "gen_ai.tool.call.id": call.invocation_id, "aiops.tool.status": call.status,
                        "aiops.tool.backend": str(backend or "internal"), "aiops.tool.truncated": call.truncated},
        )
        if call.status != ToolInvocation.Status.SUCCESS:
            span.set_status(Status(StatusCode.ERROR, call.status))
        span.end(end_time=_ns(call.created_at))

    for _start, finish, span in nodes:
        span.end(end_time=_ns(finish))
    root.end(end_time=_ns(end))
