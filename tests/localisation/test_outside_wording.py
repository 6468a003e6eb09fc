"""Classes of incidents written outside this project (docs/EVALUATION.md, "Incidents written by someone
else"): each test holds one general rule in names and words no scenario uses."""

from datetime import timedelta

from diagnosis.localisation.graph import build_graph
from diagnosis.localisation.kinds import change_kind, word_votes
from diagnosis.localisation.outcome import localise
from diagnosis.localisation.records import read_evidence
from tests.localisation.support import NOW, Results, iso, stepped


def test_a_callee_label_that_is_a_cluster_dns_name_is_the_service_it_names():
    """OpenTelemetry's ``server.address`` and Istio's ``destination_service`` often hold the Service's DNS
    name: the edge goes to the Service, the name a query can ask for."""
    results = Results()
    for address in ("brindlevault.docs.svc.cluster.local", "quarnsmith.docs.svc:8443"):
        results.metric({"__name__": "http_client_request_duration_seconds_count", "service": "stelmo",
                        "server_address": address}, [100.0 * i for i in range(60)])
    results.metric({"__name__": "http_client_request_duration_seconds_count", "service": "stelmo",
                    "server_address": "api.partner.example"}, [100.0 * i for i in range(60)])
    graph = build_graph(read_evidence(results.items))
    assert [e.callee for e in graph.dependencies("stelmo")] == ["brindlevault", "quarnsmith", "api.partner.example"]


def test_a_service_named_as_the_client_of_a_call_is_its_caller_not_its_dependency():
    results = Results()
    results.logs("front-wb", [(-600, "ERROR", "POST http://tokmint:8000/v1/refresh answered 500")])
    results.logs("tokmint", [(-590, "ERROR", "create session failed for client=front-wb "
                                             "(redis sesh-store.idp.svc.cluster.local:6379/0): OOM command not allowed"),
                             (-580, "WARN", '{"msg":"token reuse","caller":"front-wb","sid":"a81f"}')])
    results.logs("sesh-store", [(-3000, "", "1:M 29 Nov 2026 09:12:00.000 * Background saving started")])
    graph = build_graph(read_evidence(results.items))
    assert ("front-wb", "tokmint") in graph.edges and ("tokmint", "sesh-store") in graph.edges
    assert ("tokmint", "front-wb") not in graph.edges


def test_a_value_that_failed_to_parse_in_chinese_is_a_message_fault_not_a_name_lookup():
    """"解析失败" is any parse that failed; a failed lookup says whose name it was."""
    parsed = word_votes("积分入账失败，消息将重试 原因: 支付金额解析失败 payAmount=\"12.50元\"")
    assert parsed.get("data.poison_message") and not parsed.get("network.dns")
    for lookup in ("域名解析失败: pg-main.svc", "DNS 解析失败", "无法解析主机 pg-main"):
        votes = word_votes(lookup)
        assert votes.get("network.dns") and not votes.get("data.poison_message"), lookup


def test_a_rollout_that_kept_its_image_is_not_an_image_change():
    assert change_kind("rollout", "revision 31: pod template annotation reload-hash changed; "
                                  "image unchanged registry.local/team/pickr:5.4.2") != "change.image"
    assert change_kind("rollout", "revision 32: image registry.local/team/pickr:5.4.2 -> "
                                  "registry.local/team/pickr:5.5.0") == "change.image"


def _crash_looping(changed: tuple[str, str] | None, reason: str = "Unhealthy") -> Results:
    """A service Kubernetes shows only failing its liveness probe and restarting, maybe right after a change."""
    results = Results()
    results.metric({"__name__": "http_server_requests_seconds_count", "service": "pickr"},
                   [50.0 * i for i in range(60)])
    events = [{"type": "Warning", "reason": reason, "object": f"pod/pickr-7d6f9c8b54-{pod}", "count": 6,
               "message": f"Liveness probe failed: Get \"http://10.12.3.{n}:8081/actuator/health\": dial tcp "
                          f"10.12.3.{n}:8081: connect: connection refused" if reason == "Unhealthy" else "",
               "firstTimestamp": iso(-1000 + 30 * n), "lastTimestamp": iso(-40)}
              for n, pod in enumerate(("h2kqm", "p8sxl", "z5jwc"))]
    events += [{"type": "Normal", "reason": "Killing", "object": "pod/pickr-7d6f9c8b54-h2kqm", "count": 5,
                "message": "Container pickr failed liveness probe, will be restarted",
                "firstTimestamp": iso(-980), "lastTimestamp": iso(-60)}]
    results.kubernetes({"pods": [{"name": "pickr-7d6f9c8b54-h2kqm", "labels": {"app": "pickr"}, "containers": [
        {"name": "pickr", "restartCount": 6, "state": {"reason": "CrashLoopBackOff"},
         "lastState": {"reason": "Error", "exitCode": 143}}]}], "events": events}, "pickr")
    if changed:
        results.changes([(-1020, "pickr", *changed)])
    return results


def test_a_container_that_fails_its_probes_right_after_its_own_change_fails_because_of_the_change():
    """"Connection refused" on its own port is how the container fails its probe, not why; the ConfigMap
    changed just before the first failure is why."""
    config = localise(_crash_looping(("config", "data.application.yaml: management.server.port 8081 -> 9091")).items,
                      ["pickr"])
    assert (config.root, config.kind) == ("pickr", "change.config")
    unchanged = localise(_crash_looping(None).items, ["pickr"])
    assert unchanged.root == "pickr" and not unchanged.kind.startswith("change.")
    # A reason that names its own kind keeps it, whatever changed before.
    killed = localise(_crash_looping(("config", "data.application.yaml: cache.size 100 -> 400"), "OOMKilling").items,
                      ["pickr"])
    assert killed.kind != "change.config"


def test_two_specific_kinds_of_one_family_in_a_tie_leave_the_kind_undetermined():
    """A node went NotReady and the pods it lost stay Pending: node trouble or scheduling, the evidence
    weighs both alike, so no kind is named with confidence."""
    results = Results()
    results.metric({"__name__": "http_server_requests_seconds_count", "service": "rankly"},
                   [40.0 * i for i in range(60)])
    results.logs("rankly", [(-3000 + i * 150, "", f"GET /v2/rank 200 in {20 + i} ms") for i in range(15)])
    pods = [{"name": f"rankly-5c9d7b6f4-{pod}", "labels": {"app": "rankly"}, "containers": [
        {"name": "rankly", "restartCount": 0, "state": {"state": "running" if pod == "q8w3n" else "waiting"}}]}
        for pod in ("q8w3n", "a1b2c", "d3e4f", "g5h6i", "j7k8l")]
    results.kubernetes({"pods": pods, "events": [
        {"type": "Warning", "reason": "NodeNotReady", "object": f"pod/rankly-5c9d7b6f4-{pod}", "count": 1,
         "message": "Node is not ready", "firstTimestamp": iso(-1200), "lastTimestamp": iso(-1200)}
        for pod in ("a1b2c", "d3e4f")] + [
        {"type": "Warning", "reason": "FailedScheduling", "object": f"pod/rankly-5c9d7b6f4-{pod}", "count": 9,
         "message": "0/8 nodes are available: 2 Insufficient memory, 6 node(s) had untolerated taint.",
         "firstTimestamp": iso(-1100), "lastTimestamp": iso(-30)} for pod in ("g5h6i", "j7k8l")]}, "rankly")
    found = localise(results.items, ["rankly"])
    top = found.top()
    assert top.service == "rankly"
    assert top.kind_votes["scheduling.pending"] == top.kind_votes["scheduling.node_pressure"]
    assert (found.outcome, found.reason) == ("undetermined", "kind_ambiguous")


def _sparse_fatal(times: list[int]) -> Results:
    results = Results()
    results.logs("pgx-main", [(-3500 + i * 300, "", "LOG:  checkpoint complete: wrote 4921 buffers") for i in range(12)]
                 + [(t, "FATAL", "[35056] app@tiles FATAL:  terminating connection due to idle-session timeout")
                    for t in times])
    results.metric({"__name__": "pg_stat_database_numbackends", "service": "pgx-main"}, [12.0] * 60)
    return results


def test_an_error_that_recurs_at_its_own_sparse_pace_is_routine_not_a_new_failure():
    """PostgreSQL ends an idle session every quarter of an hour with a FATAL line: the first came 8 minutes
    into the hour, too early for its absence before to mean anything. The same lines packed into the last
    minutes after a quiet hour are new."""
    routine = localise(_sparse_fatal([-3114, -2215, -1314, -414]).items, ["pgx-main"])
    assert routine.outcome == "nothing_wrong"
    burst = localise(_sparse_fatal([-500, -390, -280, -170]).items, ["pgx-main"])
    assert (burst.outcome, burst.root) == ("root_cause", "pgx-main")


def test_endpoint_series_of_a_pool_that_stop_when_new_endpoints_take_over_are_a_rollout_not_a_stop():
    """nginx-vts counts per backend address: a rollout replaces every address of the pool, so the old
    series stop as the new ones start. A pool whose series stop with no successor did lose its backends."""
    def pool(successors: bool) -> Results:
        results = Results()
        series = []
        for n, old in enumerate(("10.42.1.57", "10.42.2.23", "10.42.3.88")):
            labels = {"__name__": "nginx_vts_upstream_requests_total", "service": "stampweb", "upstream": "stamp_api",
                      "backend": f"{old}:8080", "code": "2xx"}
            series.append({"labels": labels, "values": [[_at(i), str(30000 + 300 * i)] for i in range(40 + n)]})
            if successors:
                new = dict(labels, backend=f"10.42.{n + 4}.141:8080")
                series.append({"labels": new, "values": [[_at(i), str(300 * (i - 38))] for i in range(39 + n, 60)]})
        results._add("query_metrics", {"service": "stampweb"},
                     {"start": iso(-3600), "end": iso(0), "step": 60, "series": series})
        results.logs("stampweb", [(-3500 + i * 200, "", f"GET /v1/stamps 200 in {20 + i} ms") for i in range(17)])
        return results

    assert localise(pool(successors=True).items, ["stampweb"]).outcome == "nothing_wrong"
    stopped = localise(pool(successors=False).items, ["stampweb"])
    assert stopped.outcome != "nothing_wrong" and any(s.kind == "stopped" for s in stopped.top().faults)


def _at(i: int) -> float:
    """The time of sample ``i`` of an hour of one-minute samples ending now."""
    return (NOW - timedelta(seconds=60 * (59 - i))).timestamp()


def _pods(*pods: tuple[str, str, str]) -> dict:
    return {"pods": [{"name": name, "labels": {"app": app}, "podIP": ip, "containers": [
        {"name": app, "ready": True, "restartCount": 0, "state": {"state": "running"}}]} for name, app, ip in pods]}


def test_a_server_line_giving_its_client_as_host_and_ephemeral_port_names_a_caller():
    """PostgreSQL's "connection received: host=… port=56840" is who connected; libpq's "host=… port=5432"
    in a client's line is where it connected."""
    results = Results()
    results.kubernetes(_pods(("notif-api-6b7c8d9f5-4kx8p", "notif-api", "10.42.4.11"),
                             ("pgn-0", "pgn", "10.42.6.30")))
    results.logs("pgn", [(-3000, "", "2026-11-29 11:10:00.000 UTC [3217] [unknown]@[unknown] LOG:  connection received: "
                                     "host=10.42.4.11 port=56840")])
    results.logs("notif-api", [(-600, "ERROR", "could not connect: host=10.42.6.30 port=5432 dbname=notif: timeout")])
    graph = build_graph(read_evidence(results.items))
    assert ("pgn", "notif-api") not in graph.edges
    assert ("notif-api", "pgn") in graph.edges


def _waited_for(own_metrics: bool) -> Results:
    """prefz's reads from pgz time out and its latency rose; pgz itself shows nothing."""
    results = Results()
    results.kubernetes(_pods(("prefz-7d8c9b6f4-hq2zl", "prefz", "10.42.5.23"), ("pgz-0", "pgz", "10.42.6.30")))
    results.metric({"__name__": "http_request_duration_seconds", "service": "prefz", "quantile": "0.99"},
                   stepped(0.05, 1.4, 44))
    results.logs("prefz", [(-3000 + i * 150, "", f"GET /v1/prefs 200 in {20 + i} ms") for i in range(15)]
                 + [(-880 + i * 60, "ERROR", '{"level":"ERROR","msg":"get prefs","err":"read tcp '
                                            f'10.42.5.23:{41000 + i}->10.42.6.30:5432: i/o timeout"}}')
                    for i in range(14)])
    results.logs("pgz", [(-3400 + i * 600, "", "LOG:  checkpoint complete: wrote 224 buffers") for i in range(6)])
    if own_metrics:
        results.metric({"__name__": "pg_stat_database_xact_commit_total", "service": "pgz"},
                       [1000.0 * i for i in range(60)])
    return results


def test_a_dependency_its_callers_only_waited_for_while_its_own_series_are_flat_is_not_named_with_confidence():
    quiet = localise(_waited_for(own_metrics=True).items, ["prefz"])
    assert (quiet.outcome, quiet.reason) == ("undetermined", "dependency_quiet")
    unread = localise(_waited_for(own_metrics=False).items, ["prefz"])
    assert (unread.outcome, unread.reason) == ("undetermined", "metrics_not_examined")


def _lookups_failing(error: str) -> Results:
    results = Results()
    results.logs("tallyr", [(-3400 + i * 300, "", f"INFO tally.run: batch #{88100 + i} reconciled (2.1s)") for i in range(9)]
                 + [(-780 + i * 60, "ERROR", f"tally.db: connect attempt 3/3 to pgt.ledger.svc.cluster.local:5432 "
                                            f"failed: {error}") for i in range(13)])
    results.metric({"__name__": "tally_batches_behind", "service": "tallyr"}, stepped(0, 14, 47))
    results.logs("pgt", [(-3500 + i * 400, "", "LOG:  checkpoint complete: wrote 512 buffers") for i in range(9)])
    results.metric({"__name__": "pg_stat_database_xact_commit_total", "service": "pgt"}, [900.0 * i for i in range(60)])
    return results


def test_a_lookup_the_resolver_did_not_answer_leaves_the_cluster_dns_to_examine():
    """"Temporary failure in name resolution" (EAI_AGAIN) is the resolver not answering: where that begins is
    the cluster's DNS server or the pod's resolver setting, not the service that asked. A name the resolver
    says does not exist is that service's own."""
    unanswered = localise(_lookups_failing('could not translate host name "pgt.ledger.svc.cluster.local" to '
                                           "address: Temporary failure in name resolution").items, ["tallyr"])
    assert (unanswered.outcome, unanswered.reason, unanswered.kind) == \
        ("undetermined", "resolver_not_examined", "network.dns")
    answered = localise(_lookups_failing('could not translate host name "pgt.ledger.svc.cluster.local" to '
                                         "address: Name or service not known").items, ["tallyr"])
    assert (answered.outcome, answered.root, answered.kind) == ("root_cause", "tallyr", "network.dns")


def _rolled_out(still_failing: bool, errors_stay: bool = False) -> Results:
    """stampy rolled out 20 minutes ago: its new pods failed readiness while warming up, the proxy in front
    logged refused connections to the old pods, and (unless ``still_failing``) all was quiet after."""
    results = Results()
    results.kubernetes({"services": [{"name": "stampy", "namespace": "loyal", "selector": {"app": "stampy"},
                                      "clusterIP": "10.43.9.9", "ports": [{"port": 8080}]}]}, "")
    results.metric({"__name__": "nginx_vts_upstream_requests_total", "service": "stampweb", "upstream": "stampy",
                    "code": "2xx"}, [300.0 * i for i in range(60)])
    burst = [-1170, -1140, -1100] + ([-400, -250, -90] if still_failing else [])
    results.logs("stampweb", [(-3500 + i * 200, "", f'10.42.0.9 - - "GET /v1/stamps HTTP/1.1" 200 {20 + i}')
                              for i in range(17)]
                 + [(t, "ERROR", "[error] 31#31: *1905521 connect() failed (111: Connection refused) while connecting "
                                 "to upstream, upstream: \"http://10.42.1.57:8080/v1/stamps\"") for t in burst])
    results.logs("stampy", [(-3500 + i * 200, "", "GET /v1/stamps 200 in 12 ms") for i in range(17)])
    results._add("query_kubernetes", {"kind": "deployment", "name": "stampy"}, {"pods": [], "events": [
        {"type": "Warning", "reason": "Unhealthy", "object": "pod/stampy-6f7d9c5b8-r2k4m", "count": 4,
         "message": "Readiness probe failed: HTTP probe failed with statuscode: 503",
         "firstTimestamp": iso(-1180), "lastTimestamp": iso(-1120 if not still_failing else -60)},
        {"type": "Normal", "reason": "Killing", "object": "pod/stampy-7c9d8f6b5-x9z8w", "count": 1,
         "message": "Stopping container stampy", "firstTimestamp": iso(-1190), "lastTimestamp": iso(-1190)}]})
    results.changes([(-1200, "stampy", "rollout", "revision 57: image reg.local/stampy:2.31.0 -> reg.local/stampy:2.31.1")])
    if errors_stay:  # the lines stopped, but its callers' error rate stayed up
        results.metric({"__name__": "http_requests_total", "service": "stampy", "code": "500"},
                       [2.0 * i for i in range(40)] + [80.0 + 60.0 * i for i in range(20)])
    return results


def test_a_rollout_whose_pods_warmed_up_and_whose_callers_recovered_is_nothing_wrong():
    """Killing the old pods, readiness failures while the new ones warm up and a proxy's refused connections
    to the old pods' addresses, all within minutes of the rollout and quiet since: how a rollout looks. The
    nginx upstream block named after the service (``stampy`` here, often with underscores) is its edge."""
    assert localise(_rolled_out(still_failing=False).items, ["stampy"]).outcome == "nothing_wrong"
    failing = localise(_rolled_out(still_failing=True).items, ["stampy"])
    assert failing.outcome != "nothing_wrong" and failing.top().service in ("stampy", "stampweb")
    erring = localise(_rolled_out(still_failing=False, errors_stay=True).items, ["stampy"])
    assert erring.outcome != "nothing_wrong" and erring.top().service == "stampy"
    assert any(s.source == "kube" for s in erring.top().faults)  # its restarts stay part of the story


def test_an_upstream_label_spelt_with_underscores_is_the_service():
    results = Results()
    results.logs("perky-api", [(-3000, "", "GET /v1/rewards 200 in 12 ms")])
    results.metric({"__name__": "nginx_vts_upstream_requests_total", "service": "perky-web", "upstream": "perky_api",
                    "code": "2xx"}, [300.0 * i for i in range(60)])
    assert ("perky-web", "perky-api") in build_graph(read_evidence(results.items)).edges
