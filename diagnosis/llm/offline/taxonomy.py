"""The broad cause taxonomy: Kubernetes-native failures and common infrastructure causes.

A crash loop or a restart count is a symptom, not a cause: it is not a category here.
Each category is recognised from how real software words it (kubelet and controller events,
container states, resolver, TLS, database and broker errors), never from a particular incident.
"""

from __future__ import annotations

from diagnosis import i18n
from diagnosis.llm.offline.cause import Cause, _m, _rx

BROAD_CAUSES: tuple[Cause, ...] = (
    Cause(
        "oom_killed", "container OOMKilled at its memory limit (exit code 137)",
        _rx(r"\bOOMKilled\b", r"exit ?code\"?[=: ]+137\b", r"memory cgroup out of memory", r"\boom-kill\b",
            r"killed process \d+ .*total-vm"),
        (_m(r"container_oom_events|oom_kill", "up"),),
    ),
    Cause(
        "missing_config", "missing configuration, secret or environment variable",
        _rx(r"CreateContainerConfigError", r"secret \"?[\w.-]+\"? not found", r"configmap \"?[\w.-]+\"? not found",
            r"couldn't find key \S+ in (?:Secret|ConfigMap)", r"(?:environment variable|env var)\s+\"?[A-Z_][A-Z0-9_]*\"?\s+"
            r"(?:is )?(?:not set|required|missing|must be set)", r"missing required (?:configuration|setting|env)",
            r"(?:KeyError|NoSuchElementException)[:(]\s*'?[A-Z_][A-Z0-9_]{2,}", r"缺少(?:环境变量|配置|密钥)"),
        (),
    ),
    Cause(
        "image_pull", "container image cannot be pulled",
        _rx(r"ImagePullBackOff", r"ErrImagePull", r"Failed to pull image", r"manifest (?:for \S+ )?(?:unknown|not found)",
            r"pull access denied", r"InvalidImageName"),
        (),
    ),
    Cause(
        "failed_scheduling", "pods cannot be scheduled (insufficient resources or constraints)",
        _rx(r"FailedScheduling", r"\d+/\d+ nodes are available", r"Insufficient (?:cpu|memory|nvidia)",
            r"didn't match (?:Pod's )?node (?:affinity|selector)", r"untolerated taint", r"Unschedulable"),
        (),
    ),
    Cause(
        "job_backoff_limit", "job failed: backoff limit reached after repeated pod failures",
        _rx(r"BackoffLimitExceeded", r"Job has reached the specified backoff limit"),
        (),
    ),
    Cause(
        "dns_failure", "DNS resolution failure",
        _rx(r"no such host", r"\bNXDOMAIN\b", r"\bSERVFAIL\b", r"Temporary failure in name resolution",
            r"could not resolve host", r"UnknownHostException", r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN)",
            r"lookup \S+ on \S+:53", r"域名解析失败"),
        (_m(r"coredns_.*(?:servfail|nxdomain)|dns_.*(?:error|fail)", "up"),),
    ),
    Cause(
        "tls_certificate_expired", "TLS certificate expired or not yet valid",
        _rx(r"certificate has expired", r"certificate (?:is )?not yet valid", r"CERT_HAS_EXPIRED",
            r"x509: certificate", r"PKIX path validation failed", r"NotAfter: ", r"证书(?:已)?过期"),
        (_m(r"cert.*expir", "down"),),
    ),
    Cause(
        "connection_refused", "a dependency refuses or drops connections",
        _rx(r"connection refused", r"ECONNREFUSED", r"connect: connection timed out", r"dial tcp \S+: i/o timeout",
            r"Connection reset by peer", r"No route to host", r"拒绝连接", r"连接超时"),
        (),
    ),
    Cause(
        "db_deadlock", "database deadlocks",
        _rx(r"Deadlock found when trying to get lock", r"deadlock detected", r"\bdeadlock\b", r"死锁"),
        (_m(r"deadlock", "up"),),
    ),
    Cause(
        "db_lock_wait", "database lock waits: a transaction holds a lock the others queue behind",
        _rx(r"still waiting for \w*Lock on", r"Lock wait timeout exceeded", r"Waiting for table metadata lock",
            r"canceling statement due to lock timeout", r"LockAcquisitionException", r"lock wait timeout",
            r"Process holding the lock", r"锁等待(?:超时)?", r"等待(?:行|表)?锁"),
        (_m(r"locks?_wait|lock_waits|row_lock_(?:waits|time)|blocked_(?:queries|sessions)", "up"),),
    ),
    Cause(
        "invalid_config", "invalid configuration (a value or file the service cannot parse or bind)",
        _rx(r"Failed to bind properties under", r"\[emerg\]", r"invalid (?:configuration|config|value for)",
            r"(?:could not|cannot|failed to|unable to) (?:parse|load|read) (?:the )?(?:config|configuration|settings)",
            r"yaml: (?:line \d+|unmarshal errors)", r"configuration file \S+ contains errors", r"unknown (?:directive|setting)",
            r"ConfigurationException", r"配置\S{0,12}(?:失败|错误|无效|非法|不合法)", r"(?:非法|无效)(?:的)?配置"),
        (),
    ),
    Cause(
        "credentials_rejected", "credentials rejected (password authentication failed / access denied for the user)",
        _rx(r"password authentication failed for user", r"Access denied for user '", r"SASL authentication failed",
            r"\bNOAUTH Authentication required", r"\bWRONGPASS\b", r"Login failed for user '",
            r"(?:数据库|连接)\S{0,6}(?:认证|鉴权|身份验证)失败", r"用户名或密码错误"),
        (),
    ),
    Cause(
        "db_too_many_connections", "database refuses new connections (too many clients)",
        _rx(r"sorry, too many clients already", r"remaining connection slots are reserved", r"ER_CON_COUNT_ERROR",
            r"Too many connections"),
        (_m(r"(?:pg|mysql)_.*connections", "up"),),
    ),
    Cause(
        "clock_skew", "clock skew breaks token or certificate time checks",
        _rx(r"clock skew", r"token used before issued", r"\biat\b.*(?:future|before)", r"not valid yet", r"\bnbf\b",
            r"time is out of sync", r"NTP (?:sync|synchroni[sz]ation) (?:lost|failed)", r"时钟(?:偏差|不同步)"),
        (_m(r"clock_(?:skew|offset)|ntp_offset", "up"),),
    ),
    Cause(
        "upstream_rate_limited", "an upstream API rate-limits the service",
        _rx(r"429 Too Many Requests", r"\bstatus(?:=|: )429\b", r"rate limit(?:ed| exceeded)", r"RESOURCE_EXHAUSTED",
            r"\bthrottl(?:ed|ing)\b", r"限流"),
        (_m(r"429|rate_limit|throttl", "up"),),
    ),
    Cause(
        "consumer_lag_rebalance", "consumer lag from repeated group rebalances",
        _rx(r"rebalanc", r"max\.poll\.interval\.ms", r"CommitFailedException", r"member \S+ (?:has )?left the group",
            r"消费(?:积压|延迟)", r"重平衡"),
        (_m(r"consumer_lag|records_lag|kafka_.*lag", "up"),),
    ),
    Cause(
        "worker_pool_exhausted", "thread or worker pool exhausted",
        _rx(r"RejectedExecutionException", r"thread pool (?:is )?(?:exhausted|full)", r"all \d+ workers are busy",
            r"worker_connections are not enough", r"server reached (?:pm\.)?max_children", r"线程池(?:已满|耗尽)"),
        (_m(r"(?:thread|worker)_pool.*(?:active|busy|queue)", "up"),),
    ),
    Cause(
        "inode_exhaustion", "filesystem out of inodes",
        _rx(r"\binodes?\b.*(?:exhaust|100%|no free)", r"out of inodes"),
        (_m(r"inodes_(?:used|free)", "up"),),
    ),
    Cause(
        "config_change", "a configuration or feature-flag change",
        _rx(r"feature flag \S+ (?:enabled|disabled|flipped|changed)", r"flag \S+ (?:set to|changed to|turned on|turned off)",
            r"config(?:uration)? reload(?:ed)?", r"reloaded config", r"功能开关.*(?:开启|关闭)", r"配置(?:已)?(?:变更|重载)"),
        (),
    ),
)


# Next steps when no runbook and no category apply: actions are never empty. English msgids, translated
# by diagnosis.i18n (``generic_actions``).
GENERIC_ACTIONS = (
    i18n.mark("Read the first ERROR/FATAL lines of the affected service around the symptom onset, in context."),
    i18n.mark("Compare its error rate, latency and saturation metrics with the hour before."),
    i18n.mark("List the deploys, configuration and feature-flag changes of the last hours and the dependencies "
              "its errors name."),
)


def generic_actions(language: str) -> list[str]:
    """The generic next steps in the reader's language."""
    return [i18n.text(action, language) for action in GENERIC_ACTIONS]
