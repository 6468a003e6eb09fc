"""Builds the framework-free collaborators (model, backends, knowledge) from Django settings."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Max

from diagnosis.llm.base import ChatModel
from diagnosis.llm.openai_model import build_chat_model
from diagnosis.models import CaseLibraryEntry, KnowledgeChunk
from diagnosis.tools.knowledge_index import Chunk, KnowledgeIndex
from diagnosis.tools.backends.argocd import ArgoCDSource
from diagnosis.tools.backends.changes import ChangesBackend
from diagnosis.tools.backends.helm import HelmHistorySource
from diagnosis.tools.backends.jaeger import JaegerBackend
from diagnosis.tools.backends.kubernetes_api import KubernetesReader
from diagnosis.tools.backends.kubernetes_changes import KubernetesChangeSource
from diagnosis.tools.backends.tempo import TempoBackend
from diagnosis.tools.registry import Backends

_lock = threading.Lock()
_demo_backend = None
_index_cache: dict = {"signature": None, "index": None}


def chat_model() -> ChatModel:
    return build_chat_model({
        "LLM_PROVIDER": settings.LLM_PROVIDER,
        "OPENAI_BASE_URL": settings.OPENAI_BASE_URL,
        "OPENAI_API_KEY": settings.OPENAI_API_KEY,
        "OPENAI_MODEL": settings.OPENAI_MODEL,
        "OPENAI_MODELS": settings.OPENAI_MODELS,
        "OPENAI_CONNECT_TIMEOUT": settings.LLM_CONNECT_TIMEOUT,
        "OPENAI_READ_TIMEOUT": settings.LLM_READ_TIMEOUT,
        "OPENAI_MAX_RETRIES": settings.LLM_MAX_RETRIES,
        "OPENAI_TEMPERATURE": settings.LLM_TEMPERATURE,
        "LLM_STRUCTURED_OUTPUT": settings.LLM_STRUCTURED_OUTPUT,
        "LLM_TOOL_CALL_CONTENT": settings.LLM_TOOL_CALL_CONTENT,
        "LLM_MAX_TOKENS": settings.LLM_MAX_TOKENS,
        "OPENAI_MAX_TOKENS_PARAM": settings.LLM_MAX_TOKENS_PARAM,
    })


def model_names() -> dict[str, str]:
    if settings.LLM_PROVIDER == "openai":
        return dict(settings.OPENAI_MODELS)
    return {}


def demo_backend():
    """The demo world: every shipped scenario, time-shifted to the moment it is first used."""
    global _demo_backend
    with _lock:
        if _demo_backend is None:
            from diagnosis.tools.backends.demo import DemoBackend

            root = Path(settings.DEMO_SCENARIOS_DIR)
            dirs = sorted(p for p in root.iterdir() if (p / "scenario.json").exists())
            _demo_backend = DemoBackend(dirs)
        return _demo_backend


def reset_demo_backend() -> None:
    global _demo_backend
    with _lock:
        _demo_backend = None


def telemetry_backends() -> tuple:
    timeout = settings.BACKEND_TIMEOUT_SECONDS
    if settings.METRICS_BACKEND == "prometheus":
        from diagnosis.tools.backends.prometheus import PrometheusBackend

        metrics = alerts = PrometheusBackend(settings.PROMETHEUS_URL, timeout_seconds=timeout)
    else:
        metrics = alerts = demo_backend()
    if settings.LOGS_BACKEND == "loki":
        from diagnosis.tools.backends.loki import LokiBackend

        logs = LokiBackend(settings.LOKI_URL, timeout_seconds=timeout, tenant=settings.LOKI_TENANT)
    else:
        logs = demo_backend()
    return logs, metrics, alerts


def kubernetes_backend():
    """KUBERNETES_BACKEND: ``demo`` (scenario kubernetes.json files) or ``kubernetes`` (the cluster, read-only)."""
    if settings.KUBERNETES_BACKEND == "kubernetes":
        from diagnosis.tools.backends.kubernetes import KubernetesBackend

        return KubernetesBackend.from_environment(default_namespace=settings.KUBERNETES_NAMESPACE,
                                                  timeout=settings.BACKEND_TIMEOUT_SECONDS)
    return demo_backend()


def traces_backend():
    """TRACES_BACKEND: ``demo`` (scenario traces.json files), ``tempo`` or ``jaeger`` (their HTTP APIs)."""
    timeout = settings.BACKEND_TIMEOUT_SECONDS
    if settings.TRACES_BACKEND == "tempo":
        return TempoBackend(settings.TEMPO_URL, timeout_seconds=timeout, tenant=settings.TEMPO_TENANT)
    if settings.TRACES_BACKEND == "jaeger":
        return JaegerBackend(settings.JAEGER_URL, api=settings.JAEGER_API, timeout_seconds=timeout)
    return demo_backend()


def changes_backend():
    """CHANGES_BACKEND: ``demo`` (scenario changes.json files) or ``kubernetes``: the sources of
    CHANGES_SOURCES (rollouts, ConfigMaps, Secrets, Helm from the cluster; Argo CD from its API)."""
    if settings.CHANGES_BACKEND != "kubernetes":
        return demo_backend()
    timeout = settings.BACKEND_TIMEOUT_SECONDS
    wanted = set(settings.CHANGES_SOURCES)
    reader = KubernetesReader(timeout=timeout)  # connects at the first call: a missing cluster fails a call, not a run
    sources = []
    if wanted & {"rollout", "config", "secret"}:
        sources.append(KubernetesChangeSource(reader, kinds=sorted(wanted & {"rollout", "config", "secret"})))
    if "helm" in wanted:
        sources.append(HelmHistorySource(reader, driver=settings.HELM_DRIVER))
    if "argocd" in wanted:
        sources.append(ArgoCDSource(settings.ARGOCD_URL, settings.ARGOCD_TOKEN, app_namespace=settings.ARGOCD_APP_NAMESPACE,
                                    timeout_seconds=timeout))
    return ChangesBackend(sources, default_namespace=settings.KUBERNETES_NAMESPACE)


def case_text(claims) -> str:
    lines = []
    for claim in claims if isinstance(claims, list) else []:
        if not isinstance(claim, dict):
            continue
        quotes = "; ".join(f"“{b.get('evidence_excerpt', '')}”" for b in claim.get("evidence") or [] if isinstance(b, dict))
        lines.append(f"{claim.get('statement', '')} — {quotes}")
    return "\n".join(lines)


class KnowledgeSearch:
    """BM25 over the loaded runbook chunks plus the case library (useful past runs).

    The index is rebuilt only when a runbook or a case changes (two cheap aggregate queries)."""

    @staticmethod
    def _signature() -> tuple:
        chunks = KnowledgeChunk.objects.aggregate(n=Count("id"), last=Max("id"), loaded=Max("document__loaded_at"))
        cases = CaseLibraryEntry.objects.filter(status=CaseLibraryEntry.Status.PUBLISHED).aggregate(
            n=Count("id"), updated=Max("updated_at"))
        return tuple(chunks.values()) + tuple(cases.values())

    @staticmethod
    def _chunks() -> list[Chunk]:
        runbooks = [
            Chunk(chunk_id=c.chunk_id, source_type="runbook", source_id=c.document.path, title=c.document.title,
                  path=c.document.path, content=c.content)
            for c in KnowledgeChunk.objects.select_related("document").order_by("id")
        ]
        # Published cases only (SPEC R3), and only their verified claims with the excerpts that backed them.
        # Named by the case's own id and version, never by the run it came from (another user's run).
        cases = [
            Chunk(chunk_id=f"case-{pk}:v{version}", source_type="case", source_id=f"case-{pk}",
                  title=f"Past incident case-{pk}", path=f"case_library/case-{pk}/v{version}", content=case_text(claims))
            for pk, version, claims in CaseLibraryEntry.objects.filter(status=CaseLibraryEntry.Status.PUBLISHED)
            .values_list("pk", "version", "claims").order_by("-updated_at")[:500]
        ]
        return runbooks + cases

    def index(self) -> KnowledgeIndex:
        signature = self._signature()
        with _lock:
            if _index_cache["signature"] != signature:
                _index_cache["index"] = KnowledgeIndex.build(self._chunks())
                _index_cache["signature"] = signature
            return _index_cache["index"]

    def search(self, *, query: str, top_k: int, exclude_chunk_ids: set[str]) -> list[dict]:
        return [
            {"source_type": c.source_type, "source_id": c.source_id, "title": c.title, "path": c.path,
             "chunk_id": c.chunk_id, "score": round(score, 4), "content": c.content,
             **case_reference(c.chunk_id)}
            for c, score in self.index().search(query, top_k, exclude_chunk_ids=exclude_chunk_ids)
        ]


CASE_CHUNK_RE = re.compile(r"^case-(\d+):v(\d+)$")


def case_reference(chunk_id: str) -> dict:
    """``{case_id, case_version}`` for a case chunk (empty for a runbook chunk)."""
    match = CASE_CHUNK_RE.match(chunk_id or "")
    return {"case_id": f"case-{match[1]}", "case_version": int(match[2])} if match else {}


def cases_check(results: list[dict]) -> list[dict]:
    """A replay's recorded knowledge results, with every case that is no longer published (withdrawn,
    or gone) replaced by a stub that says so and quotes nothing."""
    wanted = {int(m[1]) for r in results if (m := CASE_CHUNK_RE.match(str(r.get("chunk_id") or "")))}
    legacy = {str(r.get("source_id")) for r in results
              if r.get("source_type") == "case" and not CASE_CHUNK_RE.match(str(r.get("chunk_id") or ""))}
    published = set(CaseLibraryEntry.objects.filter(pk__in=wanted, status=CaseLibraryEntry.Status.PUBLISHED)
                     .values_list("pk", flat=True)) if wanted else set()
    legacy_published = {run_id: pk for run_id, pk in CaseLibraryEntry.objects.filter(
        source_run_id__in=legacy, status=CaseLibraryEntry.Status.PUBLISHED).values_list("source_run_id", "pk")} \
        if legacy else {}
    checked = []
    for r in results:
        if r.get("source_type") != "case":
            checked.append(r)
            continue
        reference = case_reference(str(r.get("chunk_id") or ""))
        pk = int(reference["case_id"][5:]) if reference else legacy_published.get(str(r.get("source_id")))
        if reference and pk in published or (not reference and pk is not None):
            checked.append({**r, **({"case_id": f"case-{pk}"} if not reference else {})})
            continue
        checked.append({"source_type": "case", "chunk_id": str(r.get("chunk_id") or "")[:64] if reference else "case-withdrawn",
                        "source_id": reference.get("case_id", "case-withdrawn"), "title": "Withdrawn past incident",
                        "path": "", "score": r.get("score"), "content": "", "case_status": "withdrawn", **reference})
    return checked


_override: dict = {"telemetry": None}


class telemetry_override:
    """Serve logs, metrics, alerts, Kubernetes, traces and changes from one backend for a while (the evaluation harness)."""

    def __init__(self, backend):
        self.backend = backend

    def __enter__(self):
        self.previous, _override["telemetry"] = _override["telemetry"], self.backend
        return self.backend

    def __exit__(self, *exc):
        _override["telemetry"] = self.previous


def backends() -> Backends:
    if _override["telemetry"] is not None:
        logs = metrics = alerts = kubernetes = traces = changes = _override["telemetry"]
    else:
        logs, metrics, alerts = telemetry_backends()
        kubernetes, traces, changes = kubernetes_backend(), traces_backend(), changes_backend()
    return Backends(logs=logs, metrics=metrics, alerts=alerts, knowledge=KnowledgeSearch(), kubernetes=kubernetes,
                    traces=traces, changes=changes)
