"""Strategy (F-51, SPEC R1): greetings and general questions take the SIMPLE path; every question
about a system's state takes the DIAGNOSIS graph, whose answers pass the Gatekeeper.

Auto mode errs towards DIAGNOSIS: a question naming a service or a host, or asking about failures,
errors, slowness, latency, outages, alerts, health or "what is wrong" (in English or Chinese) is
diagnosed. SIMPLE answers are labelled as not checked against evidence.
"""

from __future__ import annotations

import re

from diagnosis.models import DiagnosisRun

INCIDENT_RE = re.compile(
    r"\b(error|errors|err|fail\w*|down|outage\w*|slow\w*|sluggish|latenc\w*|lag\w*|timeout\w*|timed out|"
    r"alert\w*|alarm\w*|oom\w*|crash\w*|5\d\d|4\d\d|exception\w*|incident\w*|degrad\w*|unavailable|unreachable|"
    r"unresponsive|spike\w*|leak\w*|disk|cpu|memory|restart\w*|why is|why are|why does|why do|broken|"
    r"root cause|diagnos\w*|health\w*|healthy|unhealthy|status|wrong|problem\w*|issue\w*|trouble\w*|"
    r"not working|stopped|stuck|hang\w*|happening|going on|up and running|is \w+ up|are \w+ up|"
    r"throughput|saturat\w*|queue\w*|backlog|p9\d|p50|errors? rate|traffic|load|"
    r"service\w*|server\w*|host\w*|node\w*|pod\w*|cluster\w*|database\w*|db|cache|redis|mysql|postgres\w*|"
    r"kafka|nginx|api|endpoint\w*|deploy\w*|release\w*|rollback\w*|incident)\b"
    r"|报错|错误|故障|异常|超时|告警|报警|宕机|挂了|挂掉|怎么了|出问题|问题|慢|卡|延迟|失败|崩溃|内存|磁盘|根因|排查|诊断|"
    r"不可用|不能用|用不了|健康|状态|服务|主机|节点|数据库|缓存|负载|流量|重启|发布|回滚",
    re.IGNORECASE,
)
# A service or host name: payment-service, order-api, db-01, web01.example.com, 10.0.0.12.
SERVICE_RE = re.compile(
    r"\b[a-z0-9]+(?:-[a-z0-9]+)*-(?:service|svc|api|db|cache|worker|gateway|server|node|host|queue)\b"
    r"|\b[a-z][a-z0-9]*(?:-[a-z0-9]+)*-\d+[a-z0-9]*\b"
    r"|\b[a-z0-9-]+(?:\.[a-z0-9-]+){2,}\b"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}\b",
    re.IGNORECASE,
)
MODES = ("auto", "simple", "diagnosis")


def is_about_system_state(question: str) -> bool:
    return bool(INCIDENT_RE.search(question or "") or SERVICE_RE.search(question or ""))


def strategy_choose(*, question: str, mode: str = "auto") -> str:
    if mode == "simple":
        return DiagnosisRun.Strategy.SIMPLE
    if mode == "diagnosis":
        return DiagnosisRun.Strategy.DIAGNOSIS
    if is_about_system_state(question):
        return DiagnosisRun.Strategy.DIAGNOSIS
    return DiagnosisRun.Strategy.SIMPLE
