"""Write small scenario folders for tests: only what a test needs, the rest minimal but valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable


def series(name: str, values: Iterable[float | None], step: int = 60, **labels: str) -> dict[str, Any]:
    """One ``metrics.json`` series; the newest value is "now"."""
    return {"labels": {"__name__": name, **labels}, "step_seconds": step, "values": list(values)}


def histogram(name: str, bounds: Iterable[str], counts_by_sample: list[list[float | None]], step: int = 60,
              **labels: str) -> list[dict[str, Any]]:
    """``name_bucket`` per bound (cumulative counts, one row per sample, ``+Inf`` last) plus ``name_count``."""
    bounds = list(bounds)
    out = [series(f"{name}_bucket", [row[i] for row in counts_by_sample], step, le=bound, **labels)
           for i, bound in enumerate(bounds)]
    out.append(series(f"{name}_count", [row[-1] for row in counts_by_sample], step, **labels))
    return out


def write_scenario(path: Path, *, name: str | None = None, series_list: Iterable[dict] = (),
                   logs: Iterable[dict] | None = None, alerts: Iterable[dict] = (),
                   kubernetes: dict | None = None, services: Iterable[str] | None = None) -> Path:
    """A scenario folder at ``path`` (created) with the given telemetry; returns ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    name = name or path.name
    series_list = list(series_list)
    logs = list(logs) if logs is not None else [
        {"offset_seconds": -60, "service": "svc", "level": "INFO", "message": "started"}]
    known = sorted(set(services or []) | {r["service"] for r in logs}
                   | {s["labels"]["service"] for s in series_list if "service" in s["labels"]})
    (path / "scenario.json").write_text(json.dumps({
        "name": name, "title": name, "services": known, "description": "test scenario",
        "default_question": {"en": "What is wrong?", "zh": "出了什么问题？"}}), encoding="utf-8")
    (path / "metrics.json").write_text(json.dumps({"series": series_list}), encoding="utf-8")
    (path / "logs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logs), encoding="utf-8")
    (path / "alerts.json").write_text(json.dumps({"alerts": list(alerts)}), encoding="utf-8")
    (path / "ground_truth.json").write_text(json.dumps({
        "root_cause_service": None, "root_cause": "no_anomaly", "cause_keywords": ["healthy"],
        "key_evidence": ["started"], "expected_nothing_wrong": True}), encoding="utf-8")
    if kubernetes is not None:
        (path / "kubernetes.json").write_text(json.dumps(kubernetes), encoding="utf-8")
    return path
