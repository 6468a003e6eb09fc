"""Prometheus metrics (prometheus-client), recorded at the service layer.

Under gunicorn (several processes) and beside a Celery worker on the same node, set
PROMETHEUS_MULTIPROC_DIR to one empty directory for all of them before they start: every process
writes its samples there and `/metrics` (any web process) aggregates them (multi-process mode).
A hook never raises: a metrics failure must not break a run or a request.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest,
)

logger = logging.getLogger(__name__)

NAMESPACE = "aiops"
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # multi-process mode writes there from the first metric on
    os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)
SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
FAST_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

RUNS = Counter("runs", "Finished runs.", ["flow", "status", "verdict", "degraded"], namespace=NAMESPACE)
RUN_DURATION = Histogram("run_duration_seconds", "Run duration from start to finish.", ["flow", "status"],
                         namespace=NAMESPACE, buckets=SECONDS)
QUEUE_WAIT = Histogram("run_queue_wait_seconds", "Time a run waited in the queue before a worker claimed it.",
                       ["flow"], namespace=NAMESPACE, buckets=SECONDS)
REAPED = Counter("runs_reaped", "Runs recorded FAILED because their worker stopped sending heartbeats.",
                 namespace=NAMESPACE)
MODEL_CALLS = Counter("model_calls", "Model calls.", ["role", "model", "status"], namespace=NAMESPACE)
MODEL_LATENCY = Histogram("model_call_duration_seconds", "Model call latency.", ["role", "model"],
                          namespace=NAMESPACE, buckets=SECONDS)
MODEL_TOKENS = Counter("model_tokens", "Model tokens.", ["role", "model", "direction"], namespace=NAMESPACE)
TOOL_CALLS = Counter("tool_calls", "Evidence tool calls.", ["tool", "backend", "status"], namespace=NAMESPACE)
TOOL_LATENCY = Histogram("tool_call_duration_seconds", "Evidence tool call latency.", ["tool", "backend"],
                         namespace=NAMESPACE, buckets=FAST_SECONDS)
TOOL_ERRORS = Counter("tool_errors", "Evidence tool calls that failed or were blocked.", ["tool", "backend", "status"],
                      namespace=NAMESPACE)
GATEKEEPER = Counter("gatekeeper_decisions", "Gatekeeper run decisions.", ["verdict", "reason"], namespace=NAMESPACE)
GATEKEEPER_CLAIMS = Counter("gatekeeper_claims", "Gatekeeper claim decisions.", ["reason"], namespace=NAMESPACE)
SSE_OPEN = Gauge("sse_open_streams", "Open Server-Sent Events streams.", namespace=NAMESPACE,
                 multiprocess_mode="livesum")
SSE_REFUSED = Counter("sse_refused_streams", "Streams refused by the per-user cap.", namespace=NAMESPACE)


def _safe(hook):
    def wrapper(*args, **kwargs):
        try:
            hook(*args, **kwargs)
        except Exception:  # noqa: BLE001 - observability must never break the observed
            logger.exception("metrics hook %s failed", hook.__name__)
    wrapper.__name__ = hook.__name__
    wrapper.__doc__ = hook.__doc__
    return wrapper


def _gatekeeper_results(value: Any, depth: int = 0):
    """Every Gatekeeper result dict inside a run's self_evaluation (its shape differs per flow)."""
    if depth > 4:
        return
    if isinstance(value, dict):
        if "verdict_ceiling" in value and "reason_code" in value:
            yield value
            return
        for item in value.values():
            yield from _gatekeeper_results(item, depth + 1)
    elif isinstance(value, list):
        for item in value[:50]:
            yield from _gatekeeper_results(item, depth + 1)


@_safe
def run_moved(run) -> None:
    """A run changed status (called by the lifecycle after its conditional UPDATE)."""
    from django.db import transaction

    transaction.on_commit(lambda: _record_run(run))


def _record_run(run) -> None:
    flow = run.agent_flow
    if run.status == "RUNNING":
        if run.started_at and run.created_at:
            QUEUE_WAIT.labels(flow).observe(max(0.0, (run.started_at - run.created_at).total_seconds()))
        return
    if run.status not in ("SUCCESS", "FAILED"):
        return
    RUNS.labels(flow, run.status, run.effective_verdict or "none", str(bool(run.degraded)).lower()).inc()
    if run.duration_ms is not None:
        RUN_DURATION.labels(flow, run.status).observe(run.duration_ms / 1000)
    if run.error_code == "worker_lost":
        REAPED.inc()
    for result in _gatekeeper_results(run.self_evaluation):
        GATEKEEPER.labels(str(result.get("verdict")), str(result.get("reason_code"))).inc()
        for claim in (result.get("audit") or [])[:200]:
            if isinstance(claim, dict):
                GATEKEEPER_CLAIMS.labels(str(claim.get("reason_code"))).inc()


_step_roles: dict[int, str] = {}  # step id -> role, between a model call's start and finish


@_safe
def model_call_started(step_id: int, *, role: str) -> None:
    if len(_step_roles) > 10_000:  # steps that never finished (a crashed run) must not accumulate
        _step_roles.clear()
    _step_roles[step_id] = role


@_safe
def model_call(step_id: int, *, model: str, status: str, duration_ms: int | None, usage) -> None:
    role = _step_roles.pop(step_id, "unknown")
    model = (model or "unknown")[:128]
    MODEL_CALLS.labels(role, model, status).inc()
    if duration_ms is not None:
        MODEL_LATENCY.labels(role, model).observe(duration_ms / 1000)
    if usage is not None:
        MODEL_TOKENS.labels(role, model, "input").inc(usage.prompt_tokens or 0)
        MODEL_TOKENS.labels(role, model, "output").inc(usage.completion_tokens or 0)


@_safe
def tool_call(*, tool: str, result, status: str, duration_ms: int | None) -> None:
    backend = str(result.get("backend") or "internal")[:64] if isinstance(result, dict) else "internal"
    TOOL_CALLS.labels(tool, backend, status).inc()
    if duration_ms is not None:
        TOOL_LATENCY.labels(tool, backend).observe(duration_ms / 1000)
    if status != "SUCCESS":
        TOOL_ERRORS.labels(tool, backend, status).inc()


@_safe
def stream_opened() -> None:
    SSE_OPEN.inc()


@_safe
def stream_closed() -> None:
    SSE_OPEN.dec()


@_safe
def stream_refused() -> None:
    SSE_REFUSED.inc()


def exposition() -> tuple[bytes, str]:
    """The samples of this process, or of every process sharing PROMETHEUS_MULTIPROC_DIR."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """gunicorn's child_exit hook: drop a dead worker's live gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)
