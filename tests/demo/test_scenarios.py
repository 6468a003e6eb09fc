"""The shipped demo scenarios are complete, valid and consistent with their ground truth."""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime, timedelta, timezone
from functools import lru_cache

import pytest

from diagnosis.demo import (
    SCENARIOS_DIR,
    ScenarioError,
    load_ground_truth,
    load_scenario,
    runbook_files,
    scenario_dir,
    shipped_scenarios,
)
from diagnosis.demo.loader import REQUIRED_FILES
from diagnosis.tools.backends.base import SERVED_LEVELS, format_timestamp, parse_time
from diagnosis.tools.backends.demo import DemoBackend

SCENARIO_DIRS = shipped_scenarios()
IDS = [d.name for d in SCENARIO_DIRS]
INCIDENT_DIRS = [d for d in SCENARIO_DIRS if not load_ground_truth(d)["expected_nothing_wrong"]]
CJK = re.compile(r"[\u4e00-\u9fff]")
EXPECTED = {
    "payment-db-pool-exhaustion", "order-memory-leak-oom", "user-slow-downstream", "inventory-disk-full",
    "cart-checkout-shared-redis", "shipping-misleading-errors", "search-runbook-mismatch",
    "settlement-replication-lag-zh", "catalog-healthy", "report-noisy-neighbour-cpu",
    # Kubernetes-shaped (with kubernetes.json, read by query_kubernetes)
    "ledger-api-missing-secret-k8s", "thumbnailer-oomkilled-k8s", "billing-export-job-backoff-k8s",
    # real log formats: nginx + Spring Boot + MySQL (three hops), Flask/gunicorn (healthy, noisy), a flag flip
    "storefront-orders-mysql-connections", "avatar-healthy-noisy", "invoice-renderer-slow-flag",
}


NOW = datetime(2026, 11, 29, 10, 20, 37, tzinfo=timezone.utc)
WHOLE = {"start": NOW - timedelta(hours=3), "end": NOW}


@lru_cache(maxsize=None)
def _served(path) -> dict:
    """What the tools serve for one scenario: every log record, series, alert and Kubernetes object."""
    backend = DemoBackend([path], now=NOW)
    scenario = backend.scenarios[0]
    logs = backend.query_logs(limit=1000, **WHOLE)["records"]
    series = backend.query_metrics(query='{__name__=~".+"}', **WHOLE)["series"]
    world = scenario.kubernetes
    kubernetes = []
    if world:
        kubernetes.append(backend.query_kubernetes(kind="service"))
        for pod in world["pods"]:
            kubernetes.append(backend.query_kubernetes(kind="pod", name=pod["name"]))
        for event in world["events"]:
            kind, _, name = event["object"].rpartition("/")
            kubernetes.append(backend.query_kubernetes(kind=kind or "pod", name=name))
    return {"logs": logs, "series": series, "alerts": backend.query_alerts()["alerts"], "kubernetes": kubernetes}


def _evidence_corpus(scenario) -> list[str]:
    served = _served(scenario.path)
    texts = [r["message"] for r in served["logs"]]
    for alert in served["alerts"]:
        texts += list(alert["labels"].values()) + list(alert["annotations"].values())
    for series in served["series"]:
        texts += list(series["labels"].values())
    for result in served["kubernetes"]:
        texts += [e["message"] for e in result["events"]]
        for pod in result["pods"]:
            for c in pod.get("containers", []):
                for state in (c.get("state"), c.get("lastState")):
                    texts += [str(v) for v in (state or {}).values()]
    return texts


def _data_services(scenario) -> set[str]:
    names = {r["service"] for r in scenario.logs} | {s["labels"]["service"] for s in scenario.series
                                                      if "service" in s["labels"]}
    return names | {a["labels"]["service"] for a in scenario.alerts}


def test_the_shipped_scenarios_are_the_expected_ones():
    assert set(IDS) == EXPECTED


@pytest.mark.parametrize("path", SCENARIO_DIRS, ids=IDS)
def test_every_scenario_folder_has_all_files_as_valid_json(path):
    for name in REQUIRED_FILES:
        assert (path / name).is_file(), name
    for name in ("scenario.json", "metrics.json", "alerts.json", "ground_truth.json"):
        json.loads((path / name).read_text(encoding="utf-8"))
    for line in (path / "logs.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line)
    scenario = load_scenario(path)
    assert scenario.name == path.name
    assert re.search(r"[A-Za-z]", scenario.default_question["en"])
    assert CJK.search(scenario.default_question["zh"])


@pytest.mark.parametrize("path", SCENARIO_DIRS, ids=IDS)
def test_every_scenario_has_realistic_amounts_of_data(path):
    scenario = load_scenario(path)
    assert 40 <= len(scenario.logs) <= 150
    assert {r["level"] for r in _served(path)["logs"]} >= {"INFO"}
    assert {r["level"] for r in _served(path)["logs"]} <= set(SERVED_LEVELS)
    assert max(r["offset_seconds"] for r in scenario.logs) >= -60  # the story reaches "now"
    for series in scenario.series:
        assert series["step_seconds"] == 60
        assert len(series["values"]) == 60  # one hour, ending now
    assert 1 <= len(scenario.runbooks) <= 2


@pytest.mark.parametrize("path", SCENARIO_DIRS, ids=IDS)
def test_every_listed_service_has_data_and_every_data_service_is_listed(path):
    scenario = load_scenario(path)
    assert set(scenario.services) == _data_services(scenario)


@pytest.mark.parametrize("path", SCENARIO_DIRS, ids=IDS)
def test_key_evidence_is_really_served_by_the_logs_metrics_alerts_or_kubernetes_tools(path):
    scenario = load_scenario(path)
    corpus = _evidence_corpus(scenario)
    for evidence in scenario.ground_truth["key_evidence"]:
        assert any(evidence in text for text in corpus), evidence


@pytest.mark.parametrize("path", SCENARIO_DIRS, ids=IDS)
def test_the_ground_truth_services_exist_in_the_data(path):
    scenario = load_scenario(path)
    truth = scenario.ground_truth
    services = _data_services(scenario)
    if truth["expected_nothing_wrong"]:
        assert truth["root_cause_service"] is None
    else:
        assert truth["root_cause_service"] in services
    assert set(truth.get("symptom_services", [])) <= services


@pytest.mark.parametrize("path", INCIDENT_DIRS, ids=[d.name for d in INCIDENT_DIRS])
def test_incident_scenarios_have_a_firing_alert_and_error_or_warning_lines(path):
    scenario = load_scenario(path)
    assert any(a["state"] == "firing" for a in scenario.alerts)
    assert any(r["level"] in ("WARN", "ERROR", "CRITICAL", "FATAL", "PANIC") for r in _served(path)["logs"])


@pytest.mark.parametrize("path", SCENARIO_DIRS, ids=IDS)
def test_anomalous_metrics_move_clearly_away_from_their_baseline(path):
    """Each hint names a series (metric + service) or a PromQL ``query`` (counters and histograms move
    in their rate or quantile); what the tool serves for it leaves its baseline."""
    scenario = load_scenario(path)
    backend = DemoBackend([path], now=NOW)
    for spec in scenario.ground_truth.get("anomalous_metrics", []):
        if "query" in spec:
            served = backend.query_metrics(query=spec["query"])["series"]
        else:
            served = backend.query_metrics(metric=spec["metric"], service=spec["service"])["series"]
        assert served, spec
        assert any(_moves([float(v) for _, v in s["values"]], spec["direction"]) for s in served), spec


def _moves(values: list[float], direction: str) -> bool:
    baseline = statistics.median(values[: len(values) // 3])
    if direction == "up":
        return max(values) >= 1.25 * baseline + 0.01
    if direction == "down":
        return min(values) <= 0.5 * baseline
    return values[-1] != baseline  # "change": a step such as a deployment revision


@pytest.mark.parametrize("path", SCENARIO_DIRS, ids=IDS)
def test_embedded_log_timestamps_agree_with_the_served_record_times(path):
    placeholders = [r for r in load_scenario(path).logs if "{ts:" in r["message"]]
    served = {(r["timestamp"], r["service"]) for r in _served(path)["logs"]}
    for record in placeholders:
        at = NOW + timedelta(seconds=record["offset_seconds"])
        assert (format_timestamp(at), record["service"]) in served
    for record in _served(path)["logs"]:
        assert "{ts:" not in record["message"]
        for stamp in re.findall(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}", record["message"]):
            # a full date-time in a line is the record's own time (give or take the second it was cut at)
            assert abs(parse_time(stamp.replace(" ", "T"), argument="t") - parse_time(record["timestamp"], argument="t")) < \
                timedelta(seconds=1), record


def test_the_addresses_and_service_names_in_the_storefront_lines_resolve_through_the_kubernetes_tool():
    """The hop from orders-mysql back to its client, and from order-api on to its database, can be followed
    with query_kubernetes alone: a pod IP in a MySQL line, a service name in a JDBC URL, a cluster DNS name."""
    path = scenario_dir("storefront-orders-mysql-connections")
    served = _served(path)
    (listing,) = [r for r in served["kubernetes"] if r["kind"] == "service"]
    by_ip = {e["ip"]: s["name"] for s in listing["services"] for e in s["endpoints"]}
    by_ip |= {s["clusterIP"]: s["name"] for s in listing["services"]}
    mysql_clients = {ip for r in served["logs"] if r["service"] == "orders-mysql"
                     for ip in re.findall(r"user: 'order_app' host: '([\d.]+)'", r["message"])}
    assert mysql_clients and {by_ip.get(ip) for ip in mysql_clients} == {"order-api"}
    names = {s["name"] for s in listing["services"]}
    jdbc = {m for r in served["logs"] for m in re.findall(r"jdbc:mysql://([a-z0-9-]+):", r["message"])}
    dns = {m for r in served["logs"] for m in re.findall(r"//([a-z0-9-]+)\.shop\.svc\.cluster\.local", r["message"])}
    assert jdbc == {"orders-mysql"} and dns == {"order-api"} and (jdbc | dns) <= names


def test_the_no_anomaly_scenario_has_no_firing_alert_only_info_logs_and_flat_metrics():
    scenario = load_scenario(scenario_dir("catalog-healthy"))
    assert scenario.ground_truth["expected_nothing_wrong"] is True
    assert not [a for a in scenario.alerts if a["state"] == "firing"]
    assert {r["level"] for r in scenario.logs} == {"INFO"}
    for series in scenario.series:
        values = series["values"]
        baseline = statistics.median(values[: len(values) // 3])
        assert max(values) < 1.5 * baseline + 0.001, series["labels"]


def test_the_chinese_scenario_names_its_cause_only_in_chinese():
    scenario = load_scenario(scenario_dir("settlement-replication-lag-zh"))
    english_keywords = [k for k in scenario.ground_truth["cause_keywords"] if not CJK.search(k)]
    chinese_keywords = [k for k in scenario.ground_truth["cause_keywords"] if CJK.search(k)]
    corpus = " ".join(_evidence_corpus(scenario)).lower()
    assert not [k for k in english_keywords if k.lower() in corpus]
    assert any(k in corpus for k in chinese_keywords)


def test_service_names_do_not_clash_across_scenarios():
    owners: dict[str, str] = {}
    for path in SCENARIO_DIRS:
        scenario = load_scenario(path)
        for service in _data_services(scenario):
            assert service not in owners, f"{service} is in {owners.get(service)} and {scenario.name}"
            owners[service] = scenario.name


def test_key_evidence_lines_are_distinctive_to_their_scenario():
    scenarios = [load_scenario(p) for p in SCENARIO_DIRS]
    metric_names = {s["labels"]["__name__"] for o in scenarios for s in o.series}
    for scenario in scenarios:
        for evidence in scenario.ground_truth["key_evidence"]:
            if evidence in metric_names:
                continue  # a metric name is evidence inside its scenario; several scenarios share names
            others = [o.name for o in scenarios if o is not scenario
                      and any(evidence in text for text in _evidence_corpus(o))]
            assert not others, f"{evidence!r} of {scenario.name} also occurs in {others}"


def test_every_runbook_has_a_title_symptoms_causes_diagnostics_and_remediation():
    files = runbook_files()
    assert len(files) >= 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert text.startswith("# "), path
        assert len(re.findall(r"^## ", text, flags=re.M)) >= 3, path


def test_some_runbooks_are_written_in_chinese():
    chinese = [p for p in runbook_files() if CJK.search(p.read_text(encoding="utf-8").splitlines()[0])]
    assert len(chinese) >= 2


def test_loading_a_folder_with_a_missing_file_names_the_file(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "scenario.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ScenarioError, match="logs.jsonl"):
        load_scenario(broken)


def test_an_unknown_scenario_name_lists_the_shipped_ones():
    with pytest.raises(ScenarioError, match="payment-db-pool-exhaustion"):
        scenario_dir("no-such-scenario")


def test_scenarios_live_next_to_the_loader():
    assert all(p.parent == SCENARIOS_DIR for p in SCENARIO_DIRS)
