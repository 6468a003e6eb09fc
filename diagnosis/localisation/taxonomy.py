"""The closed set of fault kinds a root cause can be named with.

A kind is ``<family>.<name>`` (``network.dns``, ``resource.memory``). The set is closed: a model may
only choose one of these ids, and the server checks the choice; recognition from typed signals lives
beside it in the localiser.
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnosis import i18n


@dataclass(frozen=True)
class CauseKind:
    """One fault kind: its id, family and the reader-facing label (English, the catalogue's msgid)."""

    id: str
    label_en: str

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def label(self, language: str) -> str:
        return i18n.text(self.label_en, language)


CAUSE_KINDS: tuple[CauseKind, ...] = (
    CauseKind("resource.cpu", i18n.mark("CPU saturation or throttling")),
    CauseKind("resource.memory", i18n.mark("memory exhaustion (leak or out-of-memory kill)")),
    CauseKind("resource.disk", i18n.mark("disk or volume full")),
    CauseKind("resource.pool", i18n.mark("connection, thread or worker pool exhausted")),
    CauseKind("network.dns", i18n.mark("DNS resolution failure")),
    CauseKind("network.tls", i18n.mark("TLS or certificate failure")),
    CauseKind("network.refused", i18n.mark("connections refused or reset")),
    CauseKind("network.timeout", i18n.mark("network timeouts")),
    CauseKind("network.loss", i18n.mark("packet loss or unreachable network")),
    CauseKind("change.config", i18n.mark("configuration change or invalid configuration")),
    CauseKind("change.secret", i18n.mark("secret or credential change")),
    CauseKind("change.image", i18n.mark("container image change or pull failure")),
    CauseKind("change.flag", i18n.mark("feature flag change")),
    CauseKind("change.deploy", i18n.mark("deploy or version change")),
    CauseKind("dependency.database", i18n.mark("database failure or slowness")),
    CauseKind("dependency.cache", i18n.mark("cache failure or saturation")),
    CauseKind("dependency.queue", i18n.mark("message queue or broker failure")),
    CauseKind("dependency.external_api", i18n.mark("external API failure")),
    CauseKind("data.schema", i18n.mark("schema or migration mismatch")),
    CauseKind("data.poison_message", i18n.mark("a message or record the consumer cannot process")),
    CauseKind("capacity.rate_limit", i18n.mark("rate limited")),
    CauseKind("capacity.quota", i18n.mark("quota exhausted")),
    CauseKind("scheduling.pending", i18n.mark("pods cannot be scheduled")),
    CauseKind("scheduling.eviction", i18n.mark("pods evicted")),
    CauseKind("scheduling.node_pressure", i18n.mark("node under resource pressure")),
)

CAUSE_KIND_BY_ID: dict[str, CauseKind] = {kind.id: kind for kind in CAUSE_KINDS}
