"""Signals: levels from real formats, robust shifts, templates, and what is noise."""

import pytest

from diagnosis.localisation.deviation import shift
from diagnosis.localisation.kinds import word_votes
from diagnosis.localisation.levels import level_of
from diagnosis.localisation.records import claim_owner, read_evidence, service_of, workload_of
from diagnosis.localisation.signals import all_signals, metric_kind
from tests.localisation.support import Results, flat, stepped


@pytest.mark.parametrize("field, line, level", [
    (None, '{"level":"error","msg":"boom"}', "ERROR"),
    (None, 'ts=2026-11-29T10:00:00Z level=warn msg="slow"', "WARN"),
    (None, "E1129 10:02:03.042000    1 reflector.go:138] failed to list", "ERROR"),
    (None, "2026-11-29 10:02:03.042 UTC [31] FATAL:  password authentication failed", "FATAL"),
    (None, '10.0.0.1 - - [29/Nov/2026:10:02:03 +0000] "GET /a HTTP/1.1" 503 12 "-" "curl"', "ERROR"),
    (None, '10.0.0.1 - - [29/Nov/2026:10:02:03 +0000] "GET /a HTTP/1.1" 200 12 "-" "curl"', "INFO"),
    (None, "1:M 29 Nov 2026 10:02:03.042 # WARNING overcommit_memory is set to 0", "WARN"),
    (None, "2026-11-29 10:02:03,042 CRITICAL worker died", "FATAL"),
    ("PANIC", "anything", "FATAL"),
    ("W", "anything", "WARN"),
    (None, "Traceback (most recent call last):\n  File x\nValueError: bad", "ERROR"),
    (None, "request served in 12 ms", "INFO"),
])
def test_the_level_comes_from_the_field_or_the_format_of_the_line(field, line, level):
    assert level_of(field, line) == level


def test_pod_names_resolve_to_their_workload():
    assert workload_of("checkout-7c9d5b6f4-h2x8r") == "checkout"
    assert workload_of("orders-mysql-0") == "orders-mysql"
    assert workload_of("ledger-api") == "ledger-api"


def test_volume_claims_resolve_to_their_statefulset():
    assert claim_owner("data-orders-db-0") == "orders-db"
    assert claim_owner("data-orders-db-archive-12") == "orders-db-archive"
    # A template with dashes: the claim is read against the workloads known, the longest it names.
    assert claim_owner("mysql-data-orders-db-1", {"orders-db", "db", "ledger-api"}) == "orders-db"
    assert claim_owner("data-orders-db-0", {"db"}) == "db"
    assert claim_owner("orders-uploads") == "" and claim_owner("uploads-0") == ""
    labels = {"__name__": "kubelet_volume_stats_available_bytes", "namespace": "shop", "persistentvolumeclaim": "data-orders-db-0"}
    assert service_of(labels) == "orders-db"
    assert service_of({**labels, "service": "orders-db-primary"}) == "orders-db-primary"  # a service label still wins


def test_a_volume_series_is_its_statefulsets_disk_signal_read_against_the_services_known():
    results = Results().logs("orders-db", [(-600, "INFO", "checkpoint complete")])
    results.metric({"__name__": "kubelet_volume_stats_available_bytes", "namespace": "shop",
                    "persistentvolumeclaim": "pg-data-orders-db-0"}, stepped(6e9, 1e6, 40))
    evidence = read_evidence(results.items)
    assert evidence.services() == {"orders-db"}
    signals, _ = all_signals(evidence)
    assert [(s.entity, s.kind, s.fault) for s in signals if s.source == "metric"] == [("orders-db", "disk", True)]


def _volume_running_out(with_capacity: bool, to: float = 0.0) -> list:
    """A volume of 100 GB whose free space shrinks ever faster from 25 GB and stays at ``to`` from minute 40."""
    volume = {"namespace": "shop", "persistentvolumeclaim": "data-orders-db-0"}
    free = [25e9 * (1 - (i / 40) ** 1.5) if i < 40 else to for i in range(60)]
    results = Results().logs("orders-db", [(-600, "INFO", "checkpoint complete")])
    results.metric({"__name__": "kubelet_volume_stats_available_bytes", **volume}, free)
    if with_capacity:
        results.metric({"__name__": "kubelet_volume_stats_capacity_bytes", **volume}, [1e11] * 60)
    signals, _ = all_signals(read_evidence(results.items))
    return [(s.entity, s.kind, s.detail.get("ceiling")) for s in signals if s.source == "metric" and s.fault]


def test_free_space_that_ran_out_of_its_capacity_is_a_fault_however_it_drained():
    assert _volume_running_out(with_capacity=True) == [("orders-db", "disk", 1e11)]
    # The drain itself is the baseline's noise: without the capacity the same series shows nothing.
    assert _volume_running_out(with_capacity=False) == []
    # Still 10 % of the capacity free: not out of space.
    assert _volume_running_out(with_capacity=True, to=1e10) == []


def test_a_sustained_shift_has_its_onset_and_a_spike_that_went_away_is_noise():
    times = [float(i * 60) for i in range(60)]
    moved = shift(times, stepped(100, 400, 45))
    assert moved is not None and moved.sustained and moved.onset == 45 * 60 and moved.direction == 1
    spike = flat(100)
    spike[20:23] = [900, 950, 900]
    assert not shift(times, spike).sustained


def test_a_sawtooth_that_keeps_climbing_back_is_sustained():
    times = [float(i * 60) for i in range(60)]
    saw = [100.0] * 20 + [100 + 40 * (i % 10) for i in range(40)]
    saw = [v if i < 20 else max(v, 180) for i, v in enumerate(saw)]
    assert shift(times, saw).sustained


@pytest.mark.parametrize("name, labels, kind", [
    ("http_server_requests_seconds", {}, "latency"),
    ("http_requests", {"code": "503"}, "errors"),
    ("container_cpu_usage_seconds", {}, "cpu"),
    ("container_memory_working_set_bytes", {}, "memory"),
    ("node_filesystem_avail_bytes", {}, "disk"),
    ("hikaricp_connections_pending", {}, "saturation"),
    ("kube_pod_container_status_restarts", {}, "restart"),
])
def test_metric_kinds_follow_naming_conventions(name, labels, kind):
    assert metric_kind(name, labels) == kind


def test_routine_warnings_are_not_signals_and_a_new_error_template_is():
    routine = [(-3500 + i * 300, "WARN", f"cache refresh took {100 + i} ms longer than expected") for i in range(12)]
    errors = [(-600 + i * 40, "ERROR", f"request {i} failed: upstream returned 502") for i in range(12)]
    evidence = read_evidence(Results().logs("alpha", routine + errors).items)
    signals, _ = all_signals(evidence)
    logs = [s for s in signals if s.source == "log"]
    assert len(logs) == 1 and "502" in logs[0].refs[0].excerpt and "<NUM>" in logs[0].text and logs[0].onset == min(r.ts for r in evidence.logs if r.level == "ERROR")


def test_a_counter_is_read_as_its_rate_and_a_drop_in_errors_is_not_a_fault():
    cumulative, total = [], 1000.0
    for i in range(60):
        total += 2 if i < 40 else 30
        cumulative.append(total)
    results = Results().metric({"__name__": "app_errors_total", "service": "beta"}, cumulative)
    results.metric({"__name__": "app_errors_ratio", "service": "gamma"}, stepped(0.3, 0.01, 40))
    signals, _ = all_signals(read_evidence(results.items))
    assert [(s.entity, s.kind) for s in signals if s.fault] == [("beta", "errors")]


@pytest.mark.parametrize("line, kind", [
    ('{"method":"GET","response_code":503,"response_flags":"UF,URX","upstream_host":"10.0.0.7:3000"}', "change.flag"),
    ("ts=2026-11-29T11:42:27Z level=error retry_timeout=30s msg=\"upstream answered 502\"", "network.timeout"),
    ('{"level":"error","password_hash_algo":"argon2","msg":"request failed"}', "change.secret"),
])
def test_the_names_of_a_records_fields_are_not_words_of_what_happened(line, kind):
    assert kind not in word_votes(line)


def test_the_values_of_a_records_fields_still_are():
    assert "change.flag" in word_votes('{"level":"info","msg":"feature flag checkout-v2 enabled for 50%"}')
    assert "network.refused" in word_votes("level=error err=\"dial tcp 10.0.0.7:5432: connect: connection refused\"")


def test_a_count_that_goes_down_as_well_as_up_is_a_gauge_not_a_counter():
    sessions = [20 + (i * 7) % 9 for i in range(40)] + [98 + (i % 3) for i in range(20)]
    results = Results().metric({"__name__": "pg_stat_activity_count", "service": "ostrad-db", "state": "active"}, sessions)
    signals, _ = all_signals(read_evidence(results.items))
    assert [(s.entity, s.kind, s.detail["shift"].index) for s in signals if s.fault] == [("ostrad-db", "saturation", 40)]


def test_a_few_errors_spread_over_the_incident_are_ongoing_and_a_burst_that_ended_long_ago_is_not():
    quiet = [(-3500 + i * 150, "", f"GET /v1/items 200 in {30 + i} ms") for i in range(20)]
    sparse = [(-1000, "ERROR", "insert failed: column \"tenant_id\" does not exist"),
              (-900, "ERROR", "insert failed: column \"tenant_id\" does not exist"),
              (-700, "ERROR", "insert failed: column \"tenant_id\" does not exist")]
    burst = [(-2400 + i * 5, "ERROR", f"job {i} failed: lock not acquired") for i in range(40)]
    signals, _ = all_signals(read_evidence(Results().logs("velt", quiet + sparse).logs("zarn", quiet + burst).items))
    assert [s.entity for s in signals if s.source == "log" and s.fault] == ["velt"]


@pytest.mark.parametrize("line, has_config", [
    ("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk", False),
    ("ConfigMap orders-config: worker.count changed", True),
    ("invalid configuration: unknown option 'max_idle'", True),
])
def test_configured_is_not_a_configuration_change(line, has_config):
    assert bool(word_votes(line).get("change.config")) is has_config


@pytest.mark.parametrize("reason, message, kind", [
    ("CreateContainerConfigError", 'Error: secret "ledger-db-credentials" not found', "change.secret"),
    ("CreateContainerConfigError", 'Error: configmap "ledger-settings" not found', "change.config"),
    ("FailedCreate", 'pods "w-1" is forbidden: exceeded quota: team-a, requested: cpu=2', "capacity.quota"),
    ("OOMKilled", "", "resource.memory"),
    ("CrashLoopBackOff", "back-off 5m0s restarting failed container", None),
    ("Error", "", None),
])
def test_a_kubernetes_reason_names_a_kind_only_when_it_says_what_failed(reason, message, kind):
    from diagnosis.localisation.kinds import typed_reason
    assert typed_reason(reason, message) == kind


def test_a_node_exporter_series_is_the_node_its_pods_name_by_their_host_ip():
    results = Results().kubernetes({"pods": [{"name": "pelko-7d9f8c6b5-x2x9q", "labels": {"app": "pelko"},
                                              "node": "pool-a-7xk2p", "hostIP": "10.20.9.4", "podIP": "10.244.1.5",
                                              "containers": []}]}, "pelko")
    results.metric({"__name__": "node_memory_MemAvailable_bytes", "instance": "10.20.9.4:9100"},
                   stepped(8e9, 2e8, 40))
    evidence = read_evidence(results.items)
    signals, _ = all_signals(evidence)
    assert [s.entity for s in signals if s.fault] == ["node:pool-a-7xk2p"]
    from diagnosis.localisation.graph import build_graph
    assert [e.callee for e in build_graph(evidence).dependencies("pelko")] == ["node:pool-a-7xk2p"]


@pytest.mark.parametrize("line", [
    "Knex: Timeout acquiring a connection. The pool is probably full.",
    "QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00",
    "An attempt by a client to checkout a Connection has timed out.",
])
def test_waiting_for_a_pooled_connection_is_a_pool_in_the_words_of_several_stacks(line):
    votes = word_votes(line)
    assert votes["resource.pool"] > votes["network.timeout"]


def test_a_jvm_logger_package_path_says_where_the_code_lives_not_what_happened():
    line = '{"level":"ERROR","logger_name":"c.t.orders.config.StartupRunner","message":"upstream answered 502"}'
    assert not word_votes(line).get("change.config")
    assert word_votes("java.net.SocketTimeoutException: Read timed out").get("network.timeout")


def test_an_error_that_says_disabled_announces_no_change():
    quiet = [(-3500 + i * 150, "", f"GET /v1/items 200 in {30 + i} ms") for i in range(20)]
    errors = [(-1200, "ERROR", "MISCONF writes are disabled (target redis://cachet:6379/0)"),
              (-900, "ERROR", "MISCONF writes are disabled (target redis://cachet:6379/0)")]
    notice = [(-2000, "", "feature checkout_v2 enabled by operator")]
    signals, _ = all_signals(read_evidence(Results().logs("velt", quiet + errors + notice).items))
    assert [s.text for s in signals if s.source == "change"] == ["feature checkout_v2 enabled by operator"]


@pytest.mark.parametrize("line, kind", [
    ("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", "data.poison_message"),
    ('serde_json::Error("trailing characters", line: 1, column: 17): decoding error in message 7@12', "data.poison_message"),
    ('ERROR:  column "discount_code" does not exist at character 8', "data.schema"),
    ("Error 1054 (42S22): Unknown column 'discount_code' in 'field list'", "data.schema"),
    ("sqlite3.OperationalError: no such column: discount_code", "data.schema"),
])
def test_a_parsers_line_and_column_are_a_position_not_a_tables_column(line, kind):
    votes = word_votes(line)
    assert max(votes, key=votes.get) == kind


@pytest.mark.parametrize("line", [
    "Failed to bind properties under 'tovra.redis.timeout' to java.time.Duration",
    "启动失败：无法绑定属性 'tovra.kafka.poll-interval'，值 '5分' 不是合法的时长",
    'nginx: [emerg] unknown directive "proxy_cache_valdi" in /etc/nginx/conf.d/tovra.conf:14',
    "Could not resolve placeholder 'tovra.database.url' in value \"${tovra.database.url}\"",
    "fatal: loading /srv/tovra/settings.toml: option cache.size: invalid value \"12q\"",
])
def test_a_setting_its_loader_cannot_read_is_a_configuration_fault_whatever_the_setting_is_named(line):
    """The setting's name (a cache's timeout, a broker's interval) is which setting, not a dependency that
    failed; the loader's words and the settings file say the configuration is wrong."""
    votes = word_votes(line)
    assert max(votes, key=votes.get) == "change.config"
    assert not {"dependency.cache", "dependency.queue", "dependency.database", "network.dns"} & set(votes)


def test_a_dependency_named_outside_a_setting_still_votes_for_its_role():
    assert word_votes("ERR redis refused the write: OOM command not allowed").get("dependency.cache")
    assert word_votes("dial tcp: lookup ledger-db on 10.96.0.10:53: no such host").get("network.dns")


@pytest.mark.parametrize("excerpt, kind, shown", [
    ('container_network_receive_packets_dropped_total{interface="eth0",pod="kelvo-0"} max 1337950, baseline 324',
     "network.loss", True),
    ('envoy_http_local_rate_limit_rate_limited{service="kelvo"} max 112289, baseline 0', "capacity.rate_limit", True),
    ('http_server_requests_seconds_count{service="kelvo",status="500"} max 50028, baseline 210', "network.loss", False),
])
def test_a_quoted_series_shows_the_kind_its_name_counts_as_the_localiser_reads_it(excerpt, kind, shown):
    """The verifier's check that a root cause's one quoted record shows its kind reads a series name's words
    as the localiser does (underscores between them)."""
    from diagnosis.localisation.kinds import evident
    assert evident(kind, excerpt) is shown


def test_a_service_name_blanked_in_a_line_leaves_the_phrase_around_it_readable():
    """Names are masked so that "image-cache" votes for no cache; the lookup it failed still reads as one."""
    line = "dial tcp: lookup ledger-db.internal on 10.96.0.10:53: server misbehaving"
    assert word_votes(line, {"ledger-db"}).get("network.dns")
    assert not word_votes("GET http://image-cache:8080/v1/thumbs answered 502", {"image-cache"}).get("dependency.cache")
