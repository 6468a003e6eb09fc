"""The closed set of fault kinds a root cause can be named with.

A kind is ``<family>.<name>`` (``network.dns``, ``resource.memory``). The set is closed: a model may
only choose one of these ids, and the server checks the choice; recognition from typed signals lives
beside it in the localiser.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CauseKind:
    """One fault kind: its id, family and the reader-facing label in both languages."""

    id: str
    label_en: str
    label_zh: str

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def label(self, language: str) -> str:
        return self.label_zh if language == "zh" else self.label_en


CAUSE_KINDS: tuple[CauseKind, ...] = (
    CauseKind("resource.cpu", "CPU saturation or throttling", "CPU 饱和或限流"),
    CauseKind("resource.memory", "memory exhaustion (leak or out-of-memory kill)", "内存耗尽（泄漏或 OOM）"),
    CauseKind("resource.disk", "disk or volume full", "磁盘或卷空间耗尽"),
    CauseKind("resource.pool", "connection, thread or worker pool exhausted", "连接池、线程池或工作池耗尽"),
    CauseKind("network.dns", "DNS resolution failure", "DNS 解析失败"),
    CauseKind("network.tls", "TLS or certificate failure", "TLS 或证书故障"),
    CauseKind("network.refused", "connections refused or reset", "连接被拒绝或重置"),
    CauseKind("network.timeout", "network timeouts", "网络超时"),
    CauseKind("network.loss", "packet loss or unreachable network", "丢包或网络不可达"),
    CauseKind("change.config", "configuration change or invalid configuration", "配置变更或配置无效"),
    CauseKind("change.secret", "secret or credential change", "密钥或凭据变更"),
    CauseKind("change.image", "container image change or pull failure", "容器镜像变更或拉取失败"),
    CauseKind("change.flag", "feature flag change", "功能开关变更"),
    CauseKind("change.deploy", "deploy or version change", "发布或版本变更"),
    CauseKind("dependency.database", "database failure or slowness", "数据库故障或变慢"),
    CauseKind("dependency.cache", "cache failure or saturation", "缓存故障或饱和"),
    CauseKind("dependency.queue", "message queue or broker failure", "消息队列或代理故障"),
    CauseKind("dependency.external_api", "external API failure", "外部 API 故障"),
    CauseKind("data.schema", "schema or migration mismatch", "表结构或迁移不一致"),
    CauseKind("data.poison_message", "a message or record the consumer cannot process", "无法处理的消息或数据"),
    CauseKind("capacity.rate_limit", "rate limited", "被限流"),
    CauseKind("capacity.quota", "quota exhausted", "配额耗尽"),
    CauseKind("scheduling.pending", "pods cannot be scheduled", "Pod 无法调度"),
    CauseKind("scheduling.eviction", "pods evicted", "Pod 被驱逐"),
    CauseKind("scheduling.node_pressure", "node under resource pressure", "节点资源压力"),
)

CAUSE_KIND_BY_ID: dict[str, CauseKind] = {kind.id: kind for kind in CAUSE_KINDS}
