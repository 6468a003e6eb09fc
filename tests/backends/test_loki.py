"""LokiBackend against recorded Loki responses served by a local HTTP server."""

from __future__ import annotations

import calendar
import time
from datetime import datetime, timedelta, timezone

import pytest

from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.loki import LokiBackend, build_logql, detect_level, ns_to_iso

from .conftest import free_port

PATH = "/loki/api/v1/query_range"
START = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)
END = START + timedelta(minutes=5)


def test_a_streams_response_becomes_records_oldest_first_with_levels(http_server):
    http_server.respond_with_recording(PATH, "loki_streams.json")

    result = LokiBackend(http_server.url).query_logs(service="checkout", start=START, end=END)

    assert result == {
        "backend": "loki",
        "service": "checkout",
        "query": '{service="checkout"}',
        "start": "2026-11-29T10:00:00Z",
        "end": "2026-11-29T10:05:00Z",
        "total": 5,
        "records": [
            {"timestamp": "2026-11-29T10:00:00Z", "service": "checkout", "level": "UNKNOWN",
             "message": "starting checkout worker"},
            {"timestamp": "2026-11-29T10:00:01Z", "service": "checkout", "level": "ERROR",
             "message": "payment gateway timeout after 5000ms"},
            {"timestamp": "2026-11-29T10:00:30.123456789Z", "service": "checkout", "level": "WARN",
             "message": 'level=warn msg="retrying payment" attempt=2'},
            {"timestamp": "2026-11-29T10:00:45Z", "service": "checkout", "level": "INFO",
             "message": '{"msg":"order accepted","order":"A-17"}'},
            {"timestamp": "2026-11-29T10:01:00.250Z", "service": "checkout", "level": "ERROR",
             "message": "payment gateway timeout after 5000ms"},
        ],
    }
    [request] = http_server.requests
    assert request["params"]["direction"] == "backward"
    assert request["params"]["limit"] == "50"


def test_the_limit_keeps_the_newest_entries_across_streams(http_server):
    http_server.respond_with_recording(PATH, "loki_streams.json")

    result = LokiBackend(http_server.url).query_logs(service="checkout", start=START, end=END, limit=2)

    assert http_server.requests[0]["params"]["limit"] == "2"
    assert [r["timestamp"] for r in result["records"]] == ["2026-11-29T10:00:45Z", "2026-11-29T10:01:00.250Z"]
    assert result["total"] == 2


def test_the_query_words_become_escaped_line_filters_exactly(http_server):
    http_server.respond_with_recording(PATH, "loki_streams.json")

    result = LokiBackend(http_server.url).query_logs(
        service='check"out', query='timeout "connection refused" C:\\temp timeout', start=START, end=END
    )

    expected = '{service="check\\"out"} |= "timeout" |= "connection refused" |= "C:\\\\temp"'
    assert http_server.requests[0]["params"]["query"] == expected
    assert result["query"] == expected


def test_without_a_service_the_selector_matches_any_service_label():
    assert build_logql(None, "oom") == '{service=~".+"} |= "oom"'
    assert build_logql("api", None, service_label="app") == '{app="api"}'


def test_start_and_end_are_sent_as_integer_nanoseconds(http_server):
    http_server.respond_with_recording(PATH, "loki_streams.json")
    start = datetime(2026, 11, 29, 18, 0, tzinfo=timezone(timedelta(hours=8)))  # 10:00Z
    end = datetime(2026, 11, 29, 10, 30, 0, 123456, tzinfo=timezone.utc)

    result = LokiBackend(http_server.url).query_logs(service="checkout", start=start, end=end)

    params = http_server.requests[0]["params"]
    expected_start = calendar.timegm((2026, 11, 29, 10, 0, 0)) * 10**9
    assert params["start"] == str(expected_start) == "1795946400000000000"
    assert params["end"] == str(expected_start + 30 * 60 * 10**9 + 123456 * 1000)
    assert result["start"] == "2026-11-29T10:00:00Z"
    assert result["end"] == "2026-11-29T10:30:00.123456Z"


def test_the_default_window_is_the_last_60_minutes(http_server):
    http_server.respond_with_recording(PATH, "loki_streams.json")

    LokiBackend(http_server.url).query_logs(service="checkout")

    params = http_server.requests[0]["params"]
    assert int(params["end"]) - int(params["start"]) == 3600 * 10**9
    assert abs(int(params["end"]) / 1e9 - time.time()) < 5


def test_the_tenant_is_sent_as_x_scope_orgid(http_server):
    http_server.respond_with_recording(PATH, "loki_streams.json")

    LokiBackend(http_server.url, tenant="team-a").query_logs(service="checkout")
    LokiBackend(http_server.url).query_logs(service="checkout")

    with_tenant, without_tenant = http_server.requests
    assert with_tenant["headers"]["x-scope-orgid"] == "team-a"
    assert "x-scope-orgid" not in without_tenant["headers"]


def test_a_plain_text_400_is_a_backend_error_with_the_body(http_server):
    http_server.respond_with_recording(PATH, "loki_400_parse_error.txt", status=400)

    with pytest.raises(BackendError) as info:
        LokiBackend(http_server.url).query_logs(service="checkout", query="x")
    assert str(info.value) == (
        "loki query failed (HTTP 400): parse error at line 1, col 21: "
        "syntax error: unexpected IDENTIFIER, expecting STRING"
    )


def test_a_500_is_a_backend_error_with_the_body(http_server):
    http_server.respond_with_recording(PATH, "loki_500.txt", status=500)

    with pytest.raises(BackendError, match=r"HTTP 500\): rpc error: code = Unavailable"):
        LokiBackend(http_server.url).query_logs(service="checkout")


def test_a_long_error_body_is_truncated(http_server):
    http_server.respond(PATH, "x" * 20000, status=500)

    with pytest.raises(BackendError) as info:
        LokiBackend(http_server.url).query_logs(service="checkout")
    assert len(str(info.value)) < 600


def test_a_matrix_result_for_a_log_query_is_a_backend_error(http_server):
    http_server.respond_with_recording(PATH, "loki_matrix.json")

    with pytest.raises(BackendError, match="resultType 'matrix' for a log query"):
        LokiBackend(http_server.url).query_logs(service="checkout")


def test_a_non_json_200_is_a_backend_error(http_server):
    http_server.respond(PATH, "<html>sign in</html>", content_type="text/html")

    with pytest.raises(BackendError, match="non-JSON"):
        LokiBackend(http_server.url).query_logs(service="checkout")


def test_an_unreachable_loki_is_a_backend_error_without_credentials():
    port = free_port()
    backend = LokiBackend(f"http://user:pw-secret@127.0.0.1:{port}")

    with pytest.raises(BackendError, match=rf"^loki unreachable at http://127\.0\.0\.1:{port}: ") as info:
        backend.query_logs(service="checkout")
    assert "pw-secret" not in str(info.value)


def test_a_silent_loki_times_out_as_a_backend_error(silent_port):
    with pytest.raises(BackendError, match=r"timed out after 0\.3s"):
        LokiBackend(f"http://127.0.0.1:{silent_port}", timeout_seconds=0.3).query_logs(service="x")


@pytest.mark.parametrize(
    ("labels", "line", "level"),
    [
        ({"level": "warning"}, "anything", "WARN"),
        ({"detected_level": "error"}, "anything", "ERROR"),
        ({"detected_level": "unknown"}, "2026-11-29 10:00:00 ERROR db down", "ERROR"),
        ({}, '{"level":"debug","msg":"x"}', "DEBUG"),
        ({}, "ts=1 lvl=ERR msg=boom", "ERROR"),
        ({}, "[FATAL] out of memory", "FATAL"),
        ({}, "an error happened", "UNKNOWN"),
        ({}, "E1129 10:02:03.042000       1 reflector.go:138] failed to list *v1.Pod", "ERROR"),
        ({}, "W1129 10:02:03.042000       1 warnings.go:70] unknown field", "WARN"),
        ({}, "2026/11/29 10:02:03 [error] 29#29: *20320 upstream timed out", "ERROR"),
        ({}, "2026-11-29T10:02:03.042000Z 7674 [Note] [MY-010914] [Server] Aborted connection", "INFO"),
        ({}, "2026-11-29T10:02:03.042000Z 0 [Warning] [MY-010055] [Server] IP address could not be resolved", "WARN"),
        ({}, "[2026-11-29 10:02:03 +0000] [7] [CRITICAL] WORKER TIMEOUT (pid:8)", "CRITICAL"),
        ({}, '10.0.4.50 - - [29/Nov/2026:10:02:03 +0000] "POST /api/orders HTTP/1.1" 504 694', "UNKNOWN"),
        ({"level": "notice"}, "anything", "INFO"),
        ({"level": "panic"}, "anything", "PANIC"),
    ],
)
def test_the_level_comes_from_labels_then_the_line_else_unknown(labels, line, level):
    assert detect_level(labels, line) == level


def test_nanosecond_timestamps_format_as_iso_utc():
    assert ns_to_iso(1795946400000000000) == "2026-11-29T10:00:00Z"
    assert ns_to_iso(1795946400100000000) == "2026-11-29T10:00:00.100Z"
    assert ns_to_iso(1795946400000001000) == "2026-11-29T10:00:00.000001Z"
    assert ns_to_iso(1795946400000000001) == "2026-11-29T10:00:00.000000001Z"
