"""An informational alert (severity ``info``, as kube-prometheus's CPUThrottlingHigh is) reports a state worth
knowing, not trouble: with telemetry that shows nothing wrong, the answer is "nothing wrong". A warning that
fires on the same quiet telemetry is trouble the run did not find: undetermined."""

from __future__ import annotations

import pytest

from diagnosis.graph.state import StateKey as K
from tests.demo.builders import series, write_scenario
from tests.offline.pipeline import run_question

QUESTION = "A CPU throttling alert is firing next to marrowfin-web. Is something broken that we need to act on?"


def _world(tmp_path, severity: str):
    metrics = [series("http_requests_total", [1000.0 + 120 * i for i in range(60)], service="marrowfin-web", code="200"),
               series("process_cpu_seconds_total", [50.0 + 0.2 * i for i in range(60)], service="marrowfin-web"),
               series("process_cpu_seconds_total", [10.0 + 0.1 * i for i in range(60)], service="marrowfin-export")]
    logs = [{"offset_seconds": -3540 + 60 * i, "service": "marrowfin-web", "level": "INFO",
             "message": f"GET /listings?page={i % 7} 200 {40 + i % 9}ms"} for i in range(59)]
    logs += [{"offset_seconds": -3500 + 300 * i, "service": "marrowfin-export", "level": "INFO",
              "message": f"exported batch {i} rows=5000"} for i in range(12)]
    alert = {"labels": {"alertname": "CPUThrottlingHigh", "service": "marrowfin-export", "severity": severity},
             "annotations": {"summary": "Processes experience elevated CPU throttling.",
                             "description": "27% throttling of CPU in namespace listings for container export."},
             "state": "firing", "offset_seconds": -780, "value": "0.27"}
    return write_scenario(tmp_path / f"marrowfin-{severity}", series_list=metrics, logs=logs, alerts=[alert])


def _diagnosis(run) -> dict:
    composed = run.state.get(K.COMPOSER_OUTPUT) or {}
    return (composed.get("render") or {}).get("diagnosis") or {}


@pytest.mark.parametrize("severity, nothing_wrong", [("info", True), ("none", True), ("warning", False)])
def test_an_informational_alert_on_quiet_telemetry_is_no_trouble_a_warning_is(tmp_path, severity, nothing_wrong):
    diagnosis = _diagnosis(run_question(_world(tmp_path, severity), QUESTION))
    assert diagnosis["rootCause"] is None
    assert diagnosis["nothingWrong"] is nothing_wrong
    assert diagnosis["undetermined"] is not nothing_wrong
