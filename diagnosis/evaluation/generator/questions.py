"""The question a generated incident asks (English and Chinese, in varied wordings) and its runbooks."""

from __future__ import annotations

import random

from diagnosis.evaluation.generator.graph import Graph, Node

INCIDENT = (
    ("Why is {s} returning errors?", "{s} 为什么在报错？"),
    ("{s} has been misbehaving for about {m} minutes. What is the root cause?", "{s} 大约 {m} 分钟前开始异常，根因是什么？"),
    ("Users report failures on {s}. What is going on?", "用户反馈 {s} 请求失败，发生了什么？"),
    ("What is wrong with {s}?", "{s} 出了什么问题？"),
    ("Investigate {s}: alerts started firing roughly {m} minutes ago.", "排查一下 {s}：大约 {m} 分钟前开始告警。"),
    ("{s} is slow or failing since about {m} minutes ago - find the cause.", "{s} 从大约 {m} 分钟前变慢或失败，请找出原因。"),
    ("Please diagnose {s}.", "请诊断 {s}。"),
)
HEALTHY = (
    ("Is anything wrong with {s}?", "{s} 有问题吗？"),
    ("Check whether {s} is healthy right now.", "检查一下 {s} 现在是否正常。"),
    ("{s} looked odd on a dashboard earlier. Is there a problem?", "{s} 之前在看板上看起来有点异常，有问题吗？"),
    ("Why is {s} failing?", "{s} 为什么失败了？"),
)
HOWTO = {
    "rotate": ("How do I rotate the database password used by {s}?", "如何轮换 {s} 使用的数据库密码？"),
    "scale": ("How do I scale {s} to more replicas?", "如何给 {s} 扩容到更多副本？"),
    "flush": ("How do I flush the cache that {s} uses?", "如何清空 {s} 使用的缓存？"),
}


def ask(rng: random.Random, kind: str, subject: str, minutes: int) -> dict[str, str]:
    bank = INCIDENT if kind == "incident" else HEALTHY
    en, zh = rng.choice(bank)
    return {"en": en.format(s=subject, m=minutes), "zh": zh.format(s=subject, m=minutes)}


def ask_howto(topic: str, subject: str) -> dict[str, str]:
    en, zh = HOWTO[topic]
    return {"en": en.format(s=subject), "zh": zh.format(s=subject)}


def symptom_runbook(rng: random.Random, graph: Graph, node: Node, chinese: bool) -> tuple[str, str]:
    deps = ", ".join(c.name for c in graph.callees(node.name)) or "none"
    if chinese:
        text = (f"# 运行手册：{node.name} 错误与延迟\n\n{node.name} 依赖：{deps}。\n\n## 症状\n\n- 5xx 比例或 p99 延迟升高。\n\n"
                "## 可能原因\n\n1. 本服务资源不足（CPU、内存、连接池）。\n2. 某个依赖故障或变慢。\n3. 最近的发布或配置变更。\n\n"
                "## 诊断查询\n\n- 按依赖查看错误日志里点名的主机、地址或连接串。\n- 比较故障前后的指标。\n\n"
                "## 处置\n\n- 先定位根因所在的服务，再回滚或扩容。\n")
    else:
        text = (f"# Runbook: {node.name} errors and latency\n\n{node.name} calls: {deps}.\n\n## Symptoms\n\n"
                "- 5xx ratio or p99 latency above the SLO.\n\n## Likely causes\n\n1. This service short of a resource "
                "(CPU, memory, a pool).\n2. A dependency failing or slow.\n3. A recent rollout or configuration change.\n\n"
                "## Diagnostic queries\n\n- Which host, address or connection string do the error lines name?\n"
                "- Compare the metrics before and after the first error.\n\n## Remediation\n\n"
                "- Find the service where it starts, then roll back, scale or fix that one.\n")
    return f"{node.name}-errors.md", text


def howto_runbook(topic: str, node: Node, chinese: bool) -> tuple[str, str]:
    steps = {
        "rotate": ("Rotating database credentials", "轮换数据库凭据",
                   [f"Create the new password in the secret store for {node.name}.",
                    f"Update the Kubernetes Secret {node.name}-credentials and restart {node.name} with "
                    f"`kubectl rollout restart deployment/{node.name}`.",
                    "Revoke the old password once every pod runs with the new one."]),
        "scale": ("Scaling a deployment", "扩容部署",
                  [f"`kubectl scale deployment/{node.name} --replicas=<n>` (or raise the HPA minimum).",
                   "Check the namespace ResourceQuota leaves room for the new pods.",
                   "Watch readiness until every new pod is Ready."]),
        "flush": ("Flushing a cache", "清空缓存",
                  ["Confirm the cache holds only derived data.", "Run `redis-cli -n 0 FLUSHDB ASYNC` on the primary.",
                   f"Watch the hit ratio of {node.name} recover."]),
    }[topic]
    title_en, title_zh, lines = steps
    body = "\n".join(f"{i + 1}. {line}" for i, line in enumerate(lines))
    if chinese:
        text = f"# {title_zh}：{node.name}\n\n## 适用范围\n\n{node.name}。\n\n## 步骤\n\n{body}\n\n## 验证\n\n- 错误率与延迟保持正常。\n"
    else:
        text = (f"# {title_en}: {node.name}\n\n## When\n\nPlanned maintenance of {node.name}.\n\n## Steps\n\n{body}\n\n"
                "## Verify\n\n- Error ratio and latency stay at their baseline.\n")
    return f"howto-{topic}-{node.name}.md", text
