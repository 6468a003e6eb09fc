"""What a service's lines relay from elsewhere (docs/EVALUATION.md, "A second set written by someone else"):
a server's refusal, a rate limit and the reason it gives, a browser's version, and error lines that kept one
pace all along. Each test holds one general rule in names and words no scenario uses."""

from diagnosis.llm.offline.localised import follow_ups
from diagnosis.localisation.graph import build_graph
from diagnosis.localisation.kinds import change_kind, own_words, word_votes
from diagnosis.localisation.outcome import localise
from diagnosis.localisation.records import read_evidence
from tests.localisation.support import Results, flat, stepped

ALL_TOOLS = {"query_logs", "query_metrics", "query_kubernetes", "query_traces", "query_changes", "lookup_knowledge"}


def _failing(service: str, lines: list[str]) -> Results:
    """A service whose errors start 20 minutes ago, with the lines it writes then."""
    results = Results()
    results.metric({"__name__": "http_server_requests_seconds_count", "service": service, "status": "500"},
                   [float(i) for i in range(40)] + [40.0 + 30 * i for i in range(20)])
    quiet = [(-3500 + 300 * i, "INFO", f"GET /v2/ledgers/{i} 200") for i in range(10)]
    errors = [(-1200 + 60 * i, "ERROR", line) for i in range(18) for line in lines]
    return results.logs(service, quiet + errors)


def test_a_servers_connection_limit_in_a_clients_lines_is_the_databases_fault_not_the_clients_pool():
    """"Remaining connection slots" is the server refusing; the client's pool runs dry because of it. Which
    database, and who holds its slots, no record here says: undetermined, never the client at PASS."""
    relayed = localise(_failing("mossgate", [
        "SqlExceptionHelper : FATAL: remaining connection slots are reserved for non-replication superuser connections",
        "GET /v2/ledgers/77 -> 500: SQLTransientConnectionException: corepool - Connection is not available, "
        "request timed out after 30000ms"]).items, ["mossgate"])
    assert (relayed.outcome, relayed.reason) == ("undetermined", "dependency_not_identified")
    assert relayed.top().kind == "dependency.database"
    own_pool = localise(_failing("mossgate", [
        "GET /v2/ledgers/77 -> 500: SQLTransientConnectionException: corepool - Connection is not available, "
        "request timed out after 30000ms"]).items, ["mossgate"])
    assert own_pool.top().kind == "resource.pool"


def test_the_reason_a_rate_limit_gives_is_the_answerers_not_the_callers():
    line = ('msg="bulk write failed" status=429 reason="[TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage '
            'watermark, index has read-only-allow-delete block]"')
    assert word_votes(line).get("resource.disk"), "the answerer's disk, as its callers quote it"
    assert not own_words(line).get("resource.disk") and own_words(line).get("capacity.rate_limit")
    for full in ("high disk watermark [90%] exceeded on node", "disk usage exceeded 95% on /var/lib/data",
                 "node is low on disk"):
        assert word_votes(full).get("resource.disk"), full


def test_a_rate_limit_only_the_limited_service_reports_names_no_one_with_confidence():
    limited = localise(_failing("quillon", ['msg="push failed" status=429 body="Too Many Requests" retry_after=4']).items,
                       ["quillon"])
    assert (limited.outcome, limited.reason) == ("undetermined", "dependency_not_identified")
    limiter = localise(_failing("quillon", ["local rate limit of 200 req/s reached, rejecting with 429"]).items,
                       ["quillon"])
    assert (limiter.outcome, limiter.root, limiter.kind) == ("root_cause", "quillon", "capacity.rate_limit")


def test_a_browsers_version_is_neither_a_deploy_nor_an_address():
    line = ('10.4.0.7 - - [05/Dec/2026:07:10:00 +0000] "GET /statements/S-1/pdf HTTP/1.1" 503 1423 "-" '
            '"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0 Version/17.4 Safari/605.1.15"')
    assert not word_votes(line).get("change.deploy")
    assert word_votes("rolled out version 4.2 of the ledger").get("change.deploy")
    results = Results().logs("tallyweb", [(-600, "ERROR", line), (-500, "ERROR", "upstream ledgr:8080 refused")])
    graph = build_graph(read_evidence(results.items))
    assert [address for address, _ref in graph.unresolved["tallyweb"]] == ["ledgr"]


def test_error_lines_that_kept_one_pace_all_hour_are_judged_by_it():
    """Twelve 503s an hour, every hour: the first came early in the window, but the pace never changed."""
    def healthy(lines) -> Results:
        results = Results()
        results.metric({"__name__": "http_server_requests_seconds_count", "service": "cobbler"},
                       [100.0 * i for i in range(60)])
        results.metric({"__name__": "process_resident_memory_bytes", "service": "cobbler"}, flat(2.1e8))
        return results.logs("cobbler", lines)
    steady = [(-3400 + 290 * i, "ERROR", '"GET /feed HTTP/1.1" 503 UC upstream_reset_before_response_started') for i in range(12)]
    routine = [(-3550 + 200 * i, "INFO", "GET /feed 200") for i in range(17)]
    assert localise(healthy(steady + routine).items, ["cobbler"]).outcome == "nothing_wrong"
    # The same lines in the window's first minutes only: no history before them, no pace to judge them by.
    early = [(-3500 + 30 * i, "ERROR", '"GET /feed HTTP/1.1" 503 UC upstream_reset_before_response_started') for i in range(12)]
    judged = localise(healthy(early + routine).items, ["cobbler"])
    assert (judged.outcome, judged.reason) == ("undetermined", "no_baseline")


def test_an_asked_service_that_fails_while_nothing_says_what_it_calls_has_its_traces_read():
    results = Results()
    results.metric({"__name__": "http_server_requests_seconds_count", "service": "gannet", "code": "503"},
                   stepped(1.0, 40.0, 40))
    results.logs("gannet", [(-3500 + 300 * i, "INFO", "GET /invoice 200") for i in range(10)]
                 + [(-1100 + 60 * i, "ERROR", "Service Unavailable: /invoice/INV-7/download") for i in range(15)])
    loc = localise(results.items, ["gannet"])
    assert ("query_traces", {"service": "gannet"}) in follow_ups(loc, set(), ALL_TOOLS, 3)
    assert ("query_traces", {"service": "gannet"}) not in follow_ups(loc, set(), ALL_TOOLS - {"query_traces"}, 3)
    named = Results()
    named.items.extend(results.items)
    named.logs("gannet", [(-1000, "ERROR", "GET http://pdfwright:8080/render failed: connection refused")])
    assert ("query_traces", {"service": "gannet"}) not in follow_ups(localise(named.items, ["gannet"]), set(), ALL_TOOLS, 3)


def test_a_releases_own_note_does_not_say_what_kind_of_change_it_was():
    assert change_kind("rollout", 'quayside 7.2.1 -> 7.3.0 ("hide the loyalty flag for guests")') == "change.deploy"
    assert change_kind("config", 'ConfigMap quayside-flags: loyalty.flag false -> true') == "change.flag"


def test_a_server_saying_its_client_gave_up_reports_the_callers_deadline_not_its_own_fault():
    results = Results()
    results.metric({"__name__": "grpc_server_handled_total", "service": "pennyrate"}, [300.0 * i for i in range(60)])
    results.logs("pennyrate", [(-3500 + 300 * i, "INFO", "Quote served in 170 ms") for i in range(12)]
                 + [(-1100 + 40 * i, "WARN", "Quote finished in 171 ms but the call was already cancelled by the client "
                                             "(CANCELLED)") for i in range(25)]
                 + [(-1000 + 45 * i, "ERROR", "stream closed: client disconnected before the response") for i in range(20)])
    assert localise(results.items, ["pennyrate"]).outcome == "nothing_wrong"


def test_a_general_kind_just_behind_a_specific_one_is_how_it_shipped_not_a_rival():
    """A release that renamed a column: the deploy before it and the missing column are one story."""
    results = _failing("ferrule", ['PG::UndefinedColumn: ERROR:  column bookings.guest_mail does not exist'])
    results.changes([(-1500, "ferrule", "rollout", "ferrule 3.1.0 -> 3.2.0 (migration 0042 renames bookings.guest_mail)")])
    loc = localise(results.items, ["ferrule"])
    votes = loc.top().kind_votes
    assert votes["change.deploy"] * 1.25 > votes["data.schema"] > votes["change.deploy"], "a close runner-up"
    assert (loc.outcome, loc.root, loc.kind) == ("root_cause", "ferrule", "data.schema")


def test_a_quiet_dependency_waited_for_by_the_one_caller_that_just_changed_points_at_that_change():
    """The callee answers as fast as ever; its caller's deadline was cut just before the waits began."""
    results = Results()
    results.changes([(-1500, "tollgate", "config", "ConfigMap tollgate-settings: RATES_DEADLINE 2s -> 200ms")])
    results.metric({"__name__": "http_requests_total", "service": "tollgate", "code": "503"}, stepped(0.5, 30.0, 35))
    results.logs("tollgate", [(-3500 + 300 * i, "INFO", "GET /quote 200") for i in range(10)]
                 + [(-1400 + 50 * i, "ERROR", "GetRate to lodefx:9090 failed: code = DeadlineExceeded desc = context "
                                              "deadline exceeded") for i in range(25)])
    results.metric({"__name__": "grpc_server_handling_seconds_sum", "service": "lodefx"}, [17.0 * i for i in range(60)])
    results.logs("lodefx", [(-3500 + 200 * i, "INFO", "Quote served in 170 ms") for i in range(17)])
    loc = localise(results.items, ["tollgate"])
    assert (loc.outcome, loc.root, loc.kind) == ("root_cause", "tollgate", "change.config")
