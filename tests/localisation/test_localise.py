"""Localisation: explained away along the graph, honest outcomes, and the scenarios with full evidence."""

from pathlib import Path

import pytest

from diagnosis.localisation.outcome import localise
from diagnosis.evaluation.localisation_report import full_evidence
from tests.localisation.support import Results, flat, iso, stepped

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "diagnosis/demo/scenarios").iterdir()) + sorted((ROOT / "tests/holdout_scenarios").iterdir())


def _caller_and_database(database_onset: int, caller_onset: int) -> Results:
    results = Results()
    results.metric({"__name__": "http_server_request_duration_seconds", "service": "fobrel"},
                   stepped(0.08, 2.5, caller_onset))
    results.metric({"__name__": "db_client_connections_pending", "service": "fobrel"}, stepped(1, 40, caller_onset))
    results.metric({"__name__": "pg_stat_activity_max_tx_duration", "service": "quastor"}, stepped(0.5, 30, database_onset))
    results.logs("fobrel", [(-3000 + i * 120, "", f"GET /v1/items 200 in {40 + i} ms") for i in range(20)]
                 + [(-(60 - caller_onset) * 60 + 30 + i * 50, "ERROR",
                     f"query failed: timeout acquiring connection to postgres://quastor:5432/items after {i + 30}s")
                    for i in range(8)])
    return results


def test_saturation_on_a_caller_is_explained_by_the_anomalous_dependency_its_errors_name():
    found = localise(_caller_and_database(database_onset=42, caller_onset=44).items, ["fobrel"])
    assert found.outcome == "root_cause" and found.root == "quastor"
    assert found.kind == "dependency.database"
    assert [e.callee for e in found.path] == ["quastor"]
    assert [c.service for c in found.candidates][:2] == ["quastor", "fobrel"]
    assert found.candidates[1].explained_by == "quastor"


def test_the_ranking_leaves_the_localiser_as_plain_data_citing_record_paths_not_text():
    results = _caller_and_database(database_onset=42, caller_onset=44)
    ranking = localise(results.items, ["fobrel"]).ranking(limit=2, refs_per_candidate=3)
    assert [(c["rank"], c["service"], c["explainedBy"]) for c in ranking] == [(1, "quastor", None), (2, "fobrel", "quastor")]
    assert ranking[0]["explains"] == ["fobrel"] and ranking[0]["kind"] == "dependency.database"
    ids = {item["invocation_id"] for item in results.items}
    for candidate in ranking:
        assert 1 <= len(candidate["evidence"]) <= 3
        assert {e["invocationId"] for e in candidate["evidence"]} <= ids
        assert all(set(e) == {"invocationId", "tool", "rawPath"} and e["rawPath"].startswith("$")
                   for e in candidate["evidence"])


def test_a_dependency_that_began_later_does_not_explain_the_caller():
    found = localise(_caller_and_database(database_onset=52, caller_onset=40).items, ["fobrel"])
    assert found.root != "quastor"


def test_saturation_with_nothing_anomalous_below_it_is_the_cause():
    results = Results()
    results.metric({"__name__": "hikaricp_connections_pending", "service": "drelmo"}, stepped(0, 25, 40))
    results.logs("drelmo", [(-1100 + i * 60, "ERROR", "HikariPool-1 - Connection is not available, request timed out"
                             f" after {30000 + i}ms") for i in range(15)])
    found = localise(results.items, ["drelmo"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "drelmo", "resource.pool")


def test_a_caller_whose_pool_ran_dry_is_the_root_when_the_database_it_waited_for_shows_nothing():
    results = Results()
    results.metric({"__name__": "db_client_connections_pending_requests", "service": "fobrel"}, stepped(0, 30, 44))
    results.metric({"__name__": "pg_stat_activity_max_tx_duration", "service": "quastor"}, flat(0.4))
    results.logs("quastor", [(-3400 + i * 200, "", f"checkpoint complete: wrote {40 + i} buffers") for i in range(17)])
    results.logs("fobrel", [(-3000 + i * 120, "", f"GET /v1/items 200 in {40 + i} ms") for i in range(20)]
                 + [(-900 + i * 50, "ERROR", f"pool wait on postgres://quastor:5432/items: context deadline exceeded "
                                             f"after {i + 30}s") for i in range(8)])
    found = localise(results.items, ["fobrel"])
    assert found.root == "fobrel" and found.top().explained_by is None
    assert "quastor" not in [c.service for c in found.candidates if c.explains]


def test_a_dependency_that_changed_before_its_caller_broke_is_ranked_next_to_it_with_the_change():
    results = Results()
    results.metric({"__name__": "http_server_errors_ratio", "service": "trelby"}, stepped(0.001, 0.4, 45))
    results.logs("trelby", [(-3000 + i * 150, "", f"GET /v1/carts 200 in {30 + i} ms") for i in range(15)]
                 + [(-800 + i * 45, "ERROR", f"call to http://quorna.shop.svc.cluster.local:8080/v2/prices failed: "
                                             f"unexpected response (attempt {i})") for i in range(15)])
    results.logs("quorna", [(-3400 + i * 200, "", f"served {100 + i} price lookups") for i in range(17)])
    results.kubernetes({"services": [{"name": "quorna", "namespace": "shop", "selector": {"app": "quorna"}}]})
    results.changes([(-1500, "quorna", "rollout", "Deployment quorna: image quorna:4.2.0 -> quorna:4.3.0")])
    found = localise(results.items, ["trelby"])
    assert (found.outcome, found.reason, found.root) == ("undetermined", "dependency_changed", "trelby")
    ranking = found.ranking()
    assert [c["service"] for c in ranking[:2]] == ["trelby", "quorna"]
    assert ranking[1]["explains"] == ["trelby"] and [e["tool"] for e in ranking[1]["evidence"]] == ["query_changes"]


def test_nothing_deviating_is_nothing_wrong():
    results = Results()
    results.metric({"__name__": "http_request_duration_seconds", "service": "pemvak"}, flat(0.1))
    results.logs("pemvak", [(-3500 + i * 200, "WARN", "deprecated config key used; falling back") for i in range(17)])
    assert localise(results.items, ["pemvak"]).outcome == "nothing_wrong"


def test_a_service_with_no_telemetry_is_no_data_never_a_root_elsewhere():
    results = _caller_and_database(database_onset=42, caller_onset=44)
    found = localise(results.items, ["zzyzx-api"])
    assert found.outcome == "no_data" and found.root is None and found.without_data == ["zzyzx-api"]


def test_two_unrelated_roots_at_the_same_time_are_not_separated():
    results = Results()
    for service in ("korvax", "melnit"):
        results.metric({"__name__": "process_resident_memory_bytes", "service": service}, stepped(2e8, 9e8, 44))
    found = localise(results.items, [])
    assert found.outcome == "undetermined" and found.reason == "not_separated"


def test_an_error_naming_a_dependency_nobody_examined_is_undetermined_with_the_next_check():
    results = Results()
    results.metric({"__name__": "http_server_errors_ratio", "service": "trelby"}, stepped(0.001, 0.4, 45))
    results.logs("trelby", [(-800 + i * 45, "ERROR", f"dial tcp sessions-kv.core.svc.cluster.local:6379: i/o timeout"
                                                      f" (attempt {i})") for i in range(15)])
    found = localise(results.items, ["trelby"])
    assert found.outcome == "undetermined" and found.reason == "address_not_resolved"
    assert ("query_logs", {"service": "sessions-kv"}) in [(c.tool, c.arguments) for c in found.next_checks]


def _timeouts_through_a_quiet_hop(examine_the_last: bool, alert_only: bool = False) -> Results:
    """pradik times out calling vostane; vostane shows nothing itself (a line or two), and its own errors name
    quellar: what lies below the timeouts is quellar, whether or not a query examined it."""
    results = Results()
    results.metric({"__name__": "http_server_errors_ratio", "service": "pradik"}, stepped(0.001, 0.4, 45))
    results.logs("pradik", [(-3000 + i * 150, "", f"GET /v1/items 200 in {30 + i} ms") for i in range(12)]
                 + [(-880 + i * 50, "ERROR", f"call to vostane failed: timeout of 5000ms exceeded (GET http://vostane:8000/v1"
                                            f"/quotes) attempt {i}") for i in range(14)])
    results.logs("vostane", [(-3000 + i * 150, "", f"GET /v1/quotes 200 in {20 + i} ms") for i in range(16)]
                 + [(-700, "ERROR", "upstream request failed: connect ECONNREFUSED (POST http://quellar:9000/v2/prices)")])
    if examine_the_last:
        results.logs("quellar", [(-3000 + i * 150, "", f"POST /v2/prices 200 in {12 + i} ms") for i in range(16)])
    if alert_only:
        results.alerts([{"labels": {"alertname": "TargetDown", "service": "quellar", "severity": "warning"},
                         "annotations": {"summary": "quellar: a scrape target is down"}, "state": "firing",
                         "activeAt": iso(-400)}])
    return results


def test_a_caller_timing_out_through_a_quiet_dependency_is_not_the_root_while_what_lies_below_is_unexamined():
    found = localise(_timeouts_through_a_quiet_hop(examine_the_last=False).items, ["pradik"])
    assert (found.outcome, found.reason) == ("undetermined", "address_not_resolved")  # no record knows quellar
    assert ("query_logs", {"service": "quellar"}) in [(c.tool, c.arguments) for c in found.next_checks]
    # An alert names a service without examining it.
    alerted = localise(_timeouts_through_a_quiet_hop(examine_the_last=False, alert_only=True).items, ["pradik"])
    assert (alerted.outcome, alerted.reason) == ("undetermined", "dependency_not_examined")
    # Examined and quiet all the way down: the caller's own timeouts are what the evidence shows.
    examined = localise(_timeouts_through_a_quiet_hop(examine_the_last=True).items, ["pradik"])
    assert examined.reason != "dependency_not_examined"


def _server_refusing_a_caller(caller_changed_at: float | None, change: tuple[str, str] = (
        "secret", "Secret vondrel-karsh-credentials rotated")) -> Results:
    """A server that logs its refusals of a caller's requests, and nothing else; the caller's errors name it."""
    results = Results()
    results.metric({"__name__": "http_requests_total", "service": "vondrel", "code": "500"},
                   [v * 60 for v in stepped(0.1, 40, 44)])
    results.logs("vondrel", [(-3000 + i * 150, "", f"GET /v2/orders 200 in {30 + i} ms") for i in range(15)]
                 + [(-950 + i * 40, "ERROR", f"cannot reach karsh.prod.svc.cluster.local:5432: rejected by server "
                                             f"(attempt {i})") for i in range(12)])
    results.logs("karsh", [(-3400 + i * 200, "", f"checkpoint complete: wrote {40 + i} buffers") for i in range(15)]
                 + [(-955 + i * 40, "FATAL", f'password authentication failed for user "orders_rw" (conn {i})')
                    for i in range(12)])
    results.kubernetes({"services": [{"name": "karsh", "namespace": "prod", "selector": {"app": "karsh"}}]})
    if caller_changed_at is not None:
        results.changes([(caller_changed_at, "vondrel", *change)])
    return results


def test_a_server_refusing_credentials_that_its_caller_rotated_just_before_is_not_named_the_root():
    changed = localise(_server_refusing_a_caller(caller_changed_at=-1200).items, ["vondrel"])
    assert (changed.outcome, changed.root, changed.kind) == ("root_cause", "vondrel", "change.secret")
    # A change of something else on the caller: either may be at fault.
    other = localise(_server_refusing_a_caller(-1200, ("config", "ConfigMap vondrel-config: batch.size changed")).items,
                     ["vondrel"])
    assert (other.root, other.outcome, other.reason) == ("karsh", "undetermined", "caller_changed")
    unchanged = localise(_server_refusing_a_caller(caller_changed_at=None).items, ["vondrel"])
    assert unchanged.root == "karsh" and unchanged.reason != "caller_changed"
    long_before = localise(_server_refusing_a_caller(caller_changed_at=-3500).items, ["vondrel"])
    assert long_before.reason != "caller_changed"


@pytest.mark.parametrize("folder", SCENARIOS, ids=lambda p: p.name)
def test_with_full_evidence_no_scenario_gets_a_confident_wrong_root(folder):
    import json
    truth = json.loads((folder / "ground_truth.json").read_text())
    scenario = json.loads((folder / "scenario.json").read_text())
    found = localise(full_evidence(folder), scenario["services"][:1])
    if truth.get("expected_nothing_wrong"):
        assert found.outcome == "nothing_wrong"
    elif found.outcome == "root_cause":
        assert found.root == truth["root_cause_service"]


def test_with_full_evidence_most_scenarios_are_localised():
    import json
    hits = 0
    for folder in SCENARIOS:
        truth = json.loads((folder / "ground_truth.json").read_text())
        scenario = json.loads((folder / "scenario.json").read_text())
        found = localise(full_evidence(folder), scenario["services"][:1])
        hits += (found.outcome == "nothing_wrong") if truth.get("expected_nothing_wrong") else (
            found.outcome == "root_cause" and found.root == truth["root_cause_service"])
    assert hits >= 17, f"{hits} of {len(SCENARIOS)}"


def _cache_at_its_ceiling(with_ceiling: bool) -> Results:
    """vostrel's Redis, trimble-cache, climbs from a noisy half of its maxmemory to the ceiling at minute 45;
    its caller's writes fail from minute 46 naming it by its address."""
    ceiling = 512 * 1024 * 1024
    noisy = [ceiling * (0.5 + 0.2 * ((i * 7) % 11) / 10) for i in range(45)]
    results = Results()
    results.metric({"__name__": "redis_memory_used_bytes", "service": "trimble-cache"},
                   noisy + [ceiling * (0.999 - 0.001 * (i % 2)) for i in range(15)])
    if with_ceiling:
        results.metric({"__name__": "redis_memory_max_bytes", "service": "trimble-cache"}, [float(ceiling)] * 60)
    results.logs("vostrel", [(-3000 + i * 120, "", f"GET /v1/carts 200 in {40 + i} ms") for i in range(20)]
                 + [(-(60 - 46) * 60 + i * 45, "ERROR", "cache set failed: OOM command not allowed when used memory > "
                                                        "'maxmemory'. [redis://trimble-cache:6379/0]") for i in range(12)])
    return results


def test_a_usage_series_that_reached_its_ceiling_is_a_fault_however_noisy_its_baseline():
    found = localise(_cache_at_its_ceiling(with_ceiling=True).items, ["vostrel"])
    cache = next(c for c in found.candidates if c.service == "trimble-cache")
    assert any(s.source == "metric" and s.detail.get("ceiling") == 512 * 1024 * 1024 for s in cache.faults)
    assert found.candidates[0].service == "trimble-cache"
    # Without the ceiling series the same shift is within the baseline's noise: the cache shows nothing itself.
    found = localise(_cache_at_its_ceiling(with_ceiling=False).items, ["vostrel"])
    assert not any(s.source == "metric" for c in found.candidates if c.service == "trimble-cache" for s in c.faults)


def test_a_cache_whose_memory_reached_its_ceiling_is_named_by_its_role():
    found = localise(_cache_at_its_ceiling(with_ceiling=True).items, ["vostrel"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "trimble-cache", "dependency.cache")
    assert found.top().role == "dependency.cache"


def test_a_config_change_that_names_what_fails_is_the_kind_also_when_the_pod_crash_loops():
    results = Results()
    results.logs("plenvo", [(-3000 + i * 150, "", f"POST /v1/batches 200 in {30 + i} ms") for i in range(15)]
                 + [(-1500 + i * 100, "ERROR", "Failed to bind properties under 'ingest.window' to java.time.Duration")
                    for i in range(12)])
    results.kubernetes({"pods": [{"name": "plenvo-7d9f8c6b5-x2x9q", "labels": {"app": "plenvo"}, "containers": [
        {"name": "plenvo", "restartCount": 7, "state": {"reason": "CrashLoopBackOff"},
         "lastState": {"reason": "Error"}}]}]}, "plenvo")
    results.changes([(-1650, "plenvo", "config", "ConfigMap plenvo-config: ingest.window changed")])
    found = localise(results.items, ["plenvo"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "plenvo", "change.config")


def test_a_crash_loop_on_a_setting_its_loader_cannot_read_is_a_configuration_fault_of_the_service_itself():
    """No change record, a setting named after a cache: the service's own configuration is the cause, not a
    cache the evidence never names."""
    results = Results()
    results.logs("drenvik", [(-3000 + i * 150, "", f"GET /v2/points 200 in {20 + i} ms") for i in range(15)]
                 + [(-1500 + i * 120, "ERROR", "Application run failed: Failed to bind properties under "
                                               "'drenvik.cache.expiry' to java.time.Duration (/srv/app/settings.yaml)")
                    for i in range(10)])
    results.kubernetes({"pods": [{"name": "drenvik-5f6d7c8b9-k2m4p", "labels": {"app": "drenvik"}, "containers": [
        {"name": "drenvik", "restartCount": 9, "state": {"reason": "CrashLoopBackOff"},
         "lastState": {"reason": "Error", "exitCode": 1}}]}]}, "drenvik")
    found = localise(results.items, ["drenvik"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "drenvik", "change.config")


def test_a_datastore_its_callers_reach_by_address_is_named_by_what_it_shows_itself_not_by_what_they_call_it():
    """Callers say "mysql: dial tcp <its IP>:3306": that is what it is. Its own series dropping packets say
    what went wrong with it."""
    results = Results()
    results._add("query_kubernetes", {"kind": "service"}, {"pods": [], "events": [], "services": [
        {"name": "vostrel", "clusterIP": "10.96.8.65", "selector": {"app": "vostrel"},
         "endpoints": [{"ip": "10.244.2.9", "pod": "vostrel-0", "ready": True}]}]})
    results.metric({"__name__": "container_network_receive_packets_dropped_total", "pod": "vostrel-0",
                    "interface": "eth0"}, [i * 3 if i < 40 else 120 + (i - 40) * 9000 for i in range(60)])
    results.logs("quimbra", [(-3000 + i * 150, "", f"GET /v1/ledgers 200 in {30 + i} ms") for i in range(15)]
                 + [(-1150 + i * 60, "ERROR", 'msg="mysql: dial tcp 10.96.8.65:3306: connect: connection refused"')
                    for i in range(15)])
    found = localise(results.items, ["quimbra"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "vostrel", "network.loss")
    assert next(c for c in found.candidates if c.service == "quimbra").explained_by == "vostrel"


def test_a_service_gone_quiet_whose_readiness_probe_is_refused_is_named_by_what_the_probe_was_answered():
    """Its series stop and its caller answers 5xx; no line says why. The kubelet's probe is a call to the service
    itself, and "connect: connection refused" is the service's own answer: that names the kind."""
    results = Results()
    results.metric({"__name__": "http_requests_total", "service": "tembrol", "code": "200"},
                   [1000.0 * i for i in range(40)])
    results.metric({"__name__": "http_requests_total", "service": "ulvane", "code": "503"},
                   [0.0] * 40 + [50.0 * i for i in range(1, 21)])
    results.kubernetes({"pods": [{"name": "tembrol-6f7d9c5b8-r2k4m", "labels": {"app": "tembrol"},
                                  "podIP": "10.244.7.12", "containers": [
        {"name": "tembrol", "ready": False, "restartCount": 0, "state": {"state": "running"}}]}],
        "events": [{"type": "Warning", "reason": "Unhealthy", "object": "pod/tembrol-6f7d9c5b8-r2k4m", "count": 30,
                    "message": "Readiness probe failed: dial tcp 10.244.7.12:8080: connect: connection refused",
                    "firstTimestamp": iso(-1190), "lastTimestamp": iso(-40)}]}, "tembrol")
    results.logs("ulvane", [(-3000 + i * 150, "", f"GET /v1/rates 200 in {30 + i} ms") for i in range(15)]
                 + [(-1150 + i * 60, "ERROR", "GET http://tembrol:8080/v1/rates answered 503") for i in range(15)])
    found = localise(results.items, ["ulvane"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "tembrol", "network.refused")


def test_a_client_address_with_an_ephemeral_port_is_who_called_not_a_dependency():
    """A database's log prefix names the client that sent the failing query; the database is not that
    client's caller."""
    results = Results()
    results.kubernetes({"pods": [{"name": "corvel-6c8d9f7b4-q7w2z", "labels": {"app": "corvel"},
                                  "podIP": "10.244.3.17", "containers": []}]}, "corvel")
    results.logs("ostrad-db", [(-3400 + i * 200, "", "LOG:  checkpoint starting: time") for i in range(10)]
                 + [(-900 + i * 60, "FATAL", f"app@orders 10.244.3.17({40000 + i}) FATAL:  sorry, too many clients "
                                             "already") for i in range(12)])
    results.logs("corvel", [(-3000 + i * 150, "", f"GET /v1/orders 200 in {30 + i} ms") for i in range(15)]
                 + [(-880 + i * 60, "ERROR", "failed to connect: FATAL: sorry, too many clients already "
                                             "(target postgres://app@ostrad-db:5432/orders)") for i in range(12)])
    found = localise(results.items, ["corvel"])
    from diagnosis.localisation.graph import build_graph
    from diagnosis.localisation.records import read_evidence
    graph = build_graph(read_evidence(results.items))
    assert [e.callee for e in graph.dependencies("ostrad-db")] == []
    assert [e.callee for e in graph.dependencies("corvel")] == ["ostrad-db"]
    assert (found.outcome, found.root) == ("root_cause", "ostrad-db")


def test_a_dependency_the_callers_lines_name_explains_them_though_its_metric_shows_it_a_few_steps_later():
    results = Results()
    results.logs("mirvo", [(-3000 + i * 150, "", f"GET /v1/quotes 200 in {30 + i} ms") for i in range(15)]
                 + [(-(60 - 45) * 60 + i * 40, "ERROR", "GET http://tessan:8080/v1/rates answered 429 Too Many Requests")
                    for i in range(15)])
    results.metric({"__name__": "envoy_http_local_rate_limit_rate_limited", "service": "tessan"}, stepped(0, 40, 48))
    found = localise(results.items, ["mirvo"])
    assert (found.outcome, found.root) == ("root_cause", "tessan")
    assert next(c for c in found.candidates if c.service == "mirvo").explained_by == "tessan"


def test_an_external_api_the_cluster_declares_is_named_by_its_role_when_only_its_probe_fails():
    results = Results()
    results.kubernetes({"services": [{"name": "fennix-pay", "namespace": "shop", "type": "ExternalName",
                                      "externalName": "api.fennix.example"}]}, "fennix-pay")
    results.metric({"__name__": "probe_success", "service": "fennix-pay"}, stepped(1, 0, 42, wiggle=0))
    results.metric({"__name__": "http_requests_errors_ratio", "service": "quillo"}, stepped(0.001, 0.3, 44))
    results.logs("quillo", [(-3000 + i * 150, "", f"POST /v1/charges 200 in {30 + i} ms") for i in range(15)]
                 + [(-900 + i * 45, "ERROR", "charge failed: POST http://fennix-pay.shop.svc.cluster.local/v2/charges "
                                             "answered 502") for i in range(15)])
    found = localise(results.items, ["quillo"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "fennix-pay", "dependency.external_api")


def test_an_earlier_anomaly_that_accounts_for_nothing_does_not_answer_for_a_root_that_does():
    results = _caller_and_database(database_onset=42, caller_onset=44)
    # An unrelated service began failing ten minutes earlier; nothing depends on it.
    results.metric({"__name__": "http_requests_errors_total", "service": "wendle"}, stepped(0.1, 30, 32))
    results.logs("wendle", [(-3400 + i * 120, "", f"export batch {i} written") for i in range(12)]
                 + [(-(60 - 32) * 60 + i * 60, "ERROR", "export failed: write /data/out.csv: no space left on device")
                    for i in range(10)])
    found = localise(results.items, ["fobrel"])
    assert (found.outcome, found.reason) == ("undetermined", "not_separated")
    assert [c.service for c in found.candidates[:2]] == ["wendle", "quastor"]
    # Asked about it directly, it is the answer.
    assert localise(results.items, ["wendle"]).outcome == "root_cause"


def test_a_workload_that_is_only_busier_is_no_root_and_ranks_after_the_one_that_is():
    results = _caller_and_database(database_onset=42, caller_onset=44)
    # An unrelated service's CPU use rose ten minutes earlier (a batch run): no ceiling, nothing slower.
    busy = {"__name__": "container_cpu_usage_seconds_total", "service": "wendle"}
    results.metric(busy, [60.0 * i * (0.2 if i < 32 else 0.9) for i in range(60)])
    found = localise(results.items, ["fobrel"])
    assert (found.outcome, found.root) == ("root_cause", "quastor")
    assert [c.service for c in found.candidates][-1] == "wendle"
    alone = Results()
    alone.metric(busy, [60.0 * i * (0.2 if i < 32 else 0.9) for i in range(60)])
    assert localise(alone.items, ["wendle"]).outcome == "nothing_wrong"
    # Throttled, it is short of CPU: a fault.
    alone.metric({"__name__": "container_cpu_cfs_throttled_periods_total", "service": "wendle"},
                 [600.0 * i * (0.01 if i < 32 else 0.9) for i in range(60)])
    assert localise(alone.items, ["wendle"]).outcome != "nothing_wrong"


def test_a_server_refusing_the_credentials_its_one_caller_just_rotated_has_that_caller_as_the_root():
    results = Results()
    results.logs("lunda-db", [(-3400 + i * 200, "", "LOG:  checkpoint starting: time") for i in range(8)]
                 + [(-1200 + i * 60, "FATAL", 'app_rw@orders 10.244.3.17(40000) FATAL:  password authentication '
                                             'failed for user "app_rw"') for i in range(15)])
    results.logs("tavio", [(-3000 + i * 150, "", f"GET /v1/orders 200 in {30 + i} ms") for i in range(12)]
                 + [(-1195 + i * 60, "ERROR", 'query failed: password authentication failed for user "app_rw" '
                                             '(postgres://app_rw@lunda-db:5432/orders)') for i in range(15)])
    results.changes([(-1500, "tavio", "secret", "Secret tavio-lunda-db-credentials rotated")])
    found = localise(results.items, ["tavio"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "tavio", "change.secret")
    assert [c.service for c in found.candidates[:2]] == ["tavio", "lunda-db"]
    assert found.top().explains == ["lunda-db"]
    # Without the rotation the server is where it fails.
    results.items = [i for i in results.items if i["tool_name"] != "query_changes"]
    assert localise(results.items, ["tavio"]).root == "lunda-db"


def _pods_on(node: str, host_ip: str, *services: str) -> dict:
    return {"pods": [{"name": f"{s}-7d9f8c6b5-x2x9q", "labels": {"app": s}, "node": node, "hostIP": host_ip,
                      "podIP": f"10.244.1.{i + 5}", "containers": []} for i, s in enumerate(services)]}


def _pressured_node(results: Results, host_ip: str = "10.20.9.4", at: int = 40) -> Results:
    results.metric({"__name__": "node_memory_MemAvailable_bytes", "instance": f"{host_ip}:9100"}, stepped(8e9, 2e8, at))
    results.metric({"__name__": "node_pressure_memory_waiting_seconds_total", "instance": f"{host_ip}:9100"},
                   [i * 0.2 if i < at else at * 0.2 + (i - at) * 40 for i in range(60)])
    return results


def test_a_workload_that_only_slows_down_on_a_node_under_memory_pressure_is_the_root_of_the_node_pressure_kind():
    results = _pressured_node(Results().kubernetes(_pods_on("pool-a-7xk2p", "10.20.9.4", "pelko"), "pelko"))
    results.metric({"__name__": "http_request_duration_seconds", "service": "pelko"}, stepped(0.05, 1.8, 41))
    found = localise(results.items, ["pelko"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "pelko", "scheduling.node_pressure")
    assert "node_pressure_memory_waiting_seconds_total" in {s.text for s in found.top().evidence()}
    assert all(not c.service.startswith("node:") for c in found.candidates)


def test_a_workload_that_shows_nothing_itself_is_the_root_when_its_callers_slow_down_and_its_node_is_pressured():
    results = _pressured_node(Results().kubernetes(_pods_on("pool-a-7xk2p", "10.20.9.4", "quastor-db"), "quastor-db"))
    results.metric({"__name__": "http_request_duration_seconds", "service": "fobrel-api"}, stepped(0.08, 2.5, 42))
    results.metric({"__name__": "up", "service": "quastor-db"}, flat(1.0, wiggle=0))
    results.logs("fobrel-api", [(-3000 + i * 120, "", f"GET /v1/items 200 in {40 + i} ms") for i in range(20)]
                 + [(-(60 - 42) * 60 + 30 + i * 50, "ERROR", f"slow query to quastor-db:5432 took {i + 30}s")
                    for i in range(8)])
    found = localise(results.items, ["fobrel-api"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "quastor-db", "scheduling.node_pressure")
    assert found.top().explains == ["fobrel-api"]


def test_a_workload_that_takes_the_memory_its_node_runs_short_of_is_not_a_victim_of_the_node():
    results = _pressured_node(Results().kubernetes(_pods_on("pool-a-7xk2p", "10.20.9.4", "pelko"), "pelko"))
    results.metric({"__name__": "container_memory_working_set_bytes", "service": "pelko"}, stepped(4e8, 6e9, 39))
    results.metric({"__name__": "http_request_duration_seconds", "service": "pelko"}, stepped(0.05, 1.8, 41))
    found = localise(results.items, ["pelko"])
    assert found.root == "pelko" and found.kind != "scheduling.node_pressure"


def test_a_pressured_node_with_two_workloads_that_only_slow_down_cannot_tell_which_one_matters():
    results = _pressured_node(Results().kubernetes(_pods_on("pool-a-7xk2p", "10.20.9.4", "pelko", "vastrum"), "pelko"))
    results.metric({"__name__": "http_request_duration_seconds", "service": "pelko"}, stepped(0.05, 1.8, 41))
    results.metric({"__name__": "http_request_duration_seconds", "service": "vastrum"}, stepped(0.05, 1.8, 41))
    found = localise(results.items, [])
    assert (found.outcome, found.reason) == ("undetermined", "node_hosts_several")


def _two_refusals() -> Results:
    """zedra refuses from 11:42, unlinked to anything; shouk from 11:43 (the same 150 s step of
    the ranking) and its caller cheb, which names it, slows down after it."""
    results = Results()
    for service, start_s, step in (("zedra", -1080, 30), ("shouk", -1020, 30)):
        n = 3600 // step
        results.metric({"__name__": "http_requests_errors_total", "service": service},
                       stepped(0.1, 30, n - 1 + start_s // step, n=n), step=step)
        results.logs(service, [(-3000 + i * 120, "", f"GET /v1/items 200 in {40 + i} ms") for i in range(20)]
                     + [(start_s + i * 50, "ERROR", f"upstream connect error: connection refused ({i})") for i in range(8)])
    results.metric({"__name__": "http_request_duration_seconds", "service": "cheb"}, stepped(0.08, 2.5, 45))
    results.logs("cheb", [(-3000 + i * 120, "", f"GET /v1/orders 200 in {40 + i} ms") for i in range(20)]
                 + [(-(60 - 45) * 60 + 30 + i * 50, "ERROR", f"call to http://shouk:8080/v1/items failed after {i + 3}s")
                    for i in range(8)])
    return results


def test_the_same_kind_of_fault_beginning_earlier_on_an_unlinked_service_leaves_the_root_undetermined():
    found = localise(_two_refusals().items, ["cheb"])
    assert [c.service for c in found.candidates[:2]] == ["shouk", "zedra"]
    assert (found.outcome, found.reason) == ("undetermined", "not_separated")


def test_what_a_service_measured_on_itself_names_its_kind_however_many_callers_say_refused():
    results = Results()
    results.metric({"__name__": "container_network_receive_packets_dropped_total", "service": "trimble-cache"},
                   [i * 2.0 if i < 40 else 80 + (i - 40) * 900 for i in range(60)])
    for caller in ("vostrel", "pandor", "quillet", "soberan"):
        results.metric({"__name__": "http_requests_errors_total", "service": caller}, stepped(0.1, 30, 41))
        results.logs(caller, [(-3000 + i * 120, "", f"GET /v1/carts 200 in {40 + i} ms") for i in range(20)]
                     + [(-(60 - 41) * 60 + i * 45, "ERROR", "cache get failed: connection refused "
                                                            "[redis://trimble-cache:6379/0]") for i in range(12)])
    found = localise(results.items, ["vostrel"])
    assert found.root == "trimble-cache"
    top = found.top()
    assert top.kind_votes["network.refused"] > top.kind_votes["network.loss"] and top.kind == "network.loss"


def _callers_of_a_slow_server(line: str) -> Results:
    """pandor-api's errors name its dependency grelt-db (slower from minute 41) with ``line``."""
    results = Results()
    results.metric({"__name__": "http_request_duration_seconds", "service": "grelt-db"}, stepped(0.01, 0.9, 41))
    results.metric({"__name__": "http_requests_errors_total", "service": "pandor-api"}, stepped(0.1, 30, 42))
    results.logs("pandor-api", [(-3000 + i * 120, "", f"GET /v1/carts 200 in {40 + i} ms") for i in range(20)]
                 + [(-(60 - 42) * 60 + i * 45, "ERROR", line.format(i=i)) for i in range(12)])
    return results


def test_a_callers_client_pool_running_dry_is_not_the_kind_of_the_dependency_it_waited_for():
    waited = localise(_callers_of_a_slow_server(
        "Connection pool is full, discarding connection: grelt-db. Connection pool size: {i}").items, ["pandor-api"])
    assert waited.top().service == "grelt-db" and waited.top().kind_votes["resource.pool"] == 0
    refused = localise(_callers_of_a_slow_server(
        'connection to server at "grelt-db" failed: FATAL: sorry, too many clients already ({i})').items, ["pandor-api"])
    assert refused.top().service == "grelt-db" and refused.top().kind_votes["resource.pool"] > 0


def test_a_server_s_own_listener_address_is_no_dependency_left_to_examine():
    """A server logs that its listener on 0.0.0.0 closed: the unspecified address is where it listens,
    no call can reach it, so it leaves nothing unexamined behind the server's own fault."""
    results = Results()
    results.metric({"__name__": "up", "service": "trelby"}, stepped(1, 0, 45))
    results.logs("trelby", [(-3000 + i * 150, "", f"GET /v1/carts 200 in {30 + i} ms") for i in range(15)]
                 + [(-880 + i * 60, "ERROR", "listener on 0.0.0.0:8080 closed unexpectedly, server stopped "
                                             f"accepting connections (worker {i})") for i in range(8)])
    results.logs("pomvar", [(-3000 + i * 150, "", f"GET /v1/checkout 200 in {30 + i} ms") for i in range(15)]
                 + [(-860 + i * 60, "ERROR", f"upstream request failed: connect ECONNREFUSED trelby:8080 (try {i})")
                    for i in range(8)])
    found = localise(results.items, ["pomvar"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "trelby", "network.refused"), found.reason
    assert not found.graph.unresolved


def test_a_name_server_that_answered_no_such_host_is_not_a_dependency_that_failed():
    """Go's resolver names the name server it asked ("lookup X on 10.96.0.10:53: no such host"): that
    server answered, the name is what failed. A name server that did not answer stays unexamined."""
    def lookups(reply: str) -> Results:
        results = Results()
        results.metric({"__name__": "http_server_errors_ratio", "service": "quessa"}, stepped(0.001, 0.5, 45))
        results.logs("quessa", [(-3000 + i * 150, "", f"GET /v1/quotes 200 in {30 + i} ms") for i in range(15)]
                     + [(-880 + i * 60, "ERROR", f"call to brimlo failed: dial tcp: lookup brimlo.shop.svc.cluster.local"
                                                 f" on 10.96.0.10:53: {reply} (try {i})") for i in range(8)])
        return results

    answered = localise(lookups("no such host").items, ["quessa"])
    assert (answered.outcome, answered.root, answered.kind) == ("root_cause", "quessa", "network.dns"), answered.reason
    silent = localise(lookups("read udp 10.244.1.7:41234->10.96.0.10:53: i/o timeout").items, ["quessa"])
    assert silent.outcome == "undetermined" and "10.96.0.10" in [a for a, _ in silent.graph.unresolved["quessa"]]


def test_a_rollout_of_a_new_image_before_new_errors_is_the_cause_the_version_the_errors_name_supports():
    """A rollout changed the image, then the service's requests began to fail with a new error that names
    its new version: the image and the "version" in the errors tell one change, not two candidates."""
    results = Results()
    results.metric({"__name__": "http_requests_total", "service": "quorvel", "code": "500"},
                   [v * 60 for v in stepped(0.05, 9, 45)])
    results.logs("quorvel", [(-3000 + i * 150, "", f"GET /v1/quotes 200 in {30 + i} ms") for i in range(15)]
                 + [(-880 + i * 60, "ERROR", f"unhandled error in request handler (version 2.4) "
                                             f"TypeError: cannot read properties of undefined (req {i})")
                    for i in range(8)])
    results.changes([(-1200, "quorvel", "rollout",
                      "image registry.example.dev/shop/quorvel:2.3.2 -> registry.example.dev/shop/quorvel:2.4.0")])
    found = localise(results.items, ["quorvel"])
    assert (found.outcome, found.root) == ("root_cause", "quorvel"), found.reason
    assert found.kind in ("change.image", "change.deploy")


def _slow_middle_and_an_earlier_fault_elsewhere(fault_onset: int) -> Results:
    """The asked service times out calling one that is only slower and failing; a third service, which no
    line or label links to either, ran out of connections from sample ``fault_onset`` on."""
    results = Results()
    results.metric({"__name__": "http_request_duration_seconds", "service": "velmora"}, stepped(0.1, 2.4, 46))
    results.logs("velmora", [(-3000 + i * 150, "", f"GET /v1/carts 200 in {30 + i} ms") for i in range(15)]
                 + [(-820 + i * 60, "ERROR", f"request to brovik:8080 timed out after 2000 ms (try {i})")
                    for i in range(8)])
    results.metric({"__name__": "http_request_duration_seconds", "service": "brovik"}, stepped(0.05, 1.9, 45))
    results.metric({"__name__": "http_requests_total", "service": "brovik", "code": "500"},
                   [v * 60 for v in stepped(0.05, 6, 45)])
    results.metric({"__name__": "hikaricp_connections_pending", "service": "tarsel"}, stepped(0, 30, fault_onset))
    results.logs("tarsel", [(-3000 + i * 150, "", f"POST /v1/ledger 200 in {30 + i} ms") for i in range(15)]
                 + [(-(60 - fault_onset) * 60 + 20 + i * 60, "ERROR",
                     f"HikariPool-1 - Connection is not available, request timed out after 30000ms (req {i})")
                    for i in range(10)])
    return results


def test_a_root_that_only_slows_and_fails_is_not_decisive_when_a_fault_of_its_own_began_earlier_elsewhere():
    found = localise(_slow_middle_and_an_earlier_fault_elsewhere(44).items, ["velmora"])
    assert [c.service for c in found.candidates[:1]] == ["brovik"]
    assert found.outcome == "undetermined" and found.reason == "not_separated"
    later = localise(_slow_middle_and_an_earlier_fault_elsewhere(50).items, ["velmora"])
    assert (later.outcome, later.root, later.kind) == ("root_cause", "brovik", "network.timeout"), later.reason


def test_an_error_line_long_before_a_burst_of_the_same_shape_is_a_blip_not_the_onset():
    """A gateway logged one 504 forty minutes before its 504s began in earnest, when the upstream's
    certificate stopped verifying: its trouble began with the burst, so the upstream it names explains it."""
    results = Results()
    results.logs("orlan", [(-3400 + i * 120, "", f"GET /v1/tokens 200 in {30 + i} ms") for i in range(28)]
                 + [(-2500, "ERROR", "POST /v1/tokens 504 upstream vesk:8443 (req 1)")]
                 + [(-700 + i * 60, "ERROR", f"POST /v1/tokens 504 upstream vesk:8443 (req {i + 2})") for i in range(10)]
                 + [(-690 + i * 60, "ERROR", "request to https://vesk:8443/v1/keys failed: SSL_do_handshake() failed "
                                             f"(certificate verify failed) (try {i})") for i in range(10)])
    results.logs("vesk", [(-3400 + i * 200, "", f"key rotation check ok ({i})") for i in range(17)])
    found = localise(results.items, ["orlan"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "vesk", "network.tls"), (
        found.outcome, found.root, found.reason)


def test_a_dependency_that_shows_nothing_itself_passes_on_the_trouble_of_the_one_its_lines_name():
    """The asked service's dependency slowed down; it calls one that deviates in nothing (its routine lines
    name it), whose own lines name a third that broke first: the third explains both through the quiet
    one, and is the root."""
    results = Results()
    results.metric({"__name__": "http_request_duration_seconds", "service": "pelmo"}, stepped(0.2, 2.9, 48))
    results.logs("pelmo", [(-3000 + i * 150, "", f"GET /v1/basket 200 in {30 + i} ms") for i in range(15)]
                 + [(-700 + i * 60, "ERROR", f"request to kelvar:8080 timed out after 3000 ms (try {i})")
                    for i in range(8)])
    results.metric({"__name__": "http_request_duration_seconds", "service": "kelvar"}, stepped(0.1, 2.6, 47))
    results.logs("kelvar", [(-3400 + i * 150, "", f"fetched stock from http://dostin:8080/v1/stock in {30 + i} ms")
                            for i in range(22)])
    results.logs("dostin", [(-3300 + i * 200, "", f"health check ok ({i})") for i in range(16)]
                 + [(-820, "ERROR", "upstream request failed: connect ECONNREFUSED fernal:5000")])
    results.logs("fernal", [(-3000 + i * 150, "", f"POST /v1/ledger 200 in {30 + i} ms") for i in range(15)]
                 + [(-880 + i * 60, "ERROR", f"could not write segment {i}: No space left on device")
                    for i in range(10)])
    found = localise(results.items, ["pelmo"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "fernal", "resource.disk"), (
        found.outcome, found.root, found.reason)
    assert [e.callee for e in found.path] == ["kelvar", "dostin", "fernal"]


def test_a_container_killed_at_its_memory_limit_is_cited_by_records_long_enough_to_verify():
    """Kubernetes says a container's fate in a word (``OOMKilled``) and a count: too short to cite alone. The
    localiser's records quote them from their object's text, so a root seen only in Kubernetes keeps every
    citation, and the Gatekeeper finds each one in the result it names."""
    from diagnosis.gatekeeper import InvocationRecord, verify_bindings
    from diagnosis.llm.offline.localised import root_claim

    results = Results()
    results.logs("quillet", [(-3400 + i * 95, "", f"thumbnail written id=img-{i} dur={60 + i % 7}ms") for i in range(30)])
    results.kubernetes({"pods": [{"name": "quillet-6f7d9c5b8-r2k4m", "labels": {"app": "quillet"}, "containers": [
        {"name": "quillet", "restartCount": 5, "state": {"state": "running"},
         "lastState": {"state": "terminated", "reason": "OOMKilled", "exitCode": 137}}]}],
        "events": [{"type": "Warning", "reason": "BackOff", "object": "Pod/quillet-6f7d9c5b8-r2k4m",
                    "message": "Back-off restarting failed container quillet in pod quillet-6f7d9c5b8-r2k4m",
                    "lastTimestamp": iso(-300)}]}, "quillet")
    found = localise(results.items, ["quillet"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "quillet", "resource.memory")
    _finding, bindings = root_claim(found)
    assert any("OOMKilled" in b["evidence_excerpt"] for b in bindings), bindings
    assert len(bindings) >= 2
    lookup = type("Lookup", (), {"lookup": lambda self, ids: [
        InvocationRecord(r["invocation_id"], "run-1", r["tool_name"], "SUCCESS", r["result"])
        for r in results.items if r["invocation_id"] in ids]})()
    audit = verify_bindings(executor_output={"version": "executor_evidence_v2", "claims": [
        {"claim_id": "c1", "statement": "The container was killed at its memory limit.", "evidence": bindings}]},
        run_id="run-1", lookup=lookup)
    assert audit.verified_binding_count == audit.total_binding_count == len(bindings)


def test_a_database_asked_about_that_says_what_waits_is_named_by_what_it_is():
    """Its exporter declares a MySQL server; its own warnings say lock waits time out. Either alone is one
    passing word; together they name the kind."""
    results = Results()
    results.metric({"__name__": "mysql_global_status_innodb_row_lock_waits", "service": "tolvar"}, stepped(3, 6, 40))
    results.logs("tolvar", [(-3400 + i * 150, "", f"[Note] [MY-010914] [Server] Aborted connection {900 + i} to db") for i in range(20)]
                 + [(-1100 + i * 90, "WARN", "[Warning] [MY-012345] [Server] InnoDB: Lock wait timeout exceeded; "
                                             "try restarting transaction (table `orders`)") for i in range(4)])
    found = localise(results.items, ["tolvar"])
    assert found.top().role == "dependency.database"
    assert (found.outcome, found.root, found.kind) == ("root_cause", "tolvar", "dependency.database")


def test_a_new_failure_that_says_no_kind_after_a_rollout_is_named_by_the_rollout():
    """A panic no line explains, on a service rolled out to a new image minutes before: nothing else says what
    kind of fault it is, so the change does, fully."""
    results = Results()
    results.logs("dekvor", [(-3400 + i * 150, "", f"GET /v1/parcels 200 in {30 + i % 5} ms") for i in range(20)]
                 + [(-1200 + i * 60, "ERROR", f"http: panic serving 10.244.7.{i}:51234: runtime error: invalid memory "
                                              "address or nil pointer dereference") for i in range(18)])
    results.changes([(-1500, "dekvor", "rollout", "image registry.example/shop/dekvor:4.14.3 -> "
                                                  "registry.example/shop/dekvor:4.15.0")])
    found = localise(results.items, ["dekvor"])
    assert (found.outcome, found.root) == ("root_cause", "dekvor")
    assert found.kind in ("change.image", "change.deploy")
    assert [s.entity for s in found.changes_before()] == ["dekvor"]


def test_a_container_throttled_at_its_own_cpu_quota_is_the_root_without_waiting_for_its_node():
    """CFS throttling is the container held at its own limit: no neighbour took that CPU, so its node need not
    be read first. A node's pressure stall is still CPU a workload did not take itself."""
    from diagnosis.localisation.ranking import Candidate, starved
    from diagnosis.localisation.signals import Signal

    results = Results().kubernetes(_pods_on("pool-b-4rt9k", "10.20.9.7", "wendle"), "wendle")
    results.metric({"__name__": "http_request_duration_seconds", "service": "wendle"}, stepped(0.05, 1.4, 41))
    results.metric({"__name__": "container_cpu_cfs_throttled_periods_total", "service": "wendle"},
                   [600.0 * i * (0.01 if i < 40 else 0.9) for i in range(60)])
    found = localise(results.items, ["wendle"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "wendle", "resource.cpu")

    def candidate(series: str) -> Candidate:
        signal = Signal("wendle", "metric", "cpu", 1.0, 5.0, [], series)
        return Candidate("wendle", [signal], 1.0, 5.0)
    assert not starved(candidate("container_cpu_cfs_throttled_periods_total"))
    assert starved(candidate("node_pressure_cpu_waiting_seconds_total"))


def test_a_server_that_only_warns_is_the_root_when_a_failing_caller_names_it():
    """Warnings alone never make a root, but a server whose new warnings say what its caller's errors say
    (a TLS handshake its clients reject) is the root of what it explains."""
    server = [(-3400 + i * 200, "", f"served GET /v1/quotes in {12 + i} ms") for i in range(15)] + [
        (-700 + i * 70, "WARN", f"http: TLS handshake error from 10.244.7.{20 + i}:5{3000 + i}: remote error: tls: "
                                "bad certificate") for i in range(8)]
    results = Results()
    results.logs("krasto", server)
    results.metric({"__name__": "http_requests_errors_ratio", "service": "vendla"}, stepped(0.001, 0.4, 49))
    results.logs("vendla", [(-3000 + i * 150, "", f"GET /v1/cart 200 in {30 + i} ms") for i in range(12)]
                 + [(-690 + i * 45, "ERROR", "request to https://krasto:8443/v1/quotes failed: x509: certificate has "
                                            "expired or is not yet valid") for i in range(12)])
    found = localise(results.items, ["vendla"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "krasto", "network.tls")
    alone = Results()  # the same warnings, explaining nobody: no root
    alone.logs("krasto", server)
    assert localise(alone.items, ["krasto"]).outcome != "root_cause"


def test_a_warning_that_is_the_failure_itself_announces_no_change_on_the_server():
    """Redis logs a refused password as a warning ("WRONGPASS … or user is disabled"); repeating since the
    onset, it is the failure, not a change of the server, so the caller that rotated its secret stays the root."""
    results = Results()
    results.logs("kolbas", [(-3400 + i * 200, "", "1:M 29 Nov 2026 12:00:00.000 * Background saving started")
                            for i in range(8)]
                 + [(-600 + i * 240, "WARN", "1:M 29 Nov 2026 12:04:59.232 # WRONGPASS invalid username-password "
                                            "pair or user is disabled.") for i in range(3)])
    results.logs("tavio", [(-3000 + i * 150, "", f"GET /v1/orders 200 in {30 + i} ms") for i in range(12)]
                 + [(-598 + i * 40, "ERROR", "cannot connect to redis://kolbas:6379/0: authentication failed")
                    for i in range(15)])
    results.changes([(-700, "tavio", "secret", "Secret tavio-kolbas-credentials rotated")])
    found = localise(results.items, ["tavio"])
    assert not [s.text for s in found.context if s.source == "change" and s.entity == "kolbas"]
    assert (found.outcome, found.root, found.kind) == ("root_cause", "tavio", "change.secret")
