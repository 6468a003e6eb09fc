"""PrometheusBackend against a real Prometheus 2.42 server (plus a few recorded responses)."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import pytest

from diagnosis.tools.backends.base import BackendError, workload_claims_regex, workload_pods_regex
from diagnosis.tools.backends.prometheus import PrometheusBackend, promql_selector

from .conftest import free_port

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$")
STATS_KEYS = {"min", "max", "mean", "last", "max_at", "baseline"}


@pytest.fixture
def prometheus(prometheus_url):
    return PrometheusBackend(prometheus_url, timeout_seconds=5)


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1]


# --------------------------------------------------------------------------- real server


def test_a_range_query_of_up_returns_a_series_with_stats_and_a_description(prometheus, prometheus_url):
    result = prometheus.query_metrics(query="up")

    assert result["backend"] == "prometheus"
    assert result["query"] == "up"
    assert result["step"] == 60
    assert ISO_UTC.match(result["start"]) and ISO_UTC.match(result["end"])
    start = datetime.fromisoformat(result["start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(result["end"].replace("Z", "+00:00"))
    assert end - start == timedelta(minutes=60)

    [series] = result["series"]
    assert series["labels"] == {
        "__name__": "up", "job": "prometheus", "instance": f"127.0.0.1:{_port(prometheus_url)}",
    }
    assert series["values"], "expected at least one sample"
    for t, v in series["values"]:
        assert isinstance(t, (int, float)) and isinstance(v, str)
    assert series["values"][-1][1] == "1"
    stats = series["stats"]
    assert STATS_KEYS <= set(stats)
    assert (stats["min"], stats["max"], stats["mean"], stats["last"], stats["baseline"]) == (1, 1, 1, 1, 1)
    assert ISO_UTC.match(stats["max_at"])
    assert series["description"] == (
        f'up{{instance="127.0.0.1:{_port(prometheus_url)}",job="prometheus"}} '
        f"max 1 at {stats['max_at']}, baseline 1, last 1"
    )


def test_a_short_range_with_a_duration_step_returns_several_points(prometheus):
    end = datetime.now(timezone.utc)
    result = prometheus.query_metrics(query="up", start=end - timedelta(seconds=20), end=end, step="1s")

    assert result["step"] == 1
    [series] = result["series"]
    assert len(series["values"]) >= 2
    times = [t for t, _ in series["values"]]
    assert times == sorted(times)


def test_the_step_is_raised_so_a_range_never_has_more_than_1000_points(prometheus):
    end = datetime.now(timezone.utc)
    result = prometheus.query_metrics(query="up", start=end - timedelta(days=1), end=end, step=1)

    assert result["step"] == 87  # ceil(86400 / 999); the server accepted it
    assert 86400 / result["step"] + 1 <= 1000
    assert all(len(s["values"]) <= 1000 for s in result["series"])


def test_metric_and_service_build_a_selector_on_the_service_label(prometheus_url):
    by_job = PrometheusBackend(prometheus_url, service_label="job")
    result = by_job.query_metrics(metric="up", service="prometheus")

    assert result["query"] == 'up{job="prometheus"} or up{pod=~"%s"} or up{persistentvolumeclaim=~"%s"}' % (
        workload_pods_regex("prometheus"), workload_claims_regex("prometheus"))
    [series] = result["series"]  # the server accepted the pods' and the volumes' alternatives too
    assert series["labels"]["job"] == "prometheus"
    assert series["labels"]["service"] == "prometheus"  # mapped from the configured service label

    alerts_series = PrometheusBackend(prometheus_url).query_metrics(metric="ALERTS", service="prometheus")
    assert alerts_series["query"].startswith('ALERTS{service="prometheus"} or ALERTS{pod=~')
    assert [s["labels"]["alertname"] for s in alerts_series["series"]] == ["AlwaysFiring"]


def test_a_service_with_quotes_and_backslashes_is_escaped_and_accepted_by_the_server(prometheus):
    result = prometheus.query_metrics(metric="up", service='we"ird\\svc\n')

    assert result["query"].startswith('up{service="we\\"ird\\\\svc\\n"} or up{pod=~"we\\"ird')
    assert result["series"] == []  # a valid query that matches nothing


def test_an_invalid_metric_name_or_no_query_is_a_backend_error(prometheus):
    with pytest.raises(BackendError, match="^metric: not a valid metric name") as info:
        prometheus.query_metrics(metric='up{job="x"}', service="a")
    assert info.value.argument == "metric"
    with pytest.raises(BackendError, match="^query: give a PromQL query, or a metric name"):
        prometheus.query_metrics(service="a")


def test_an_instant_query_returns_the_current_vector_or_scalar(prometheus):
    vector = prometheus.query_instant("up")
    assert vector["backend"] == "prometheus"
    assert vector["result_type"] == "vector"
    [series] = vector["series"]
    assert series["labels"]["__name__"] == "up"
    assert series["value"][1] == "1"

    at = datetime.now(timezone.utc) - timedelta(seconds=1)
    scalar = prometheus.query_instant("1 + 1", time=at)
    assert scalar["result_type"] == "scalar"
    assert scalar["series"] == [{"labels": {}, "value": [pytest.approx(at.timestamp(), abs=0.001), "2"]}]
    assert ISO_UTC.match(scalar["time"])


def test_the_alerts_endpoint_returns_the_firing_alert_in_the_alerts_shape(prometheus):
    result = prometheus.query_alerts()

    assert result["backend"] == "prometheus"
    [alert] = [a for a in result["alerts"] if a["labels"].get("alertname") == "AlwaysFiring"]
    assert set(alert) == {"labels", "annotations", "state", "activeAt", "value"}
    assert alert["labels"] == {"alertname": "AlwaysFiring", "service": "prometheus", "severity": "page"}
    assert alert["annotations"] == {"summary": "always on", "description": "test alert that is always firing"}
    assert alert["state"] == "firing"
    assert ISO_UTC.match(alert["activeAt"])
    assert alert["value"] == "1e+00"


def test_bad_promql_is_a_backend_error_with_bad_data(prometheus):
    with pytest.raises(BackendError, match="bad_data") as info:
        prometheus.query_metrics(query="up{")
    assert "HTTP 400" in str(info.value)
    assert "parse error" in str(info.value)


def test_an_end_before_the_start_is_a_backend_error(prometheus):
    now = datetime(2026, 11, 29, 10, 10, tzinfo=timezone.utc)
    with pytest.raises(BackendError) as info:
        prometheus.query_metrics(query="up", start=now, end=now - timedelta(minutes=10))
    assert str(info.value) == "end: end 2026-11-29T10:00:00Z is before start 2026-11-29T10:10:00Z"
    assert info.value.argument == "end"


def test_the_server_rejects_a_range_whose_end_is_before_its_start_with_bad_data(prometheus_url):
    # What a raw query_range with end < start answers (the backend checks this before sending).
    import httpx

    response = httpx.get(f"{prometheus_url}/api/v1/query_range",
                         params={"query": "up", "start": "100", "end": "50", "step": "10"})
    assert response.json()["errorType"] == "bad_data"


def test_an_unreachable_port_is_a_backend_error_quickly():
    port = free_port()
    backend = PrometheusBackend(f"http://127.0.0.1:{port}", timeout_seconds=5)

    started = time.monotonic()
    with pytest.raises(BackendError, match=rf"^prometheus unreachable at http://127\.0\.0\.1:{port}: "):
        backend.query_metrics(query="up")
    with pytest.raises(BackendError, match="prometheus unreachable"):
        backend.query_alerts()
    assert time.monotonic() - started < 2


# --------------------------------------------------------------------------- recorded / fake


def test_a_server_that_never_answers_times_out_as_a_backend_error(silent_port):
    backend = PrometheusBackend(f"http://127.0.0.1:{silent_port}", timeout_seconds=0.5)

    started = time.monotonic()
    with pytest.raises(BackendError, match=r"prometheus unreachable at .*timed out after 0\.5s"):
        backend.query_metrics(query="up")
    assert time.monotonic() - started < 3


def test_credentials_in_the_base_url_never_appear_in_error_messages():
    port = free_port()
    backend = PrometheusBackend(f"http://admin:s3cret@127.0.0.1:{port}/prom?token=abc")

    with pytest.raises(BackendError) as info:
        backend.query_alerts()
    assert "s3cret" not in str(info.value) and "admin" not in str(info.value)
    assert "abc" not in str(info.value)
    assert repr(backend) == f"PrometheusBackend('http://127.0.0.1:{port}/prom')"


def test_a_non_json_answer_is_a_backend_error(http_server):
    http_server.respond("/api/v1/query_range", "<html>proxy login</html>", status=200, content_type="text/html")

    with pytest.raises(BackendError, match=r"non-JSON response \(HTTP 200\): <html>proxy login</html>"):
        PrometheusBackend(http_server.url).query_metrics(query="up")


def test_a_redirect_is_not_followed(http_server):
    http_server.respond("/api/v1/alerts", "", status=302, headers={"Location": "/login"})
    http_server.respond("/login", {"status": "success", "data": {"alerts": []}})

    with pytest.raises(BackendError, match="HTTP 302 redirect"):
        PrometheusBackend(http_server.url).query_alerts()
    assert [r["path"] for r in http_server.requests] == ["/api/v1/alerts"]


def test_a_success_with_a_non_matrix_result_is_a_backend_error(http_server):
    http_server.respond("/api/v1/query_range",
                        {"status": "success", "data": {"resultType": "vector", "result": []}})

    with pytest.raises(BackendError, match="expected a matrix"):
        PrometheusBackend(http_server.url).query_metrics(query="up")


def test_stats_ignore_nan_and_inf_and_the_description_is_deterministic(http_server):
    http_server.respond_with_recording("/api/v1/query_range", "prometheus_matrix_nan.json")
    start = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)

    result = PrometheusBackend(http_server.url).query_metrics(
        metric="http_requests_total", start=start, end=start + timedelta(minutes=8)
    )

    params = http_server.requests[0]["params"]
    assert params == {"query": "http_requests_total", "start": "1795946400", "end": "1795946880", "step": "60"}
    assert result["start"] == "2026-11-29T10:00:00Z" and result["end"] == "2026-11-29T10:08:00Z"
    cart, checkout = result["series"]  # sorted by labels
    assert checkout["values"][2] == [1795946520, "NaN"]
    assert checkout["stats"] == {
        "min": 10, "max": 50, "mean": pytest.approx(110 / 6), "last": 13,
        "max_at": "2026-11-29T10:04:00Z", "baseline": 11, "min_at": "2026-11-29T10:00:00Z",
    }
    assert checkout["description"] == (
        'http_requests_total{job="api",service="checkout"} '
        "max 50 at 2026-11-29T10:04:00Z, baseline 11, last 13"
    )
    assert all(v is None for v in cart["stats"].values()) and STATS_KEYS <= set(cart["stats"])
    assert cart["description"] == 'http_requests_total{job="api",service="cart"} no finite samples'


def test_promql_selector_escapes_label_values():
    assert promql_selector("up") == "up"
    assert promql_selector("up", {"service": 'a"b\\c'}) == 'up{service="a\\"b\\\\c"}'
