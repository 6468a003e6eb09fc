"""Strategy (F-51): greetings and general questions take the SIMPLE path, incidents the DIAGNOSIS graph."""

from __future__ import annotations

import re

from diagnosis.models import DiagnosisRun

INCIDENT_RE = re.compile(
    r"\b(error|errors|fail\w*|down|outage|slow\w*|latency|timeout\w*|timed out|alert\w*|oom\w*|crash\w*|5\d\d|"
    r"exception|incident|degrad\w*|unavailable|spike\w*|leak\w*|disk|cpu|memory|restart\w*|why is|broken|"
    r"root cause|diagnos\w*)\b"
    r"|报错|错误|故障|异常|超时|告警|宕机|慢|延迟|失败|崩溃|内存|磁盘|根因|排查|诊断",
    re.IGNORECASE,
)
SERVICE_RE = re.compile(r"\b[a-z0-9]+(?:-[a-z0-9]+)*-(?:service|svc|api|db|cache)\b", re.IGNORECASE)
MODES = ("auto", "simple", "diagnosis")


def strategy_choose(*, question: str, mode: str = "auto") -> str:
    if mode == "simple":
        return DiagnosisRun.Strategy.SIMPLE
    if mode == "diagnosis":
        return DiagnosisRun.Strategy.DIAGNOSIS
    if INCIDENT_RE.search(question) or SERVICE_RE.search(question):
        return DiagnosisRun.Strategy.DIAGNOSIS
    return DiagnosisRun.Strategy.SIMPLE
