"""What lies below a saturated caller: the node its quiet dependency runs on, and the limit a dependency answers
with. Test code builds the tool results by hand (``support.Results``)."""

import pytest

from diagnosis.localisation.graph import addressed_in
from diagnosis.localisation.outcome import localise
from diagnosis.localisation.records import Evidence
from tests.localisation.support import Results, flat, iso, stepped

NODE, HOST_IP = "pool-b-9qk4s", "10.20.7.31"


def _pool_caller_and_a_quiet_database() -> Results:
    """fobrel's client pool runs dry waiting on quastor, whose own series and logs show nothing; the address
    book (Services with their EndpointSlices) says on which node quastor's pod runs."""
    results = Results()
    results.metric({"__name__": "db_client_connections_pending_requests", "service": "fobrel"}, stepped(0, 30, 44))
    results.metric({"__name__": "pg_stat_activity_max_tx_duration", "service": "quastor"}, flat(0.4))
    results.logs("quastor", [(-3400 + i * 200, "", f"checkpoint complete: wrote {40 + i} buffers") for i in range(17)])
    results.logs("fobrel", [(-3000 + i * 120, "", f"GET /v1/items 200 in {40 + i} ms") for i in range(20)]
                 + [(-900 + i * 50, "ERROR", f"connection pool exhausted: {i + 30} requests waiting for a connection "
                                             f"to postgres://quastor:5432/items") for i in range(8)])
    _on_the_node(results, "quastor", "10.96.4.12", "10.244.3.9")
    return results


def _on_the_node(results: Results, service: str, cluster_ip: str, pod_ip: str) -> None:
    """The Services book: ``service`` with one endpoint, its pod ``<service>-0`` on ``NODE``."""
    results._add("query_kubernetes", {"kind": "service"}, {"pods": [], "events": [], "services": [
        {"name": service, "clusterIP": cluster_ip, "selector": {"app": service},
         "endpoints": [{"ip": pod_ip, "pod": f"{service}-0", "node": NODE, "ready": True}]}]})


def test_a_pool_caller_is_not_decisive_while_the_node_of_the_quiet_dependency_it_waits_on_is_unexamined():
    found = localise(_pool_caller_and_a_quiet_database().items, ["fobrel"])
    assert (found.outcome, found.reason, found.root) == ("undetermined", "node_not_examined", "fobrel")
    checks = [(c.tool, c.arguments) for c in found.next_checks]
    # By the node's name; and its IP, by which node exporter labels its series, is the hostIP of a pod on it.
    assert ("query_metrics", {"query": f'{{node="{NODE}"}}'}) in checks
    assert ("query_kubernetes", {"kind": "pod", "name": "quastor-0"}) in checks


def test_a_node_every_way_to_read_showed_nothing_for_leaves_the_pool_caller_decisive():
    results = _pool_caller_and_a_quiet_database()
    results._add("query_metrics", {"query": f'{{node="{NODE}"}}'}, {"series": []})
    assert localise(results.items, ["fobrel"]).reason == "node_not_examined"  # its IP is not known yet
    results.kubernetes({"pods": [{"name": "quastor-0", "labels": {"app": "quastor"}, "node": NODE, "hostIP": HOST_IP,
                                  "podIP": "10.244.3.9", "containers": []}], "events": []}, "quastor-0")
    found = localise(results.items, ["fobrel"])
    assert [c.arguments for c in found.next_checks] == [{"query": '{instance=~"(%s)(:[0-9]+)?"}' % HOST_IP}]
    results._add("query_metrics", {"query": '{instance=~"(%s)(:[0-9]+)?"}' % HOST_IP}, {"series": []})
    found = localise(results.items, ["fobrel"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "fobrel", "resource.pool")


def _node_short_of_memory(results: Results, service: str, pod_ip: str, at: int) -> None:
    """The pod of ``service`` gives its node's IP; node exporter's series of that IP fall short of memory at ``at``."""
    results.kubernetes({"pods": [{"name": f"{service}-0", "labels": {"app": service}, "node": NODE, "hostIP": HOST_IP,
                                  "podIP": pod_ip, "containers": []}], "events": []}, f"{service}-0")
    results.metric({"__name__": "node_memory_MemAvailable_bytes", "instance": f"{HOST_IP}:9100"}, stepped(8e9, 2e8, at))
    results.metric({"__name__": "node_pressure_memory_waiting_seconds_total", "instance": f"{HOST_IP}:9100"},
                   [i * 0.2 if i < at else at * 0.2 + (i - at) * 40 for i in range(60)])


def test_the_quiet_dependency_is_the_root_once_its_node_shows_memory_pressure():
    results = _pool_caller_and_a_quiet_database()
    _node_short_of_memory(results, "quastor", "10.244.3.9", at=42)
    found = localise(results.items, ["fobrel"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "quastor", "scheduling.node_pressure")
    assert found.top().explains == ["fobrel"]


def test_a_rate_limit_a_dependency_answers_with_is_that_dependency_s_limit_not_the_caller_s():
    results = Results()
    results.metric({"__name__": "http_server_errors_ratio", "service": "vendra"}, stepped(0.001, 0.35, 44))
    results.logs("vendra", [(-3000 + i * 120, "", f"GET /v1/quotes 200 in {30 + i} ms") for i in range(20)]
                 + [(-900 + i * 40, "ERROR", f"POST http://mulcot:8080/v2/send failed: 429 Too Many Requests "
                                             f"(retry after {i + 2}s)") for i in range(12)])
    results.logs("mulcot", [(-3400 + i * 200, "", f"served {400 + i} requests") for i in range(17)])
    results.metric({"__name__": "up", "service": "mulcot"}, flat(1.0, wiggle=0))
    found = localise(results.items, ["vendra"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "mulcot", "capacity.rate_limit")
    assert found.top().explains == ["vendra"]


@pytest.mark.parametrize(("message", "expected"), [
    # Python requests/urllib3, redis-py and libpq: the host given with its port as a pair of keys
    ("requests.exceptions.ConnectionError: HTTPConnectionPool(host='ledger-core', port=8080): Max retries exceeded "
     "with url: /v1/entries", ["ledger-core"]),
    ("HTTPConnectionPool(host='10.244.203.81', port=8080): Max retries exceeded", ["10.244.203.81"]),
    ("redis.exceptions.ConnectionError: Error while reading from Redis<ConnectionPool<Connection<host=sessions,"
     "port=6379,db=0>>>", ["sessions"]),
    ("psycopg2.OperationalError: could not connect: host=orders port=5432 dbname=orders", ["orders"]),
    # a host key alone names this side (an access log's request host)
    ('10.0.4.2 - - "GET /healthz HTTP/1.1" 200 host=storefront', []),
])
def test_a_host_given_with_its_port_is_where_the_call_went(message, expected):
    found, unresolved = addressed_in(message, Evidence(), set())
    assert found + unresolved == expected


def test_memory_words_in_lines_that_name_a_dependency_are_not_the_callers_own_shortage():
    """vendra's writes fail with the cache's own refusal ("OOM command not allowed"), in lines that name the
    cache: while nothing of the cache was read, vendra is not decisive, and the next check reads the cache; once
    read, the cache is the root."""
    results = Results()
    results.metric({"__name__": "http_server_errors_ratio", "service": "vendra"}, stepped(0.001, 0.3, 44))
    results.logs("vendra", [(-3000 + i * 120, "", f"GET /v1/carts 200 in {30 + i} ms") for i in range(20)]
                 + [(-900 + i * 60, "ERROR", f"Redis write failed [redis://tirlo:6379/0] JedisDataException: OOM "
                                             f"command not allowed when used memory > 'maxmemory' (attempt {i})")
                    for i in range(10)])
    found = localise(results.items, ["vendra"])
    assert (found.outcome, found.root, found.kind) == ("undetermined", "vendra", "resource.memory")
    assert found.reason == "address_not_resolved"
    assert {"service": "tirlo"} in [c.arguments for c in found.next_checks]
    # Once the cache is examined, showing nothing itself, the memory its caller's lines speak of is its own:
    # a cache at its limit.
    results.logs("tirlo", [(-3400 + i * 200, "", f"DB saved on disk ({i + 3} changes)") for i in range(17)])
    results.metric({"__name__": "redis_connected_clients", "service": "tirlo"}, flat(40))
    found = localise(results.items, ["vendra"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "tirlo", "dependency.cache")


def test_nothing_wrong_is_not_said_while_a_chain_of_error_lines_leads_to_a_service_no_query_examined():
    """The asked service's errors name a dependency, whose errors name the next, and so on: three quiet hops
    down, the last one's errors name a service nobody examined."""
    results = Results()
    chain = ["pravo", "sundel", "kerrit", "molvane"]
    for service, callee in zip(chain, chain[1:] + ["tescarn"]):
        results.logs(service, [(-3400 + i * 200, "", f"GET /v1/items 200 in {20 + i} ms") for i in range(17)]
                     + [(-2600, "ERROR", f"POST http://{callee}:8080/v1/items failed: 503")])
    found = localise(results.items, ["pravo"])
    assert (found.outcome, found.reason) == ("undetermined", "address_not_resolved")
    assert {"service": "tescarn"} in [c.arguments for c in found.next_checks]


def _callers_of_a_service_that_went_away(state: dict | None) -> Results:
    """baltic's calls to orrin are refused; orrin's series stop and its ``up`` falls: it went away."""
    results = Results()
    results.metric({"__name__": "http_server_errors_ratio", "service": "baltic"}, stepped(0.001, 0.4, 45))
    results.logs("baltic", [(-3000 + i * 120, "", f"GET /v1/orders 200 in {30 + i} ms") for i in range(20)]
                 + [(-880 + i * 50, "ERROR", f"dial tcp orrin:7000: connect: connection refused (attempt {i})")
                    for i in range(14)])
    results.metric({"__name__": "up", "service": "orrin"}, stepped(1, 0, 44, wiggle=0))
    results.logs("orrin", [(-3400 + i * 200, "", f"served {300 + i} requests") for i in range(13)])
    if state is not None:
        results.kubernetes(state, "orrin")
    return results


def test_a_service_that_went_away_is_not_decisive_before_its_kubernetes_state_says_why():
    found = localise(_callers_of_a_service_that_went_away(None).items, ["baltic"])
    assert (found.outcome, found.root, found.reason) == ("undetermined", "orrin", "state_not_examined")
    assert ("query_kubernetes", {"kind": "deployment", "name": "orrin"}) in [(c.tool, c.arguments) for c in found.next_checks]
    pending = {"pods": [{"name": "orrin-5d8c7b9f4-k2x7q", "labels": {"app": "orrin"}, "phase": "Pending", "node": None,
                         "containers": []}],
               "events": [{"type": "Warning", "reason": "FailedScheduling", "object": "pod/orrin-5d8c7b9f4-k2x7q",
                           "message": "0/5 nodes are available: 5 Insufficient cpu.", "firstTimestamp": iso(-960),
                           "lastTimestamp": iso(-30), "count": 30}]}
    found = localise(_callers_of_a_service_that_went_away(pending).items, ["baltic"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "orrin", "scheduling.pending")


def _certificate_of_an_outside_host(book: list[dict] | None) -> Results:
    results = Results()
    results.metric({"__name__": "http_server_errors_ratio", "service": "sivet"}, stepped(0.001, 0.3, 44))
    results.logs("sivet", [(-3000 + i * 120, "", f"GET /v1/rates 200 in {30 + i} ms") for i in range(20)]
                 + [(-900 + i * 50, "ERROR", 'request to https://rates.pelmor.io/v2 failed: certificate has expired '
                                             f'(CERT_HAS_EXPIRED) attempt {i}') for i in range(12)])
    if book is not None:
        results._add("query_kubernetes", {"kind": "service"}, {"pods": [], "events": [], "services": book})
    return results


def test_a_certificate_an_outside_host_presents_is_looked_up_among_the_clusters_services_first():
    found = localise(_certificate_of_an_outside_host(None).items, ["sivet"])
    assert (found.outcome, found.reason) == ("undetermined", "address_not_resolved")
    assert ("query_kubernetes", {"kind": "service"}) in [(c.tool, c.arguments) for c in found.next_checks]
    declared = [{"name": "pelmor-rates", "type": "ExternalName", "externalName": "rates.pelmor.io"}]
    found = localise(_certificate_of_an_outside_host(declared).items, ["sivet"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "pelmor-rates", "network.tls")


def _timeouts_naming_a_quiet_cache(metrics_asked: bool) -> Results:
    """dorvik's reads time out against its cache fennick, whose own lines show nothing; the timeouts are the
    callers' view: the cache's own series would say why (packets it dropped, memory at its limit)."""
    results = Results()
    results.metric({"__name__": "http_server_errors_ratio", "service": "dorvik"}, stepped(0.001, 0.3, 44))
    results.logs("dorvik", [(-3000 + i * 120, "", f"GET /v1/carts 200 in {30 + i} ms") for i in range(20)]
                 + [(-900 + i * 50, "ERROR", f"read from redis://fennick:6379 failed: i/o timeout after 2s (attempt {i})")
                    for i in range(12)])
    results.logs("fennick", [(-3400 + i * 200, "", f"DB saved on disk ({i + 3} changes)") for i in range(17)])
    if metrics_asked:
        results.metric({"__name__": "redis_connected_clients", "service": "fennick"}, flat(40))
    return results


def test_a_root_seen_only_in_its_callers_timeouts_waits_for_its_own_series():
    found = localise(_timeouts_naming_a_quiet_cache(metrics_asked=False).items, ["dorvik"])
    assert (found.outcome, found.root, found.reason) == ("undetermined", "fennick", "metrics_not_examined")
    assert ("query_metrics", {"service": "fennick"}) in [(c.tool, c.arguments) for c in found.next_checks]
    found = localise(_timeouts_naming_a_quiet_cache(metrics_asked=True).items, ["dorvik"])
    assert (found.outcome, found.root) == ("root_cause", "fennick")


def _a_lone_slow_workload() -> Results:
    """ravnik answers slower (Envoy's request time), with nothing of its own that says why; the Services say on
    which node its pod runs."""
    results = Results()
    results.metric({"__name__": "envoy_http_downstream_rq_time", "service": "ravnik"}, stepped(40, 900, 40))
    results.logs("ravnik", [(-3400 + i * 150, "", f"GET /v1/routes 200 in {40 + i % 7} ms") for i in range(20)])
    _on_the_node(results, "ravnik", "10.96.4.20", "10.244.3.21")
    return results


def test_a_workload_that_is_only_slower_waits_for_the_node_it_runs_on():
    found = localise(_a_lone_slow_workload().items, ["ravnik"])
    assert found.top().faults[0].kind == "latency"  # Envoy's rq_time is a request duration
    assert (found.outcome, found.reason, found.root) == ("undetermined", "node_not_examined", "ravnik")
    assert ("query_metrics", {"query": f'{{node="{NODE}"}}'}) in [(c.tool, c.arguments) for c in found.next_checks]


def test_a_slow_workload_with_only_a_passing_word_of_a_kind_still_waits_for_its_node():
    """One caller's line that says "forbidden" once is not a kind: the workload is still only slower, and its
    node may say why."""
    results = _a_lone_slow_workload()
    results.logs("velmar", [(-3400 + i * 150, "", f"POST /v1/trips 200 in {40 + i % 7} ms") for i in range(20)]
                 + [(-1000, "WARN", "GET http://ravnik:8080/v1/routes answered 403 forbidden after 6244 ms")])
    found = localise(results.items, ["ravnik"])
    assert found.top().service == "ravnik" and 0 < found.top().kind_votes.get("change.secret", 0) < 1.2
    assert (found.outcome, found.reason) == ("undetermined", "node_not_examined")


def test_the_slow_workload_s_node_short_of_memory_names_the_kind():
    results = _a_lone_slow_workload()
    results._add("query_metrics", {"query": f'{{node="{NODE}"}}'}, {"series": []})
    _node_short_of_memory(results, "ravnik", "10.244.3.21", at=38)
    found = localise(results.items, ["ravnik"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "ravnik", "scheduling.node_pressure")


def test_a_root_seen_through_its_nodes_series_cites_the_service_that_declares_it():
    """The node's series carry the node's address, not the workload's name: the root claim also cites the
    Service record, so the structured root names the workload."""
    from diagnosis.llm.offline.localised import root_claim
    from diagnosis.structured_diagnosis import record_service

    results = Results()
    results.metric({"__name__": "http_server_request_duration_seconds", "service": "velmar"}, stepped(0.05, 2.0, 41))
    results.logs("velmar", [(-3400 + i * 150, "", f"POST /v1/trips 200 in {40 + i % 7} ms") for i in range(20)]
                 + [(-1000 + i * 60, "WARN", f"GET http://ravnik:8080/v1/routes completed in {6000 + i} ms (slow)")
                    for i in range(10)])
    results.metric({"__name__": "http_server_request_duration_seconds", "service": "ravnik"}, flat(0.04))
    _on_the_node(results, "ravnik", "10.96.4.20", "10.244.3.21")
    results._add("query_metrics", {"query": f'{{node="{NODE}"}}'}, {"series": []})
    _node_short_of_memory(results, "ravnik", "10.244.3.21", at=38)
    found = localise(results.items, ["velmar"])
    assert (found.outcome, found.root) == ("root_cause", "ravnik")
    assert not any("ravnik" in r.excerpt for s in found.top().evidence() for r in s.refs)
    _finding, bindings = root_claim(found)
    by_id = {r["invocation_id"]: r for r in results.items}
    services = [record_service(b["tool_name"], by_id[b["source_invocation_id"]]["result"]["services"][0])
                for b in bindings if b["raw_path"].startswith("$.services[")]
    assert services == ["ravnik"]


def test_a_node_named_by_its_ip_is_read_by_that_ip_without_asking_a_pod_for_it():
    """EC2's private DNS names (EKS, kops) spell the node's IP: node exporter's series of that IP are the node's."""
    ec2 = "ip-10-20-7-31.eu-west-1.compute.internal"
    results = Results()
    results.metric({"__name__": "envoy_http_downstream_rq_time", "service": "ravnik"}, stepped(40, 900, 40))
    results.logs("ravnik", [(-3400 + i * 150, "", f"GET /v1/routes 200 in {40 + i % 7} ms") for i in range(20)])
    results._add("query_kubernetes", {"kind": "service"}, {"pods": [], "events": [], "services": [
        {"name": "ravnik", "clusterIP": "10.96.4.20", "selector": {"app": "ravnik"},
         "endpoints": [{"ip": "10.244.3.21", "pod": "ravnik-0", "node": ec2, "ready": True}]}]})
    checks = [(c.tool, c.arguments) for c in localise(results.items, ["ravnik"]).next_checks]
    # By its name and by its IP, in one query: one call.
    assert checks == [("query_metrics", {"query": f'{{node="{ec2}"}} or {{instance=~"(10.20.7.31)(:[0-9]+)?"}}'})]
    results.metric({"__name__": "node_memory_MemAvailable_bytes", "instance": "10.20.7.31:9100"}, stepped(8e9, 2e8, 38))
    results.metric({"__name__": "node_pressure_memory_waiting_seconds_total", "instance": "10.20.7.31:9100"},
                   [i * 0.2 if i < 38 else 38 * 0.2 + (i - 38) * 40 for i in range(60)])
    found = localise(results.items, ["ravnik"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "ravnik", "scheduling.node_pressure")


def test_a_plain_word_is_a_dependency_only_when_the_cluster_declares_a_service_of_that_name():
    from diagnosis.localisation.graph import build_graph
    from diagnosis.localisation.records import read_evidence

    results = Results()
    results.logs("velmar", [(-3400 + i * 150, "", f"POST /v1/trips 200 in {40 + i % 7} ms") for i in range(20)]
                 + [(-1000 + i * 60, "WARN", f"upstream tessor responded after {2800 + i} ms for orders batch")
                    for i in range(10)])
    undeclared = build_graph(read_evidence(results.items))
    assert undeclared.dependencies("velmar") == []
    results._add("query_kubernetes", {"kind": "service"}, {"pods": [], "events": [], "services": [
        {"name": "tessor", "clusterIP": "10.96.4.21", "selector": {"app": "tessor"}}]})
    declared = build_graph(read_evidence(results.items))
    assert [(e.callee, e.via) for e in declared.dependencies("velmar")] == [("tessor", "log")]
