"""The scenario format as rich as real telemetry: counters and histograms, series without a service, gaps
and stopped series, raw log lines with their own timestamps and levels, Services and pod IPs."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from diagnosis.demo import ScenarioError, load_scenario
from diagnosis.demo.timestamps import TIMESTAMP_LAYOUTS
from diagnosis.tools.backends.base import BackendError, parse_time, workload_claims_regex, workload_pods_regex
from diagnosis.tools.backends.demo import DemoBackend
from diagnosis.tools.registry import SUCCESS, Backends, ToolBox
from tests.demo.builders import histogram, series, write_scenario

NOW = datetime(2026, 11, 29, 10, 20, 37, tzinfo=timezone.utc)
NOW_S = int(NOW.timestamp())
ANCHOR = NOW_S - NOW_S % 60  # the newest sample of a 60 s series


def backend(tmp_path, **kwargs) -> DemoBackend:
    return DemoBackend([write_scenario(tmp_path / "s", **kwargs)], now=NOW)


# --- loader validation: every error names the file, the item and the fix ------------------------------


def _rejects(tmp_path, match: str, **kwargs) -> str:
    folder = write_scenario(tmp_path / "bad", **kwargs)
    with pytest.raises(ScenarioError, match=match) as info:
        load_scenario(folder)
    return str(info.value)


@pytest.mark.parametrize(("series_list", "match"), [
    ([series("up", [None, None])], r"metrics.json: series\[0\] up: 'values' holds no sample"),
    ([series("up", [1, "x"])], r"series\[0\] up: 'values' must be .* null where a sample is missing"),
    ([series("http_requests_total", [3, -1], service="a")], r'http_requests_total\{service="a"\}: a total series is cumulative'),
    ([series("x_bucket", [1], service="a")], r"a _bucket series needs an 'le' label"),
    ([series("x_bucket", [1], le="fast")], r"needs an 'le' label holding its upper bound"),
    ([series("queue_depth", [1], le="1")], r"'le' belongs to _bucket series only"),
    ([series("up", [1], __job="x")], r"invalid label name '__job'"),
    ([series("up", [1], job="")], r"non-empty strings"),
    ([series("up", [1], job="a"), series("up", [2], job="a")], r'series\[1\] up\{job="a"\}: the same labels as series\[0\]'),
    (histogram("lat", ["0.1", "1"], [[1, 2]]), r'histogram lat_bucket: the buckets need one with le="\+Inf"'),
    (histogram("lat", ["0.1", "1", "+Inf"], [[1, 3, 2]]), r"sample 0: bucket counts must not decrease as 'le' grows"),
    (histogram("lat", ["0.1", "+Inf"], [[1, 2], [None, 3]]), r"sample 1 is missing in some buckets only"),
    (histogram("lat", ["0.1", "+Inf"], [[4, 5], [1, 9]]), r'sample 1: bucket le="0.1" decreases while \+Inf does not'),
    (histogram("lat", ["0.1", "+Inf"], [[1, 2]])[:-1] + [series("lat_count", [3])],
     r'lat_count must equal the le="\+Inf" bucket'),
])
def test_the_loader_rejects_malformed_series_naming_the_series_and_the_fix(tmp_path, series_list, match):
    message = _rejects(tmp_path, match, series_list=series_list)
    assert message.startswith(str(tmp_path / "bad" / "metrics.json"))


@pytest.mark.parametrize(("record", "match"), [
    ({"offset_seconds": -1.2345, "service": "a", "message": "x"}, r"logs.jsonl:1: 'offset_seconds' must be a number <= 0"),
    ({"offset_seconds": 5, "service": "a", "message": "x"}, r"'offset_seconds' must be a number <= 0"),
    ({"offset_seconds": -1, "service": "a", "level": "SEVERE", "message": "x"},
     r"'level' must be one of TRACE, DEBUG, INFO, NOTICE, .*; leave it out when only the line tells the level"),
    ({"offset_seconds": -1, "service": "a", "message": "{ts:apache} x"},
     r"unknown timestamp placeholder \{ts:apache\}; known layouts: iso, "),
])
def test_the_loader_rejects_malformed_log_records(tmp_path, record, match):
    _rejects(tmp_path, match, logs=[record])


POD = {"name": "db-0", "podIP": "10.244.2.31", "labels": {"app": "db"}, "containers": []}


@pytest.mark.parametrize(("kubernetes", "match"), [
    ({"namespace": "n", "pods": [{**POD, "podIP": "10.244.2"}]}, r"pod db-0: 'podIP' must be an IP address"),
    ({"namespace": "n", "pods": [POD, {**POD, "name": "db-1"}]}, r"pod db-1: podIP 10.244.2.31 is also the IP of pod db-0"),
    ({"namespace": "n", "services": [{"name": "Orders_DB", "clusterIP": "10.96.0.9"}]}, r"services\[0\] Orders_DB: 'name' must be a DNS label"),
    ({"namespace": "n", "services": [{"name": "db", "clusterIP": "none"}]}, r"'clusterIP' must be an IP address, or \"None\""),
    ({"namespace": "n", "services": [{"name": "db", "clusterIP": "10.96.0.9"}, {"name": "db2", "clusterIP": "10.96.0.9"}]},
     r"services\[1\] db2: clusterIP 10.96.0.9 is taken by another Service"),
    ({"namespace": "n", "services": [{"name": "db", "clusterIP": "10.96.0.9", "ports": [{"port": 70000}]}]}, r"'ports' must be objects"),
    ({"namespace": "n", "services": [{"name": "psp", "type": "ExternalName"}]}, r"needs 'externalName'"),
    ({"namespace": "n", "pods": [POD], "services": [
        {"name": "db", "clusterIP": "10.96.0.9", "endpoints": [{"ip": "10.244.2.99", "pod": "db-0"}]}]},
     r"endpoint 10.244.2.99 names pod 'db-0', whose podIP is 10.244.2.31"),
])
def test_the_loader_rejects_malformed_kubernetes_objects(tmp_path, kubernetes, match):
    message = _rejects(tmp_path, match, kubernetes=kubernetes)
    assert "kubernetes.json" in message


# --- metrics: no service label, gaps, stopped series -----------------------------------------------


def test_node_and_volume_series_need_no_service_label(tmp_path):
    demo = backend(tmp_path, series_list=[
        series("node_cpu_seconds_total", [100 + 30 * i for i in range(10)], instance="node-a:9100", mode="user", cpu="0"),
        series("kubelet_volume_stats_available_bytes", [5e9] * 10, namespace="shop", persistentvolumeclaim="data-db-0"),
        series("http_requests_total", [10 * i for i in range(10)], service="web"),
    ])
    assert demo.services() == ["svc", "web"]
    (node,) = demo.query_metrics(query='node_cpu_seconds_total{mode="user"}')["series"]
    assert "service" not in node["labels"] and node["labels"]["instance"] == "node-a:9100"
    (volume,) = demo.query_metrics(metric="kubelet_volume_stats_available_bytes")["series"]
    assert volume["labels"]["persistentvolumeclaim"] == "data-db-0"
    assert volume["description"].startswith('kubelet_volume_stats_available_bytes{namespace="shop",'
                                            'persistentvolumeclaim="data-db-0"} max 5000000000')
    # A service filter leaves series without that label out, as a label matcher does in Prometheus.
    assert [s["labels"]["__name__"] for s in demo.query_metrics(service="web")["series"]] == ["http_requests_total"]


def test_a_service_query_also_selects_its_pods_series_and_no_other_workloads(tmp_path):
    demo = backend(tmp_path, series_list=[
        series("http_requests_total", [10 * i for i in range(10)], service="web"),
        series("container_cpu_usage_seconds_total", [i for i in range(10)], namespace="shop", pod="web-7f9c6d5b4-x2v4z"),
        series("container_memory_working_set_bytes", [1e8] * 10, namespace="shop", pod="web-0"),
        series("container_cpu_usage_seconds_total", [i for i in range(10)], namespace="shop", pod="web-api-x2v4z"),
        series("container_cpu_usage_seconds_total", [i for i in range(10)], namespace="shop", pod="webber-7f9c6d5b4-x2v4z"),
    ])
    result = demo.query_metrics(service="web")
    assert sorted((s["labels"]["__name__"], s["labels"].get("pod")) for s in result["series"]) == [
        ("container_cpu_usage_seconds_total", "web-7f9c6d5b4-x2v4z"),
        ("container_memory_working_set_bytes", "web-0"),
        ("http_requests_total", None),
    ]
    assert result["query"] == '{service="web"} or {pod=~"%s"} or {persistentvolumeclaim=~"%s"}' % (
        workload_pods_regex("web").replace("\\", "\\\\"), workload_claims_regex("web"))
    (cpu,) = demo.query_metrics(metric="container_cpu_usage_seconds_total", service="web-api")["series"]
    assert cpu["labels"]["pod"] == "web-api-x2v4z"


def test_a_service_query_also_selects_its_statefulset_volumes_and_no_other_statefulsets(tmp_path):
    # The kubelet labels a volume's series by namespace and claim only: <template>-<statefulset>-<ordinal>.
    demo = backend(tmp_path, series_list=[
        series("kubelet_volume_stats_available_bytes", [8e9 - i * 1e8 for i in range(10)],
               namespace="shop", persistentvolumeclaim="data-orders-db-0"),
        series("kubelet_volume_stats_capacity_bytes", [1e10] * 10, namespace="shop", persistentvolumeclaim="data-orders-db-0"),
        series("kubelet_volume_stats_inodes_free", [5e5] * 10, namespace="shop", persistentvolumeclaim="wal-orders-db-1"),
        # Other StatefulSets: one whose name begins with the service's, one whose name the service's ends.
        series("kubelet_volume_stats_available_bytes", [1e9] * 10, namespace="shop",
               persistentvolumeclaim="data-orders-db-archive-0"),
        series("kubelet_volume_stats_available_bytes", [1e9] * 10, namespace="shop", persistentvolumeclaim="data-db-0"),
        series("kubelet_volume_stats_available_bytes", [1e9] * 10, namespace="shop", persistentvolumeclaim="orders-db"),
    ])
    result = demo.query_metrics(service="orders-db")
    assert sorted((s["labels"]["__name__"], s["labels"]["persistentvolumeclaim"]) for s in result["series"]) == [
        ("kubelet_volume_stats_available_bytes", "data-orders-db-0"),
        ("kubelet_volume_stats_capacity_bytes", "data-orders-db-0"),
        ("kubelet_volume_stats_inodes_free", "wal-orders-db-1"),
    ]
    (free,) = demo.query_metrics(metric="kubelet_volume_stats_available_bytes", service="orders-db")["series"]
    assert free["labels"] == {"__name__": "kubelet_volume_stats_available_bytes", "namespace": "shop",
                              "persistentvolumeclaim": "data-orders-db-0"}
    assert free["stats"]["last"] == 7.1e9
    (archive,) = demo.query_metrics(service="orders-db-archive")["series"]
    assert archive["labels"]["persistentvolumeclaim"] == "data-orders-db-archive-0"


def test_a_missing_sample_is_covered_by_the_lookback_and_a_long_gap_shows(tmp_path):
    values = [float(i) for i in range(30)]
    values[20] = None  # one failed scrape
    for i in range(5, 12):  # seven minutes without samples
        values[i] = None
    demo = backend(tmp_path, series_list=[series("queue_depth", values, service="q")])
    (s,) = demo.query_metrics(metric="queue_depth", start=NOW - timedelta(minutes=29), step=60)["series"]
    got = {t: v for t, v in s["values"]}
    first = NOW_S - 29 * 60  # evaluation times: first, first+60, ...; sample i sits at ANCHOR - (29 - i) * 60
    at = {i: first + i * 60 for i in range(30)}
    assert got[at[20]] == "19"  # the newest sample within 5 minutes stands in for the missing one
    # Sample 4 sits 37 s before at[4]: it stands in until 5 minutes after it (at[8]), then the series has no value.
    assert [got.get(at[i]) for i in range(5, 12)] == ["4", "4", "4", "4", None, None, None]
    assert got[at[12]] == "12"


def test_a_series_that_stops_disappears_five_minutes_after_its_last_sample(tmp_path):
    demo = backend(tmp_path, series_list=[series("worker_jobs_total", [float(i) for i in range(40)] + [None] * 20,
                                                 service="batch")])
    (s,) = demo.query_metrics(metric="worker_jobs_total")["series"]
    last_sample = ANCHOR - 20 * 60
    t_last, value = s["values"][-1]
    assert value == "39" and 240 < t_last - last_sample <= 300  # the last evaluation within the lookback
    assert s["stats"]["last"] == 39
    assert demo.query_metrics(metric="worker_jobs_total", start=NOW - timedelta(minutes=10))["series"] == []


# --- counters and histograms -------------------------------------------------------------------------


def test_rate_and_increase_count_a_counter_reset(tmp_path):
    values = [1000 + 60 * i for i in range(10)] + [30 + 60 * i for i in range(10)]  # restarted 10 minutes ago
    demo = backend(tmp_path, series_list=[series("http_requests_total", values, service="web", code="200")])
    window = {"start": NOW, "end": NOW}
    (rate,) = demo.query_metrics(query="rate(http_requests_total[5m])", **window)["series"]
    assert rate["labels"] == {"code": "200", "service": "web"}  # a function drops the metric name
    assert rate["values"] == [[NOW_S, "1"]]  # 60 per minute; the closed 5-minute window holds 6 samples
    (increase,) = demo.query_metrics(query="increase(http_requests_total[15m])", **window)["series"]
    # 15 samples over 840 s: 1300 -> 1540, restart, 30 -> 570 is 810 counted; the first sample is 23 s after the
    # window's start, the last 37 s before its end, both under 1.1 intervals, so it extrapolates to 900 s.
    assert float(increase["values"][0][1]) == pytest.approx(810 * 900 / 840)


def test_histogram_quantile_interpolates_within_the_bucket_the_rank_falls_in(tmp_path):
    rows = [[0, 0, 0], [50, 90, 100], [100, 180, 200]]  # per minute: 50 under 0.1 s, 40 under 0.5 s, 10 above
    demo = backend(tmp_path, series_list=histogram("http_request_duration_seconds", ["0.1", "0.5", "+Inf"], rows,
                                                   service="web"))
    query = "histogram_quantile(0.75, sum by (le, service) (rate(http_request_duration_seconds_bucket[2m])))"
    (p75,) = demo.query_metrics(query=query, start=NOW, end=NOW)["series"]
    assert p75["labels"] == {"service": "web"}
    assert float(p75["values"][0][1]) == pytest.approx(0.1 + 0.4 * (75 - 50) / 40)
    (p99,) = demo.query_metrics(query=query.replace("0.75", "0.99"), start=NOW, end=NOW)["series"]
    assert p99["values"][0][1] == "0.5"  # a rank in the +Inf bucket answers the highest finite bound


def test_service_applies_to_every_selector_of_an_expression(tmp_path):
    demo = backend(tmp_path, series_list=[series("http_requests_total", [i * 6 for i in range(10)], service=s)
                                          for s in ("a", "b")])
    result = demo.query_metrics(query="sum by (service) (rate(http_requests_total[5m]))", service="b",
                                start=NOW, end=NOW)
    assert [s["labels"] for s in result["series"]] == [{"service": "b"}]
    assert result["query"] == "sum by (service) (rate(http_requests_total[5m]))"


# --- logs: timestamps inside the line, levels ----------------------------------------------------------


def test_every_timestamp_layout_renders_the_records_served_time(tmp_path):
    logs = [{"offset_seconds": -125.042, "service": "a", "level": "INFO", "message": f"{name}: {{ts:{name}}}"}
            for name in TIMESTAMP_LAYOUTS]
    demo = backend(tmp_path, logs=logs)
    records = demo.query_logs(service="a", limit=100)["records"]
    assert len(records) == len(TIMESTAMP_LAYOUTS)
    for record in records:
        name, text = record["message"].split(": ", 1)
        when = parse_time(record["timestamp"], argument="t")
        assert when == NOW - timedelta(seconds=125.042)
        assert text == TIMESTAMP_LAYOUTS[name][0](when)
        assert "{ts:" not in text


def test_embedded_timestamps_parse_back_to_the_served_time(tmp_path):
    demo = backend(tmp_path, logs=[
        {"offset_seconds": -42, "service": "edge", "level": "INFO",
         "message": '10.0.4.181 - - [{ts:nginx}] "GET / HTTP/1.1" 200 1628'},
        {"offset_seconds": -41.5, "service": "db", "message": "{ts:iso_micros} 0 [Warning] [MY-010055] [Server] x"},
    ])
    nginx, mysql = demo.query_logs(limit=10)["records"]
    stamp = re.search(r"\[(.+?)\]", nginx["message"]).group(1)
    assert datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z") == parse_time(nginx["timestamp"], argument="t")
    assert mysql["message"].startswith(mysql["timestamp"][:-1])  # 2026-11-29T10:19:55.500 + 000Z


LEVELS = [
    ({"level": "WARNING"}, "disk 91% full", "WARN"),
    ({"level": "NOTICE"}, "server started", "INFO"),
    ({"level": "CRITICAL"}, "pool exhausted", "CRITICAL"),
    ({"level": "PANIC"}, "runtime error", "PANIC"),
    ({"level": "FATAL"}, "cannot bind", "FATAL"),
    ({}, "E{ts:glog}       1 reflector.go:138] failed to list *v1.Pod: connection refused", "ERROR"),
    ({}, "W{ts:glog}       1 warnings.go:70] unknown field", "WARN"),
    ({}, '{"ts":{ts:epoch},"level":"warn","msg":"slow query"}', "WARN"),
    ({}, "{ts:datetime} ERROR 1 --- [main] c.e.App : boom", "ERROR"),
    ({}, "1:M {ts:redis} # Server initialized", "UNKNOWN"),
]


@pytest.mark.parametrize(("level", "message", "served"), LEVELS)
def test_levels_are_served_as_the_loki_backend_serves_them(tmp_path, level, message, served):
    demo = backend(tmp_path, logs=[{"offset_seconds": -5, "service": "a", "message": message, **level}])
    (record,) = demo.query_logs(service="a")["records"]
    assert record["level"] == served
    assert "{ts:" not in record["message"] and record["message"][-12:] == message[-12:]


def test_the_level_filter_and_the_words_match_what_is_served(tmp_path):
    demo = backend(tmp_path, logs=[
        {"offset_seconds": -9, "service": "a", "level": "CRITICAL", "message": "pool exhausted"},
        {"offset_seconds": -8, "service": "a", "message": "E{ts:glog} 1 x.go:1] lost leader"},
        {"offset_seconds": -7, "service": "a", "level": "WARNING", "message": "slow"},
    ])
    assert [r["message"] for r in demo.query_logs(service="a", query="level:critical")["records"]] == ["pool exhausted"]
    assert len(demo.query_logs(service="a", query="level:ERROR")["records"]) == 1
    assert [r["level"] for r in demo.query_logs(service="a", query="level:warning")["records"]] == ["WARN"]
    month_day = (NOW - timedelta(seconds=8)).strftime("%m%d")
    assert demo.query_logs(service="a", query=f"E{month_day}")["total"] == 1  # the rendered text is searched


# --- Kubernetes: Services, endpoints and pod IPs --------------------------------------------------------


def _pod(name, ip, app, ready=True, node="worker-2"):
    return {"name": name, "phase": "Running", "node": node, "podIP": ip, "labels": {"app": app},
            "containers": [{"name": app, "image": f"{app}:1", "ready": ready, "restartCount": 0,
                            "state": {"state": "running"}, "lastState": None}]}


WORLD = {
    "namespace": "shop",
    "pods": [_pod("orders-mysql-0", "10.244.2.31", "orders-mysql"), _pod("order-api-5d-x1", "10.244.1.7", "order-api"),
             _pod("order-api-5d-x2", "10.244.3.9", "order-api", ready=False, node="worker-3")],
    "services": [
        {"name": "orders-mysql", "clusterIP": "10.96.112.40", "selector": {"app": "orders-mysql"},
         "ports": [{"name": "mysql", "port": 3306}]},
        {"name": "order-api", "clusterIP": "10.96.7.1", "selector": {"app": "order-api"}, "labels": {"tier": "web"},
         "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        {"name": "legacy-billing", "clusterIP": "10.96.9.9", "ports": [{"port": 443}],
         "endpoints": [{"ip": "192.168.40.12", "ready": True}]},
    ],
    "events": [{"type": "Warning", "reason": "Unhealthy", "object": "pod/orders-mysql-0", "count": 3,
                "message": "Readiness probe failed", "first_offset_seconds": -300, "last_offset_seconds": -60}],
}


def test_services_are_served_in_the_kubernetes_backends_shape_with_endpoints_from_their_pods(tmp_path):
    demo = backend(tmp_path, kubernetes=WORLD)
    result = demo.query_kubernetes(kind="service")
    by_name = {s["name"]: s for s in result["services"]}
    assert by_name["orders-mysql"] == {
        "name": "orders-mysql", "namespace": "shop", "type": "ClusterIP", "clusterIP": "10.96.112.40",
        "ports": [{"name": "mysql", "port": 3306, "targetPort": 3306, "protocol": "TCP"}],
        "selector": {"app": "orders-mysql"},
        "endpoints": [{"ip": "10.244.2.31", "pod": "orders-mysql-0", "node": "worker-2", "ready": True}],
    }
    assert [(e["ip"], e["ready"]) for e in by_name["order-api"]["endpoints"]] == [("10.244.1.7", True), ("10.244.3.9", False)]
    assert by_name["legacy-billing"]["endpoints"] == [{"ip": "192.168.40.12", "pod": None, "node": None, "ready": True}]
    assert result["pods"] == [] and result["events"] == []
    assert [s["name"] for s in demo.query_kubernetes(kind="service", selector="tier=web")["services"]] == ["order-api"]


def test_a_named_service_brings_its_pods_with_pod_ips_and_their_events(tmp_path):
    demo = backend(tmp_path, kubernetes=WORLD)
    result = demo.query_kubernetes(kind="service", name="orders-mysql", namespace="shop")
    (pod,) = result["pods"]
    assert list(pod)[:6] == ["name", "namespace", "phase", "node", "podIP", "hostIP"]
    assert pod["podIP"] == "10.244.2.31" and pod["hostIP"] is None and pod["namespace"] == "shop"
    assert [e["reason"] for e in result["events"]] == ["Unhealthy"]
    with pytest.raises(BackendError, match="^name: service 'nope' not found"):
        demo.query_kubernetes(kind="service", name="nope")


def test_an_address_or_a_cluster_dns_name_in_a_log_line_resolves_to_its_service(tmp_path):
    demo = backend(tmp_path, kubernetes=WORLD, logs=[
        {"offset_seconds": -3, "service": "orders-mysql", "level": "WARNING",
         "message": "{ts:iso_micros} 812 [Note] Aborted connection 9 to db: 'orders' user: 'app' host: '10.244.3.9'"},
        {"offset_seconds": -2, "service": "order-api", "level": "ERROR",
         "message": "Communications link failure: jdbc:mysql://orders-mysql.shop.svc.cluster.local:3306/orders"},
    ])
    services = demo.query_kubernetes(kind="service")["services"]
    lines = [r["message"] for r in demo.query_logs(limit=10)["records"]]
    ip = re.search(r"host: '([\d.]+)'", lines[0]).group(1)
    assert [s["name"] for s in services if any(e["ip"] == ip for e in s["endpoints"])] == ["order-api"]
    name, namespace = re.search(r"//([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local", lines[1]).groups()
    (service,) = demo.query_kubernetes(kind="service", name=name, namespace=namespace)["services"]
    assert service["clusterIP"] == "10.96.112.40"


def test_the_tool_lists_services_without_a_name(tmp_path):
    class Recorder:
        def record(self, **kwargs):
            return "inv-00000001"

    demo = backend(tmp_path, kubernetes=WORLD)
    box = ToolBox(backends=Backends(logs=demo, metrics=demo, alerts=demo, knowledge=None, kubernetes=demo),
                  recorder=Recorder(), max_calls=3)
    outcome = box.call("query_kubernetes", {"kind": "service"})
    assert outcome.status == SUCCESS, outcome.error
    assert {s["name"] for s in outcome.result["services"]} == {"orders-mysql", "order-api", "legacy-billing"}
