"""Generic reasoning of the offline analyser on real-format log lines: lead following, durations against
thresholds the question steers, the last-error fallback, anchored change detection, and a symptom-stating
question that is never answered "healthy". Unit level: observations and the localiser's outcome as the
analyser uses it (``localised``), no scenario folder."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from diagnosis.llm.offline.claims import ClaimBook
from diagnosis.llm.offline.leads import duration_s, leads_in, stated_symptom
from diagnosis.llm.offline.lexicon import CHANGE_PATTERNS
from diagnosis.llm.offline.localised import build_claims, localise_results, next_calls
from diagnosis.llm.offline.observations import Observations

NOW = datetime(2026, 11, 30, 11, 0, tzinfo=timezone.utc)
TOOLS = {"query_logs", "query_metrics", "lookup_knowledge", "query_alerts"}


def _at(offset: int) -> str:
    return (NOW + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


def logs(service: str, lines: list[tuple[int, str, str]], inv: str = "inv-00000001") -> dict:
    return {"tool_name": "query_logs", "arguments": {"service": service, "limit": 200}, "status": "SUCCESS",
            "invocation_id": inv, "result": {"records": [
                {"timestamp": _at(off), "service": service, "level": level, "message": message}
                for off, level, message in lines]}}


def metric(service: str, name: str, values: list[float], inv: str = "inv-00000002") -> dict:
    start = -60 * (len(values) - 1)
    points = [[(NOW + timedelta(seconds=start + 60 * i)).timestamp(), v] for i, v in enumerate(values)]
    return {"tool_name": "query_metrics", "arguments": {"service": service}, "status": "SUCCESS", "invocation_id": inv,
            "result": {"series": [{"labels": {"__name__": name, "service": service}, "values": points,
                                   "description": f'{name}{{service="{service}"}} last {values[-1]}'}]}}


def flat(value: float) -> list[float]:
    return [value] * 60


def step(before: float, after: float, at: int = 40) -> list[float]:
    return [before] * at + [after] * (60 - at)


# --------------------------------------------------------------------------- leads


@pytest.mark.parametrize(("message", "own", "expected"), [
    # Go net/http, through the cluster resolver: neither the resolver (an address) nor the name looked up is a lead
    ('Get "https://maps-provider.internal/v2/geocode": dial tcp: lookup maps-provider.internal on 10.96.0.10:53: '
     "server misbehaving", "geo-service", []),  # the resolver is an address: no service name is guessed
    # nginx error log: the upstream's Kubernetes service DNS name
    ('upstream timed out (110: Connection timed out) while reading response header from upstream, client: 10.0.4.2, '
     'server: shop.example.com, request: "POST /api/orders HTTP/1.1", upstream: '
     '"http://order-api.shop.svc.cluster.local:8080/api/orders", host: "shop.example.com"', "storefront", ["order-api"]),
    # JDBC URL in a Spring Boot error
    ("Failed to obtain JDBC Connection from jdbc:mysql://orders-mysql:3306/orders?useSSL=false", "order-api",
     ["orders-mysql"]),
    # zap JSON field with host:port
    ('{"level":"info","msg":"quote computed","db":"billing-pg:5432","duration":"7.8s"}', "quote-api", ["billing-pg"]),
    # an OIDC issuer URL
    ('token validation failed: issuer "https://auth-idp.corp.internal/realms/prod" unreachable', "portal-api",
     ["auth-idp"]),
    # no lead: Java source positions, public hosts, the service itself
    ("at com.shop.order.OrderService.place(OrderService.java:88)", "order-api", []),
    ("POST https://api.stripe.com/v1/charges failed: 502", "pay-api", []),
    ("order-api:8080 is listening", "order-api", []),
])
def test_leads_are_read_from_real_log_lines(message, own, expected):
    dns = "lookup" in message
    assert [lead.service for lead in leads_in(message, own, dns_failure=dns)] == expected


def test_without_the_resolver_evidence_the_reporter_is_not_blamed_on_a_lead_it_did_not_query():
    caller = logs("geo-service", [(-600, "ERROR", "dial tcp: lookup maps.internal on 10.96.0.10:53: no such host")])
    found = localise_results([caller], ["geo-service"])
    assert found.root in (None, "geo-service")  # nothing else was seen: never a service no query examined
    assert not (found.root and found.root.startswith("maps"))


def test_the_next_queries_follow_the_dependency_the_errors_name_and_repeat_none():
    gateway = logs("edge", [(-900, "ERROR", 'upstream timed out (110: Connection timed out), upstream: '
                                           '"http://order-api.shop.svc:8080/api"')])
    api = logs("order-api", [(-950, "ERROR", "Failed to obtain JDBC Connection from jdbc:mysql://orders-mysql:3306/o")],
               inv="inv-00000005")
    calls = next_calls(Observations([gateway, api]), [gateway, api], ["edge"], TOOLS, "")
    assert ("query_metrics", {"service": "order-api"}) in calls  # the dependency edge's errors name
    assert ("query_logs", {"service": "order-api", "limit": 200}) not in calls  # already read
    assert not [c for c in calls if c[1].get("service") == "edge"]


def test_an_ip_in_the_errors_is_looked_up_in_the_clusters_services_and_the_service_there_followed_next():
    """An error line names its dependency by an IP only: the next round reads the cluster's Services (the
    address book), and the round after follows the service that answers at that IP."""
    tools = TOOLS | {"query_kubernetes"}
    caller = logs("vendrix", [(-3000 + 60 * i, "INFO", f"GET /v1/parcels 200 in {20 + i % 5} ms") for i in range(40)]
                  + [(-600 + 30 * i, "ERROR", "dial tcp 10.244.61.9:7070: i/o timeout") for i in range(12)])
    first = next_calls(Observations([caller]), [caller], ["vendrix"], tools, "")
    assert first[0] == ("query_kubernetes", {"kind": "service"})
    book = {"tool_name": "query_kubernetes", "arguments": {"kind": "service"}, "status": "SUCCESS",
            "invocation_id": "inv-00000007", "result": {"pods": [], "events": [], "services": [
                {"name": "brasko", "namespace": "tovra", "clusterIP": "10.96.14.3", "selector": {"app": "brasko"},
                 "endpoints": [{"ip": "10.244.61.9", "pod": "brasko-6c8d9f7b4-q7w2z"}]}]}}
    results = [caller, book]
    second = next_calls(Observations(results), results, ["vendrix"], tools, "")
    assert ("query_logs", {"service": "brasko", "limit": 200}) in second
    assert ("query_kubernetes", {"kind": "service"}) not in second  # asked once


@pytest.mark.parametrize(("question", "expected"), [
    ("Please diagnose ledazai9.", ["ledazai9"]),  # a numbered name is a host or workload name
    ("web01 and api-gateway time out", ["web01", "api-gateway"]),
    ("Why is checkout failing after the python3 upgrade?", []),  # a versioned technology is not
    ("Is p99 latency of order-api high?", ["order-api"]),
    # a hyphenated English phrase is a feature or a process, not a name
    ("Pay-on-delivery is broken: quellbay-cart answers 502. Why?", ["quellbay-cart"]),
    ("The pay-as-you-go meter and store-to-door-api both fail", ["store-to-door-api"]),
])
def test_hyphenated_and_numbered_names_are_read_from_the_question(question, expected):
    from diagnosis.llm.offline.lexicon import services_in_question

    assert services_in_question(question) == expected


@pytest.mark.parametrize(("question", "expected"), [
    ("Users report failures on trovaskel. What is going on?", ["trovaskel"]),  # no English word: a name
    ("Plimbero 为什么在报错？", ["plimbero"]),
    ("Is the kubelet dropping pods for brenn-api?", ["kubelet", "brenn-api"]),  # a component asked about by name
    ("Why is checkout failing after the rollout?", []),  # a word: read only once the evidence knows it
    ("Why are pods OOMKilled in namespace dafoshir?", []),  # a Kubernetes reason; a namespace names where
    ("Why is the database slow and the latency high since the failover?", []),
])
def test_a_plain_word_that_is_no_english_word_is_read_as_a_name(question, expected):
    from diagnosis.llm.offline.lexicon import services_in_question

    assert services_in_question(question) == expected


def test_a_plain_name_in_the_question_is_read_once_the_evidence_knows_a_service_of_that_name():
    caller = logs("povrik", [(-300, "ERROR", "request to krelmas failed: dial tcp krelmas:3000: i/o timeout")])
    obs = Observations([caller])
    assert obs.services_named_in("Please diagnose krelmas.") == ["krelmas"]  # a host an error names
    assert obs.services_named_in("Please diagnose povrik and krelmas.") == ["povrik", "krelmas"]
    assert obs.services_named_in("Please diagnose the cache.") == []  # a word no record knows is no service


def test_a_plain_name_the_cluster_declares_as_a_service_is_read_from_the_question():
    book = {"tool_name": "query_kubernetes", "arguments": {"kind": "service"}, "status": "SUCCESS",
            "invocation_id": "inv-00000009", "result": {"pods": [], "events": [], "services": [
                {"name": "matrax", "clusterIP": "10.96.3.4", "selector": {"app": "matrax"}, "endpoints": []}]}}
    assert Observations([]).services_named_in("matrax has been misbehaving. What is the root cause?") == []
    obs = Observations([book])
    assert obs.services_named_in("matrax has been misbehaving. What is the root cause?") == ["matrax"]
    assert obs.services_named_in("Is the matrix healthy?") == []


def test_a_stated_symptom_the_asked_service_does_not_show_is_followed_to_the_firing_alert():
    tools = TOOLS | {"query_kubernetes"}
    quiet = logs("sorvane", [(-3000 + 60 * i, "INFO", f"GET /v1/carts 200 in {20 + i % 5} ms") for i in range(40)])
    alerts = {"tool_name": "query_alerts", "arguments": {}, "status": "SUCCESS", "invocation_id": "inv-00000003",
              "result": {"alerts": [{"labels": {"alertname": "HighErrorRate", "service": "belquist", "severity": "critical"},
                                     "annotations": {"summary": "belquist: 5xx above objective"}, "state": "firing",
                                     "activeAt": _at(-900)}]}}
    results = [alerts, quiet]
    question = "sorvane is failing, find the cause"
    first = next_calls(Observations(results, question), results, ["sorvane"], tools, question)
    # Its own Kubernetes state first: a container that restarts may leave no line of its own.
    assert first == [("query_kubernetes", {"kind": "deployment", "name": "sorvane"})]
    state = {"tool_name": "query_kubernetes", "arguments": {"kind": "deployment", "name": "sorvane"}, "status": "SUCCESS",
             "invocation_id": "inv-00000004", "result": {"pods": [{"name": "sorvane-7d4f9c-x2k8p", "phase": "Running",
                                                                 "restarts": 0, "ready": True}], "events": []}}
    results = [alerts, quiet, state]
    stated = next_calls(Observations(results, question), results, ["sorvane"], tools, question)
    assert ("query_logs", {"service": "belquist", "limit": 200}) in stated
    healthy = next_calls(Observations(results, "Is sorvane healthy?"), results, ["sorvane"], tools, "Is sorvane healthy?")
    assert not [c for c in healthy if c[1].get("service") == "belquist"]  # no symptom stated: no other alert


def test_the_leads_come_before_the_leading_candidates_kubernetes_state_and_runbooks():
    tools = TOOLS | {"query_kubernetes"}
    caller = logs("vendrix", [(-3000 + 60 * i, "INFO", f"GET /v1/parcels 200 in {20 + i % 5} ms") for i in range(40)]
                  + [(-600 + 30 * i, "ERROR", "dial tcp brasko.tovra.svc.cluster.local:7070: i/o timeout") for i in range(12)])
    errors = metric("vendrix", "http_server_errors_ratio", step(0.001, 0.4), inv="inv-00000004")
    results = [caller, errors]
    assert localise_results(results, ["vendrix"]).top().service == "vendrix"
    calls = next_calls(Observations(results), results, ["vendrix"], tools, "")
    assert ("query_logs", {"service": "brasko", "limit": 200}) in calls
    assert not [c for c in calls if c[0] in ("query_kubernetes", "lookup_knowledge")], calls
    examined = results + [logs("brasko", [(-3000 + 60 * i, "INFO", f"GET /v1/rates 200 in {9 + i % 3} ms")
                                          for i in range(40)], inv="inv-00000005"),
                          metric("brasko", "http_server_errors_ratio", [0.001] * 60, inv="inv-00000006")]
    last = next_calls(Observations(examined), examined, ["vendrix"], tools, "")
    assert ("query_kubernetes", {"kind": "deployment", "name": "vendrix"}) in last  # the chain has ended


def test_a_decisive_localisation_reads_the_runbooks_for_its_kind_before_further_leads():
    tools = TOOLS | {"query_kubernetes"}
    own = logs("vendrix", [(-3000 + 60 * i, "INFO", f"GET /v1/parcels 200 in {20 + i % 5} ms") for i in range(40)]
               + [(-600 + 30 * i, "ERROR", "dial tcp brasko.tovra.svc.cluster.local:7070: i/o timeout") for i in range(12)]
               + [(-900 + 30 * i, "ERROR", "java.lang.OutOfMemoryError: Java heap space") for i in range(12)])
    memory = metric("vendrix", "jvm_memory_used_bytes", [1e8] * 30 + [1e8 + 3e7 * i for i in range(30)], inv="inv-00000004")
    results = [own, memory]
    assert localise_results(results, ["vendrix"]).decisive
    calls = next_calls(Observations(results), results, ["vendrix"], tools, "")
    # The advice for the fault found comes first (a run whose budget ends on the chain still has it) ...
    assert calls[0] == ("lookup_knowledge", {"query": "vendrix memory exhaustion (leak or out-of-memory kill) remediation fix",
                                             "top_k": 5})
    assert ("query_logs", {"service": "brasko", "limit": 200}) in calls  # ... then the leads
    looked = results + [{"tool_name": "lookup_knowledge", "arguments": calls[0][1], "status": "SUCCESS",
                         "invocation_id": "inv-00000005", "result": {"results": []}}]
    again = next_calls(Observations(looked), looked, ["vendrix"], tools, "")
    assert not [c for c in again if c[0] == "lookup_knowledge"]  # once


# --------------------------------------------------------------------------- durations and thresholds


@pytest.mark.parametrize(("message", "seconds"), [
    ("Database call completed in 10.01 s", 10.01),
    ('{"level":"info","msg":"quote computed","duration":"7.8s"}', 7.8),
    ("2026-11-30 10:05:12.441 UTC [5120] LOG:  duration: 8841.227 ms  statement: SELECT 1", 8.841227),
    ('{"msg":"geocode ok","latency_ms":80}', 0.08),
    ("积分查询完成 userId=12345 耗时=12ms", 0.012),
    ("Rendered invoice INV-2026-118812 (3 pages) in 11.87 s", 11.87),
    ("GET /api/orders 200", None),
    ("retried after 3 attempts", None),
])
def test_durations_written_in_log_lines_are_read_in_seconds(message, seconds):
    found = duration_s(message)
    assert (found is None and seconds is None) or found == pytest.approx(seconds)


def _slow_service(seconds: float) -> dict:
    return logs("ledger-api", [(-1800 + 60 * i, "INFO", f"Database call completed in {seconds:.2f} s") for i in range(30)])


def test_an_absolute_threshold_flags_info_lines_even_without_a_stated_symptom():
    obs = Observations([_slow_service(10.01)], "Is ledger-api healthy?")
    assert obs.profiles["ledger-api"].slow and obs.profiles["ledger-api"].has_signal


def test_a_stated_latency_symptom_lowers_the_threshold():
    two_seconds = _slow_service(2.0)
    assert not Observations([two_seconds], "Is ledger-api healthy?").profiles["ledger-api"].slow
    assert Observations([two_seconds], "Why is ledger-api so slow?").profiles["ledger-api"].slow
    assert not Observations([_slow_service(0.3)], "Why is ledger-api so slow?").profiles["ledger-api"].slow


@pytest.mark.parametrize("message", ["Started OrderApplication in 4.512 seconds (process running for 5.1)",
                                     "connection to redis-cache:6379 lost, retrying in 5 s",
                                     "next run in 10 minutes", "session token expires in 300 s"])
def test_start_up_times_back_offs_and_schedules_are_not_slow_work(message):
    lines = logs("ledger-api", [(-1800 + 60 * i, "INFO", message) for i in range(30)])
    assert not Observations([lines], "Why is ledger-api so slow?").profiles["ledger-api"].slow


def test_a_slow_caller_is_traced_to_the_database_its_slow_lines_name():
    caller = logs("quote-api", [(-1500 + 70 * i, "INFO", f'{{"msg":"quote computed","db":"rates-pg:5432","duration":"{8 + i % 2}.1s"}}')
                                for i in range(20)])
    db = logs("rates-pg", [(-1510 + 140 * i, "INFO", f"[51{i:02d}] LOG:  process 51{i:02d} still waiting for ShareLock on "
                                                    "transaction 884213 after 1000.052 ms") for i in range(10)], inv="inv-00000007")
    locks = metric("rates-pg", "pg_locks_waiting", step(0.0, 12.0, 35), inv="inv-00000008")
    found = localise_results([caller, db, locks], ["quote-api"])
    assert found.root == "rates-pg" or (found.outcome == "undetermined" and found.top().service == "rates-pg")


def _firing(service: str) -> dict:
    return {"tool_name": "query_alerts", "arguments": {}, "status": "SUCCESS", "invocation_id": "inv-00000003",
            "result": {"alerts": [{"labels": {"alertname": "LatencyObjectiveBreach", "service": service},
                                   "annotations": {"summary": f"{service}: p99 above objective"}, "state": "firing",
                                   "activeAt": _at(-900)}]}}


def test_a_stated_symptom_that_nothing_shows_is_nothing_wrong_unless_an_alert_is_firing():
    """Quiet telemetry, no error line and no firing alert answer "why is it failing?" too: nothing wrong was
    found. A firing alert is trouble the telemetry read here does not show: undetermined, with the alert cited."""
    quiet = [logs("cart-api", [(-60 * i, "INFO", "GET /cart 200 in 12 ms") for i in range(30)]),
             metric("cart-api", "http_server_errors_ratio", flat(0.002))]
    found = localise_results(quiet, ["cart-api"])
    assert found.outcome == "nothing_wrong"
    stated = ClaimBook()
    assert "nothing wrong" in build_claims(Observations(quiet), found, stated, "en", stated_symptom=True)
    assert stated.claims[0]["statement"].startswith("No anomaly found")
    for elsewhere, symptom in (("trovik", True), ("cart-api", False)):
        alerted = [*quiet, _firing(elsewhere)]
        found = localise_results(alerted, ["cart-api"])
        assert found.outcome == "nothing_wrong"
        book = ClaimBook()
        assert "undetermined" in build_claims(Observations(alerted), found, book, "en", stated_symptom=symptom)
        assert not any(c["statement"].startswith("No anomaly found") for c in book.claims)
        assert any(c["statement"].startswith("Alert LatencyObjectiveBreach is firing") for c in book.claims)
    alerted = [*quiet, _firing("trovik")]  # "is it healthy?" is about the asked service: another's alert is its own
    book = ClaimBook()
    assert "nothing wrong" in build_claims(Observations(alerted), localise_results(alerted, ["cart-api"]), book, "en",
                                           stated_symptom=False)
    assert stated_symptom("cart-api 为什么一直报错？").failure and not stated_symptom("cart-api 正常吗？").stated
    assert stated_symptom("What is wrong with cart-api?").failure and stated_symptom("cart-api 出了什么问题？").failure
    assert not stated_symptom("Is anything wrong with cart-api right now?").stated


# --------------------------------------------------------------------------- anchored change detection


def _is_change(text: str) -> bool:
    return any(p.search(text) for p in CHANGE_PATTERNS)


@pytest.mark.parametrize("text", [
    "2026/11/30 10:20:01 [notice] 1#1: signal 1 (SIGHUP) received from 2301, reconfiguring",
    "LOG:  received SIGHUP, reloading configuration files",
    'deployment "order-api" successfully rolled out',
    "Feature flag 'pdf.embed_full_fonts' changed from off to on (by release-bot)",
    "Applying migration 0042_add_index... OK",
    "配置已重新加载", "发布新版本 v2.3.1",
])
def test_reloads_rollouts_flag_flips_and_migrations_are_changes(text):
    assert _is_change(text)


@pytest.mark.parametrize("text", [
    "Started OrderApplication in 4.512 seconds (process running for 5.1)",
    "Tomcat started on port 8080 (http) with context path ''",
    "[2026-11-30 10:20:02 +0000] [1] [INFO] Listening at: http://0.0.0.0:8000 (1)",
    "Rollout of the new UI is described at https://wiki.example.com/ui",
    "batch of 500 records started processing",
    "发布消息到 topic orders 成功", "上线用户数 1203",
])
def test_start_up_lines_and_words_that_merely_mention_a_release_are_not_changes(text):
    assert not _is_change(text)


def test_a_start_up_banner_does_not_become_the_trigger_of_an_incident():
    lines = [(-2000, "WARN", "WARNING: This is a development server. Do not use it in a production deployment."),
             (-1990, "INFO", "Started OrderApplication in 4.512 seconds (process running for 5.1)")]
    lines += [(-1500 + 60 * i, "ERROR", "Connection refused: connect to 10.0.0.9:6379") for i in range(10)]
    found = localise_results([logs("order-api", lines)], ["order-api"])
    assert found.changes_before() == []


# --------------------------------------------------------------------------- alert analysis and Kubernetes


def _aiops_first_round(alerts: list[dict]) -> list[tuple[str, dict]]:
    from diagnosis.llm.base import ChatRequest
    from diagnosis.llm.offline import OfflineAnalyser
    from diagnosis.tools.registry import openai_tool_specs

    reply = OfflineAnalyser().complete(ChatRequest(
        role="aiops", messages=[{"role": "user", "content": "execute"}], tools=openai_tool_specs(),
        structured_input={"phase": "execute", "language": "en", "alerts": alerts, "tool_budget": 6,
                          "task": {"task_id": "t1", "service": "points-api", "alert_ids": ["a1"]}}))
    return [(c.name, c.arguments) for c in reply.tool_calls]


def test_an_alert_naming_a_pod_makes_the_alert_analysis_read_its_kubernetes_state():
    alert = {"alert_id": "a1", "labels": {"alertname": "KubePodCrashLooping", "service": "points-api", "severity": "critical",
                                          "namespace": "loyalty", "pod": "points-api-5c8d7b9f4-x7kqp", "job": "kube-state-metrics"},
             "annotations": {"summary": "Pod is crash looping"}, "state": "firing"}
    calls = _aiops_first_round([alert])
    assert ("query_kubernetes", {"kind": "pod", "name": "points-api-5c8d7b9f4-x7kqp", "namespace": "loyalty"}) in calls
    plain = {**alert, "labels": {k: v for k, v in alert["labels"].items() if k not in ("pod", "namespace")}}
    assert not [c for c in _aiops_first_round([plain]) if c[0] == "query_kubernetes"]  # `job` is the scrape job


def test_the_node_a_quiet_dependency_runs_on_is_read_once_no_lead_is_left():
    """A caller's pool runs dry waiting on a dependency: its logs and series come first; once they show nothing,
    the node it runs on (from the address book) and a pod there whose hostIP is the node's address."""
    from tests.localisation.test_below import NODE, _pool_caller_and_a_quiet_database

    tools = TOOLS | {"query_kubernetes"}
    everything = [dict(item, status="SUCCESS") for item in _pool_caller_and_a_quiet_database().items]
    unexamined = [i for i in everything if i["arguments"].get("service") != "quastor"]
    first = next_calls(Observations(unexamined), unexamined, ["fobrel"], tools, "")
    assert ("query_logs", {"service": "quastor", "limit": 200}) in first
    assert not [c for c in first if "query" in c[1] or c[1].get("kind") == "pod"], first
    last = next_calls(Observations(everything), everything, ["fobrel"], tools, "")
    assert last[:2] == [("query_metrics", {"query": f'{{node="{NODE}"}}'}),
                        ("query_kubernetes", {"kind": "pod", "name": "quastor-0"})]


@pytest.mark.parametrize(("question", "stated"), [
    ("pelvo has been misbehaving for about 28 minutes. What is the root cause?", True),
    ("Investigate pelvo: alerts started firing roughly 30 minutes ago.", True),
    ("We got paged for pelvo, it is acting up", True),
    ("What is the root cause of the pelvo incident?", True),
    ("pelvo 大约 20 分钟前开始告警，根因是什么？", True),
    ("Is pelvo healthy?", False),
    ("How many replicas does pelvo run?", False),
])
def test_a_question_that_presupposes_trouble_states_a_symptom(question, stated):
    """Only a question that states a symptom can never be answered "nothing wrong" (``build_claims``)."""
    assert stated_symptom(question).stated is stated


def test_a_service_both_asked_about_and_alerting_is_queried_once():
    tools = TOOLS | {"query_kubernetes"}
    question = "Investigate pelvo: alerts started firing roughly 16 minutes ago."
    alerts = {"tool_name": "query_alerts", "arguments": {}, "status": "SUCCESS", "invocation_id": "inv-00000001",
              "result": {"alerts": [{"labels": {"alertname": "HighErrorRate", "service": "pelvo", "severity": "critical"},
                                     "annotations": {"summary": "pelvo: 5xx above objective"}, "state": "firing",
                                     "activeAt": _at(-900)}]}}
    calls = next_calls(Observations([alerts], question), [alerts], ["pelvo"], tools, question)
    assert calls.count(("query_logs", {"service": "pelvo", "limit": 200})) == 1, calls


def test_the_kubernetes_state_of_a_service_that_went_away_and_the_clusters_services_are_read_when_asked_for():
    from tests.localisation.test_below import _callers_of_a_service_that_went_away, _certificate_of_an_outside_host

    tools = TOOLS | {"query_kubernetes"}
    gone = [dict(item, status="SUCCESS") for item in _callers_of_a_service_that_went_away(None).items]
    assert ("query_kubernetes", {"kind": "deployment", "name": "orrin"}) in next_calls(
        Observations(gone), gone, ["baltic"], tools, "")
    outside = [dict(item, status="SUCCESS") for item in _certificate_of_an_outside_host(None).items]
    assert ("query_kubernetes", {"kind": "service"}) in next_calls(Observations(outside), outside, ["sivet"], tools, "")
