"""DemoBackend serves the shipped scenarios as logs, metrics and alerts in the ARCHITECTURE.md shapes."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from diagnosis.demo import load_ground_truth, scenario_dir, shipped_scenarios
from diagnosis.tools.backends.base import (
    AlertsBackend,
    BackendError,
    LogsBackend,
    MetricsBackend,
    TelemetryBackend,
    parse_time,
)
from diagnosis.tools.backends.demo import DemoBackend, parse_log_query, parse_selector

NOW = datetime(2026, 11, 29, 10, 20, 37, tzinfo=timezone.utc)
SCENARIO_DIRS = shipped_scenarios()
IDS = [d.name for d in SCENARIO_DIRS]


def iso(value: str) -> datetime:
    return parse_time(value, argument="t")


@pytest.fixture(scope="module")
def world() -> DemoBackend:
    return DemoBackend(SCENARIO_DIRS, now=NOW)


@pytest.fixture(scope="module")
def payment() -> DemoBackend:
    return DemoBackend([scenario_dir("payment-db-pool-exhaustion")], now=NOW)


# --- loading and time shift ---------------------------------------------------------------------


def test_it_implements_all_three_backend_protocols(world):
    for protocol in (LogsBackend, MetricsBackend, AlertsBackend, TelemetryBackend):
        assert isinstance(world, protocol)


def test_the_default_world_loads_every_shipped_scenario():
    backend = DemoBackend(now=NOW)
    assert [s.name for s in backend.scenarios] == IDS


def test_shipped_loads_only_the_named_scenarios_and_rejects_unknown_names():
    backend = DemoBackend.shipped(["catalog-healthy"], now=NOW)
    assert [s.name for s in backend.scenarios] == ["catalog-healthy"]
    with pytest.raises(BackendError) as info:
        DemoBackend.shipped(["nope"], now=NOW)
    assert info.value.argument == "names"


def test_loading_the_same_scenario_twice_is_rejected_as_a_clash():
    path = scenario_dir("catalog-healthy")
    with pytest.raises(BackendError, match="defined by both") as info:
        DemoBackend([path, path], now=NOW)
    assert info.value.argument == "scenario_dirs"


@pytest.mark.parametrize("path", SCENARIO_DIRS, ids=IDS)
def test_time_shift_puts_the_newest_log_record_and_sample_within_a_minute_of_now(path):
    backend = DemoBackend([path], now=NOW)
    logs = backend.query_logs(limit=1)
    newest = iso(logs["records"][-1]["timestamp"])
    assert NOW - timedelta(seconds=60) <= newest <= NOW
    services = backend.services()
    metrics = backend.query_metrics(query='{service=~"' + "|".join(services) + '"}')
    last_sample = max(s["values"][-1][0] for s in metrics["series"])
    assert 0 <= NOW.timestamp() - last_sample < 60


def test_without_a_fixed_now_the_world_follows_the_wall_clock():
    backend = DemoBackend([scenario_dir("catalog-healthy")])
    assert backend.follows_clock is True
    before = datetime.now(timezone.utc).replace(microsecond=0)
    newest = iso(backend.query_logs(limit=1)["records"][-1]["timestamp"])
    after = datetime.now(timezone.utc)
    assert before - timedelta(seconds=60) <= newest <= after


def test_a_fixed_now_freezes_the_world(payment):
    assert payment.follows_clock is False
    assert payment.query_logs() == payment.query_logs()


def test_a_naive_now_is_read_as_utc():
    backend = DemoBackend([scenario_dir("catalog-healthy")], now=NOW.replace(tzinfo=None))
    assert backend.now == NOW


# --- logs ---------------------------------------------------------------------------------------


def test_logs_have_the_architecture_shape_with_iso_utc_timestamps_oldest_first(payment):
    result = payment.query_logs(service="payment-service")
    assert {"backend", "service", "query", "start", "end", "total", "records"} <= set(result)
    assert result["backend"] == "demo"
    assert result["start"] == "2026-11-29T09:20:37Z" and result["end"] == "2026-11-29T10:20:37Z"
    stamps = [r["timestamp"] for r in result["records"]]
    assert stamps == sorted(stamps)
    for record in result["records"]:
        assert set(record) == {"timestamp", "service", "level", "message"}
        assert record["timestamp"].endswith("Z") and len(record["timestamp"]) == 20


def test_logs_filter_by_service(world):
    result = world.query_logs(service="profile-db", limit=1000)
    assert result["total"] > 0
    assert {r["service"] for r in result["records"]} == {"profile-db"}


def test_logs_service_filter_is_case_insensitive(world):
    assert world.query_logs(service="Profile-DB")["total"] == world.query_logs(service="profile-db")["total"]


def test_an_unknown_service_gives_an_empty_result_with_a_note(world):
    result = world.query_logs(service="no-such-service")
    assert result["total"] == 0 and result["records"] == []
    assert "payment-service" in result["note"]


def test_logs_query_matches_substrings_case_insensitively(payment):
    result = payment.query_logs(query="connection is NOT available", limit=100)
    assert result["total"] >= 5
    assert all("connection is not available" in r["message"].lower() for r in result["records"])


def test_logs_query_words_must_all_match(payment):
    both = payment.query_logs(query="HikariPool leak", limit=100)
    assert both["total"] == 2
    assert all("HikariPool" in r["message"] and "leak" in r["message"] for r in both["records"])


def test_logs_query_or_separates_alternatives(payment):
    either = payment.query_logs(query="RefundReconciler OR idle in transaction", limit=100)
    messages = [r["message"] for r in either["records"]]
    assert any("RefundReconciler started" in m for m in messages)
    assert any("idle in transaction" in m for m in messages)


def test_logs_query_quoted_phrases_match_as_one_term(payment):
    assert payment.query_logs(query='"timed out after 30000ms"')["total"] >= 5
    assert payment.query_logs(query='"after timed"')["total"] == 0


def test_logs_level_filter_keeps_only_that_level(payment):
    errors = payment.query_logs(service="payment-service", query="level:ERROR", limit=1000)
    assert errors["total"] > 0 and {r["level"] for r in errors["records"]} == {"ERROR"}
    warn = payment.query_logs(query="level:warning", limit=1000)
    assert {r["level"] for r in warn["records"]} == {"WARN"}
    both = payment.query_logs(query="level:WARN,ERROR pool", limit=1000)
    assert {r["level"] for r in both["records"]} == {"WARN", "ERROR"}


def test_logs_query_matches_chinese_text():
    backend = DemoBackend([scenario_dir("settlement-replication-lag-zh")], now=NOW)
    result = backend.query_logs(query="主从同步延迟 已达", limit=100)
    assert result["total"] == 6
    assert all(r["service"] == "settlement-db" for r in result["records"])


def test_logs_filter_by_time_window(payment):
    start, end = NOW - timedelta(minutes=20), NOW - timedelta(minutes=10)
    result = payment.query_logs(start=start, end=end, limit=1000)
    assert result["total"] > 0
    assert all(start <= iso(r["timestamp"]) <= end for r in result["records"])
    assert result["start"] == "2026-11-29T10:00:37Z" and result["end"] == "2026-11-29T10:10:37Z"


def test_logs_accept_iso_strings_for_the_window(payment):
    by_string = payment.query_logs(start="2026-11-29T10:00:37Z", end="2026-11-29T10:10:37+00:00", limit=1000)
    by_datetime = payment.query_logs(start=NOW - timedelta(minutes=20), end=NOW - timedelta(minutes=10), limit=1000)
    assert by_string["records"] == by_datetime["records"]


def test_start_alone_runs_until_now_and_end_alone_covers_the_hour_before(payment):
    recent = payment.query_logs(start=NOW - timedelta(minutes=5), limit=1000)
    assert recent["end"] == "2026-11-29T10:20:37Z"
    earlier = payment.query_logs(end=NOW - timedelta(minutes=30), limit=1000)
    assert earlier["start"] == "2026-11-29T08:50:37Z"


def test_logs_limit_keeps_the_newest_records_and_reports_the_total(payment):
    everything = payment.query_logs(limit=1000)
    limited = payment.query_logs(limit=5)
    assert limited["total"] == everything["total"] > 5
    assert limited["truncated"] is True and everything["truncated"] is False
    assert limited["records"] == everything["records"][-5:]


def test_logs_default_limit_is_fifty(world):
    assert len(world.query_logs()["records"]) == 50


# --- metrics ------------------------------------------------------------------------------------


def test_metrics_have_the_architecture_shape_with_prometheus_style_values(payment):
    result = payment.query_metrics(metric="db_pool_active_connections", service="payment-service")
    assert {"backend", "query", "start", "end", "step", "series"} <= set(result)
    assert result["query"].startswith('db_pool_active_connections{service="payment-service"} or '
                                      'db_pool_active_connections{pod=~"payment-service-')
    assert result["step"] == 60
    (series,) = result["series"]
    assert set(series) == {"labels", "values", "stats", "description"}
    assert series["labels"] == {"__name__": "db_pool_active_connections", "service": "payment-service",
                                "pool": "HikariPool-1"}
    assert len(series["values"]) == 60
    for t, v in series["values"]:
        assert isinstance(t, int) and isinstance(v, str)
    assert {"min", "max", "mean", "last", "max_at", "baseline"} <= set(series["stats"])


def test_metrics_by_name_return_that_metric_for_every_service(world):
    result = world.query_metrics(query="http_error_ratio")
    services = {s["labels"]["service"] for s in result["series"]}
    assert {"payment-gateway", "checkout-service", "cart-service", "catalog-service"} <= services
    assert {s["labels"]["__name__"] for s in result["series"]} == {"http_error_ratio"}


def test_metrics_by_selector(world):
    result = world.query_metrics(query='downstream_latency_p99_seconds{service="user-service", target="profile-db"}')
    assert [s["labels"]["target"] for s in result["series"]] == ["profile-db"]
    negated = world.query_metrics(query="downstream_latency_p99_seconds{target!='profile-db'}")
    assert [s["labels"]["target"] for s in negated["series"]] == ["recommendation-service"]
    regex = world.query_metrics(query='http_error_ratio{service=~"(cart|checkout)-service"}')
    assert {s["labels"]["service"] for s in regex["series"]} == {"cart-service", "checkout-service"}


def test_metrics_by_service_alone_return_every_series_of_the_service(world):
    result = world.query_metrics(service="profile-db")
    assert {s["labels"]["__name__"] for s in result["series"]} == {
        "db_query_latency_p99_seconds", "db_rows_examined_per_second", "db_cpu_utilisation"}
    assert result["query"].startswith('{service="profile-db"} or {pod=~"profile-db-')


def test_an_unknown_metric_is_an_empty_result_not_an_error(world):
    result = world.query_metrics(metric="no_such_metric", service="payment-service")
    assert result["series"] == []


def test_a_larger_step_keeps_every_kth_sample_counted_back_from_the_newest(payment):
    full = payment.query_metrics(metric="db_pool_active_connections")["series"][0]["values"]
    coarse = payment.query_metrics(metric="db_pool_active_connections", step="5m")
    assert coarse["step"] == 300
    values = coarse["series"][0]["values"]
    assert len(values) == 12 and values[-1] == full[-1] and values == full[4::5]


def test_metrics_are_evaluated_at_the_query_steps_as_prometheus_query_range_does(payment):
    # start, start+step, ... <= end; each point holds the newest sample at or before it (5-minute lookback).
    result = payment.query_metrics(metric="db_pool_active_connections", start=NOW - timedelta(minutes=10))
    values = result["series"][0]["values"]
    start = int((NOW - timedelta(minutes=10)).timestamp())
    assert [t for t, _ in values] == list(range(start, int(NOW.timestamp()) + 1, 60))


def test_stats_and_description_are_deterministic(payment):
    series = payment.query_metrics(metric="db_pool_active_connections")["series"][0]
    assert series["description"] == (
        'db_pool_active_connections{pool="HikariPool-1",service="payment-service"} '
        "max 50 at 2026-11-29T10:05:37Z, baseline 12, last 50"
    )
    assert series["stats"]["max"] == 50 and series["stats"]["last"] == 50 and series["stats"]["baseline"] == 12
    again = DemoBackend([scenario_dir("payment-db-pool-exhaustion")], now=NOW)
    assert again.query_metrics(metric="db_pool_active_connections") == payment.query_metrics(
        metric="db_pool_active_connections")


def test_the_description_quotes_fractions_compactly(payment):
    series = payment.query_metrics(query='http_error_ratio{service="payment-gateway"}')["series"][0]
    assert series["description"].startswith('http_error_ratio{service="payment-gateway"} max 0.00')
    assert ", baseline 0.003" in series["description"]
    (p99,) = payment.query_metrics(query="histogram_quantile(0.99, sum by (le) (rate("
                                         "http_server_requests_seconds_bucket[5m])))")["series"]
    assert re.fullmatch(r"\{\} max 30 at \S+, baseline 0\.24\d{4}, last \d+\.\d{1,4}", p99["description"])


@pytest.mark.parametrize("path", [d for d in SCENARIO_DIRS if load_ground_truth(d)["anomalous_metrics"]],
                         ids=[d.name for d in SCENARIO_DIRS if load_ground_truth(d)["anomalous_metrics"]])
def test_the_anomaly_extreme_falls_in_the_incident_window(path):
    backend = DemoBackend([path], now=NOW)
    truth = load_ground_truth(path)
    window = truth["incident_window"]
    start = NOW + timedelta(seconds=window["start_offset_seconds"])
    end = NOW + timedelta(seconds=window["end_offset_seconds"])
    for spec in truth["anomalous_metrics"]:
        query = {"query": spec["query"]} if "query" in spec else {"metric": spec["metric"], "service": spec["service"]}
        (series,) = backend.query_metrics(**query)["series"][:1]
        at = series["stats"]["min_at"] if spec["direction"] == "down" else series["stats"]["max_at"]
        assert start <= iso(at) <= end, (spec, at)


# --- alerts -------------------------------------------------------------------------------------


def test_alerts_have_the_prometheus_shape_with_iso_active_at(world):
    alerts = world.query_alerts()
    assert alerts["backend"] == "demo"
    assert len(alerts["alerts"]) >= 10
    for alert in alerts["alerts"]:
        assert set(alert) == {"labels", "annotations", "state", "activeAt", "value"}
        assert {"alertname", "service", "severity"} <= set(alert["labels"])
        assert {"summary", "description"} <= set(alert["annotations"])
        assert alert["state"] in ("pending", "firing")
        assert isinstance(alert["value"], str)
        assert iso(alert["activeAt"]) <= NOW


def test_the_healthy_scenario_alone_has_no_alerts():
    backend = DemoBackend([scenario_dir("catalog-healthy")], now=NOW)
    assert backend.query_alerts()["alerts"] == []


def test_two_alerts_share_one_root_cause_in_the_redis_scenario():
    backend = DemoBackend([scenario_dir("cart-checkout-shared-redis")], now=NOW)
    firing = {a["labels"]["service"] for a in backend.query_alerts()["alerts"] if a["state"] == "firing"}
    assert firing == {"checkout-service", "cart-service"}


def test_alerts_are_copies_that_callers_cannot_corrupt(payment):
    payment.query_alerts()["alerts"][0]["labels"]["service"] = "tampered"
    assert payment.query_alerts()["alerts"][0]["labels"]["service"] != "tampered"


# --- invalid arguments --------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, argument", [
    ({"limit": 0}, "limit"),
    ({"limit": 1001}, "limit"),
    ({"limit": "many"}, "limit"),
    ({"limit": True}, "limit"),
    ({"start": "yesterday"}, "start"),
    ({"end": "soon"}, "end"),
    ({"start": NOW, "end": NOW - timedelta(minutes=1)}, "end"),
    ({"service": 42}, "service"),
    ({"query": "level:"}, "query"),
])
def test_invalid_log_arguments_raise_backend_error_naming_the_argument(payment, kwargs, argument):
    with pytest.raises(BackendError) as info:
        payment.query_logs(**kwargs)
    assert info.value.argument == argument
    assert str(info.value).startswith(f"{argument}:")


@pytest.mark.parametrize("kwargs, argument", [
    ({}, "query"),
    ({"query": "topk(3, http_error_ratio)"}, "query"),
    ({"query": "http_error_ratio / 2"}, "query"),
    ({"query": "http_error_ratio or on (service) up"}, "query"),
    ({"query": "http_error_ratio and up"}, "query"),
    ({"query": "http_error_ratio[5m]"}, "query"),
    ({"query": "rate(http_error_ratio[5m])", "metric": "http_error_ratio"}, "metric"),
    ({"query": 'http_error_ratio{service="x"'}, "query"),
    ({"query": "http_error_ratio{service=x}"}, "query"),
    ({"query": '{service=~"("}'}, "query"),
    ({"query": "{}"}, "query"),
    ({"metric": "bad name!"}, "metric"),
    ({"metric": "http_error_ratio", "step": "-5"}, "step"),
    ({"metric": "http_error_ratio", "step": "fast"}, "step"),
    ({"metric": "http_error_ratio", "start": NOW, "end": NOW - timedelta(seconds=1)}, "end"),
    ({"metric": "http_error_ratio", "start": "not a time"}, "start"),
])
def test_invalid_metric_arguments_raise_backend_error_naming_the_argument(payment, kwargs, argument):
    with pytest.raises(BackendError) as info:
        payment.query_metrics(**kwargs)
    assert info.value.argument == argument
    assert str(info.value).startswith(f"{argument}:")


# --- parsers ------------------------------------------------------------------------------------


def test_the_log_query_parser_splits_levels_phrases_and_alternatives():
    parsed = parse_log_query('level:ERROR "timed out" pool | refused')
    assert parsed.levels == frozenset({"ERROR"})
    assert parsed.groups == (("timed out", "pool"), ("refused",))
    assert parse_log_query(None).matches("svc", "DEBUG", "anything")


def test_the_selector_parser_reads_names_and_matchers():
    assert parse_selector('up{job="a", instance!~"x.*"}') == [
        ("__name__", "=", "up"), ("job", "=", "a"), ("instance", "!~", "x.*")]
    assert parse_selector("up") == [("__name__", "=", "up")]
    assert parse_selector('{service="a\\"b"}') == [("service", "=", 'a"b')]
