"""The typed findings are the one wire format between the offline roles: every shape reads back as written."""

from __future__ import annotations

import pytest

from diagnosis.llm.offline.findings import (
    AlertFiring,
    Change,
    HealthyMetrics,
    LogPattern,
    MetricMove,
    NothingWrong,
    NoTelemetry,
    Other,
    QuietLogs,
    RootCause,
    RunbookAdvice,
    RunbookMismatch,
    read_finding,
)

FINDINGS = [
    RootCause("coredns", "dns_failure", "DNS resolution failure"),
    RootCause("orders-mysql", "db_too_many_connections", "database refuses new connections (too many clients)",
              affected="storefront-gateway, order-api", trigger='Deployed order-api v2.1 ("canary")'),
    RootCause("report-worker", "last_error", "the last error logged before the failure (no known failure pattern matched)",
              error='unexpected token "}" in footer.tpl. Line 3', affected="report-api"),
    RootCause("orders.db", "dependency.database", "database failure or slowness", affected="web-gw",
              trigger="migration 12 applied", asked="web-gw", path="web-gw → order-api → orders.db"),
    NothingWrong("catalog-service, media-service"),
    MetricMove("pg_locks_waiting", "pricing-db", "up", "rose from baseline 0 to 14, starting 2026-11-30T10:35:00Z."),
    MetricMove("deploy_revision", "carrier-rates", "changed", "from 41 to 42 at 2026-11-30T10:35:00Z."),
    QuietLogs("avatar-service", "no ERROR lines", "82", ' (29 routine WARN lines); for example "GET /healthz 200".'),
    LogPattern("order-api", "11", "WARN", 'lines like "SQL Error: 1040, SQLState: 08004", first at 2026-11-30T10:31:50Z.'),
    HealthyMetrics("avatar-service", "http_server_errors_ratio, container_cpu_usage_cores"),
    AlertFiring("NginxHigh5xxRate", "firing", "storefront-gateway", " since 2026-11-30T10:35:00Z: 5xx above 5%"),
    RunbookMismatch("Search latency", "memory_leak_oom", "jvm_gc_time", "search-service", " (jvm_gc_time flat)."),
    RunbookAdvice("Runbook: invoice-renderer", "Turn the feature flag back off."),
    Change("invoice-renderer", "2026-11-30T10:27:00Z", "\"Feature flag 'pdf.embed_full_fonts' changed from off to on\"."),
    NoTelemetry("trovaskel", "its log and metric queries returned nothing, so nothing can be said about it."),
]


def test_every_kind_of_finding_is_held_to_a_round_trip():
    from diagnosis.llm.offline.findings import KINDS

    assert set(KINDS) <= {type(f) for f in FINDINGS}


@pytest.mark.parametrize("finding", FINDINGS, ids=[f"{type(f).__name__}-{i}" for i, f in enumerate(FINDINGS)])
def test_every_finding_reads_back_as_it_was_written(finding):
    assert read_finding(finding.statement()) == finding


def test_a_sentence_of_another_writer_is_no_root_cause():
    assert isinstance(read_finding("The database is probably overloaded."), Other)
    assert RootCause("x-api", "dns_failure", "DNS").affected_services == []
    assert FINDINGS[1].affected_services == ["storefront-gateway", "order-api"]
