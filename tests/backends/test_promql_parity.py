"""The demo backend computes PromQL as Prometheus does: the same samples, backfilled into a real
Prometheus 2.42 (Debian package ``prometheus``, ``promtool tsdb create-blocks-from openmetrics``), give
the same series, timestamps and values for every supported query."""

from __future__ import annotations

import random
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from diagnosis.demo import load_scenario, shipped_scenarios
from diagnosis.tools.backends.demo import DemoBackend
from diagnosis.tools.backends.prometheus import PrometheusBackend
from tests.backends.conftest import PROMETHEUS_BIN, _start_prometheus, _stop
from tests.demo.builders import histogram, series, write_scenario

NOW = datetime(2026, 11, 29, 10, 20, 37, tzinfo=timezone.utc)
PROMTOOL_BIN = str(Path(PROMETHEUS_BIN).with_name("promtool"))
BOUNDS = ["0.05", "0.1", "0.25", "0.5", "1", "2.5", "+Inf"]


def _counter(rng: random.Random, n: int, start: float, rate: tuple[float, float], reset_at: int | None = None):
    values, value = [], start
    for i in range(n):
        if i == reset_at:
            value = rng.uniform(0, 3)  # the process restarted: the counter starts again near zero
        else:
            value += rng.uniform(*rate)
        values.append(round(value, 3))
    return values


def _histogram_rows(rng: random.Random, n: int, slow_from: int, reset_at: int | None = None):
    """Cumulative bucket counts per sample: fast requests, then from ``slow_from`` most take 0.5–2.5 s."""
    totals = [0.0] * len(BOUNDS)
    rows = []
    for i in range(n):
        if i == reset_at:
            totals = [0.0] * len(BOUNDS)
        observed = [0] * len(BOUNDS)
        for _ in range(rng.randint(20, 40)):
            latency = rng.uniform(0.5, 2.4) if i >= slow_from and rng.random() < 0.7 else rng.uniform(0.01, 0.3)
            for b, bound in enumerate(BOUNDS):
                if latency <= float(bound):
                    observed[b] += 1
        totals = [t + o for t, o in zip(totals, observed)]
        rows.append(list(totals))
    return rows


def _world() -> list[dict]:
    rng = random.Random(26)
    out = [
        series("http_requests_total", _counter(rng, 240, 120_000, (40, 60), reset_at=170), step=15,
               service="checkout", code="200", instance="10.0.1.5:8080"),
        series("http_requests_total", [None] * 150 + _counter(rng, 90, 0, (0, 9)), step=15,
               service="checkout", code="500", instance="10.0.1.5:8080"),
        series("http_requests_total", [None if i in (7, 31, 32) or 40 <= i < 50 else v
                                       for i, v in enumerate(_counter(rng, 60, 5_000, (100, 140)))],
               service="cart", code="200", instance="10.0.2.9:8080"),
        series("worker_jobs_total", _counter(rng, 40, 300, (1, 4)) + [None] * 20, service="batch"),
        series("queue_depth", [None if i % 11 == 5 else rng.randint(0, 30) for i in range(60)], service="batch"),
        series("kubelet_volume_stats_available_bytes", [8e9 - i * 9e7 for i in range(60)],
               namespace="shop", persistentvolumeclaim="data-orders-mysql-0"),
        series("kubelet_volume_stats_available_bytes", [5e9 - i * 1e7 for i in range(60)],
               namespace="shop", persistentvolumeclaim="data-orders-mysql-archive-0"),
        series("kubelet_volume_stats_available_bytes", [2e9] * 60, namespace="shop", persistentvolumeclaim="data-mysql-0"),
        series("container_fs_usage_bytes", [1e8 + i * 1e6 for i in range(60)], namespace="shop", pod="orders-mysql-0"),
    ]
    for mode, rate in (("idle", (20, 28)), ("user", (2, 9)), ("system", (0.5, 2))):
        out.append(series("node_cpu_seconds_total", _counter(rng, 120, 88_000, rate), step=30,
                          instance="node-a:9100", cpu="0", mode=mode))
    rows = _histogram_rows(rng, 240, slow_from=200, reset_at=170)
    out += histogram("http_request_duration_seconds", BOUNDS, rows, step=15, service="checkout")
    out.append(series("http_request_duration_seconds_sum", [round(r[-1] * 0.21, 3) for r in rows], step=15,
                      service="checkout"))
    rows = _histogram_rows(rng, 60, slow_from=45)
    out += histogram("http_request_duration_seconds", BOUNDS, rows, service="cart")
    return out


def _openmetrics(world: list[dict]) -> str:  # every series once: the worlds share no label set
    """The scenario's samples at the times the demo backend serves them (newest on the last step boundary)."""
    now = int(NOW.timestamp())
    lines = []
    for s in sorted(world, key=lambda s: s["labels"]["__name__"]):  # a metric's lines stay together
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s["labels"].items()) if k != "__name__")
        anchor = now - now % s["step_seconds"]
        n = len(s["values"])
        for i, value in enumerate(s["values"]):
            if value is not None:
                lines.append(f'{s["labels"]["__name__"]}{{{labels}}} {value} {anchor - (n - 1 - i) * s["step_seconds"]}')
    return "\n".join(lines) + "\n# EOF\n"


def _shipped_series() -> list[dict]:
    return [series for path in shipped_scenarios() for series in load_scenario(path).series]


@pytest.fixture(scope="module")
def prometheus_with_both(tmp_path_factory):
    """A real Prometheus holding the synthetic world's samples and every shipped scenario's."""
    world = _world()
    folder = write_scenario(tmp_path_factory.mktemp("parity") / "parity", series_list=world)
    workdir = tmp_path_factory.mktemp("prometheus-parity")
    (workdir / "samples.om").write_text(_openmetrics(world + _shipped_series()), encoding="utf-8")
    subprocess.run([PROMTOOL_BIN, "tsdb", "create-blocks-from", "openmetrics", str(workdir / "samples.om"),
                    str(workdir / "data")], check=True, capture_output=True, timeout=120)
    proc, url, _ = _start_prometheus(workdir, args=("--storage.tsdb.retention.time=100y",))
    try:
        yield DemoBackend([folder], now=NOW), DemoBackend(now=NOW), PrometheusBackend(url, timeout_seconds=10)
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def both(prometheus_with_both):
    synthetic, _, prometheus = prometheus_with_both
    return synthetic, prometheus


QUERIES = [
    'http_requests_total',
    'http_requests_total{service="cart"}',
    'worker_jobs_total',
    'queue_depth',
    'kubelet_volume_stats_available_bytes',
    'node_cpu_seconds_total{mode!="idle"}',
    'rate(http_requests_total[5m])',
    'rate(http_requests_total{service="checkout"}[1m])',
    'irate(http_requests_total[2m])',
    'increase(http_requests_total[10m])',
    'increase(worker_jobs_total[5m])',
    'rate(worker_jobs_total[3m])',
    'sum by (service) (rate(http_requests_total[5m]))',
    'sum without (instance, code) (rate(http_requests_total[5m]))',
    'sum(rate(http_requests_total{code=~"5.."}[5m]))',
    'avg by (service) (rate(http_requests_total[5m]))',
    'max by (service) (queue_depth)',
    'min(kubelet_volume_stats_available_bytes)',
    'count by (service) (http_requests_total)',
    'sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[5m]))',
    'avg without (cpu) (irate(node_cpu_seconds_total[1m]))',
    'histogram_quantile(0.99, sum by (le, service) (rate(http_request_duration_seconds_bucket[5m])))',
    'histogram_quantile(0.5, rate(http_request_duration_seconds_bucket{service="checkout"}[2m]))',
    'histogram_quantile(0.9, sum by (le) (increase(http_request_duration_seconds_bucket[10m])))',
    'rate(http_request_duration_seconds_sum[5m])',
    'queue_depth or node_cpu_seconds_total{mode!="idle"}',
    'http_requests_total{service="cart"} or http_requests_total{code=~"5.."}',
    'rate(http_requests_total{service="cart"}[5m]) or rate(worker_jobs_total[5m])',
]
WINDOWS = [  # (start, end, step): the default hour, an unaligned half hour, coarse steps
    (NOW - timedelta(hours=1), NOW, "60"),
    (NOW - timedelta(minutes=31, seconds=7), NOW - timedelta(minutes=2, seconds=11), "45"),
    (NOW - timedelta(hours=1), NOW, "5m"),
    (NOW - timedelta(minutes=20), NOW, "15"),
]


@pytest.mark.parametrize("query", QUERIES)
def test_the_demo_backend_answers_every_query_as_prometheus_does(both, query):
    demo, prometheus = both
    for start, end, step in WINDOWS:
        ours = demo.query_metrics(query=query, start=start, end=end, step=step)
        theirs = prometheus.query_metrics(query=query, start=start, end=end, step=step)
        assert ours["step"] == theirs["step"]
        assert [s["labels"] for s in ours["series"]] == [s["labels"] for s in theirs["series"]], (query, step)
        assert ours["series"], (query, step)  # every query has an answer to compare
        for a, b in zip(ours["series"], theirs["series"]):
            # Same timestamps and the same value strings, digit for digit.
            mismatched = [(x, y) for x, y in zip(a["values"], b["values"]) if x != y]
            assert len(a["values"]) == len(b["values"]) and not mismatched, (query, step, a["labels"], mismatched[:3])


@pytest.mark.parametrize(("metric", "service", "claims"), [
    ("kubelet_volume_stats_available_bytes", "orders-mysql", ["data-orders-mysql-0"]),
    ("kubelet_volume_stats_available_bytes", "orders-mysql-archive", ["data-orders-mysql-archive-0"]),
    # A service whose name ends another StatefulSet's takes its claims too: the claim name cannot tell.
    ("kubelet_volume_stats_available_bytes", "mysql", ["data-mysql-0", "data-orders-mysql-0"]),
    ("container_fs_usage_bytes", "orders-mysql", [None]),
])
def test_a_service_selects_its_pods_and_volumes_as_prometheus_does(both, metric, service, claims):
    """``metric`` of ``service``: the real server accepts the backend's ``… or {pod=~…} or
    {persistentvolumeclaim=~…}`` and selects exactly the series the demo backend selects."""
    demo, prometheus = both
    start, end, step = WINDOWS[0]
    ours = demo.query_metrics(metric=metric, service=service, start=start, end=end, step=step)
    theirs = prometheus.query_metrics(metric=metric, service=service, start=start, end=end, step=step)
    assert "persistentvolumeclaim=~" in theirs["query"]
    assert sorted(s["labels"].get("persistentvolumeclaim") for s in theirs["series"]) == claims
    assert [s["labels"] for s in ours["series"]] == [s["labels"] for s in theirs["series"]]
    assert [s["values"] for s in ours["series"]] == [s["values"] for s in theirs["series"]]


SHIPPED_QUERIES = [
    '{service="payment-service"}',
    'histogram_quantile(0.99, sum by (le, service) (rate(http_server_requests_seconds_bucket[5m])))',
    'sum by (service, status) (rate(http_server_requests_seconds_count[5m]))',
    'histogram_quantile(0.5, sum by (le) (rate(flask_http_request_duration_seconds_bucket{service="invoice-renderer"}[5m])))',
    'node_filesystem_avail_bytes',
    'rate(node_disk_written_bytes_total[5m])',
    'max by (service) (http_error_ratio)',
]


@pytest.mark.parametrize("query", SHIPPED_QUERIES)
def test_the_shipped_scenarios_read_the_same_from_prometheus(prometheus_with_both, query):
    _, shipped, prometheus = prometheus_with_both
    start, end, step = WINDOWS[0]
    ours = shipped.query_metrics(query=query, start=start, end=end, step=step)
    theirs = prometheus.query_metrics(query=query, start=start, end=end, step=step)
    assert ours["series"] and [s["labels"] for s in ours["series"]] == [s["labels"] for s in theirs["series"]]
    assert [s["values"] for s in ours["series"]] == [s["values"] for s in theirs["series"]], query
