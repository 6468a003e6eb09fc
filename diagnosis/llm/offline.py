"""The offline analyser (F-30): the embedded default model, deterministic and rule-based.

It answers every agent role of the ChatModel protocol from ``request.structured_input`` only: it
plans the queries, calls the tools, reads their results with a generic incident lexicon (log
patterns, metric anomalies, dependency and node relations, change events), cites exact excerpts,
checks its own claims and writes the answer. No network, no canned answers. Stdlib only.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from diagnosis.llm.base import ChatReply, ChatRequest, ModelNonRetryableError, ToolCall, Usage

MODEL_NAME = "offline-analyser-v1"
EVIDENCE_VERSION = "executor_evidence_v2"
PLAN_VERSION = "planner_plan_v1"
DEFAULT_TOOLS = ("lookup_knowledge", "query_alerts", "query_logs", "query_metrics")

LOG_LIMIT = 200  # enough for an hour of one service's lines in the demo world; the schema allows 500
KNOWLEDGE_TOP_K = 3
MAX_NAMED_SERVICES = 3
MAX_FOLLOW_UP_SERVICES = 2
GAP_RESERVE = 2  # tool calls kept back in the follow-up round for one evidence retry
MAX_CLAIMS = 24
MIN_RUNBOOK_EXCERPT = 20
ONSET_TOLERANCE_S = 120  # a dependency whose trouble starts this much after its caller's is still a cause

BADGE = {"en": "_Offline analyser (rule-based, no LLM)_", "zh": "_离线分析器（基于规则，未使用大模型）_"}


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


# --------------------------------------------------------------------------- the incident lexicon


@dataclass(frozen=True)
class Cause:
    """One failure category: how it shows in text and metrics, what it is called, what to do."""

    key: str
    label_en: str
    label_zh: str
    text: tuple[re.Pattern[str], ...]
    metrics: tuple[tuple[re.Pattern[str], str], ...]  # (metric-name pattern, "up" | "down" | "changed")
    search: str
    actions_en: tuple[str, ...]
    actions_zh: tuple[str, ...]
    remote: bool = False  # the cause usually lives in a dependency of the service that reports it

    def matches_text(self, text: str) -> bool:
        return any(p.search(text) for p in self.text)

    def matches_series(self, name: str, direction: str | None) -> bool:
        if direction is None:
            return False
        wanted = {"saturated": "up"}.get(direction, direction)
        return any(p.search(name) and want == wanted for p, want in self.metrics)

    def watches(self, name: str) -> bool:
        """True when a series of this name is one the category would move (whatever it did)."""
        return any(p.search(name) for p, _ in self.metrics)

    def label(self, language: str) -> str:
        return self.label_zh if language == "zh" else self.label_en

    def actions(self, language: str) -> tuple[str, ...]:
        return self.actions_zh if language == "zh" else self.actions_en


def _m(pattern: str, direction: str) -> tuple[re.Pattern[str], str]:
    return re.compile(pattern, re.IGNORECASE), direction


CAUSES: tuple[Cause, ...] = (
    Cause(
        "db_connection_pool_exhausted",
        "database connection pool exhausted (connection pool exhaustion)", "数据库连接池耗尽（connection pool exhausted）",
        _rx(r"connection is not available", r"failed to obtain (?:jdbc )?connection", r"pool stats \([^)]*idle=0",
            r"connection leak detection", r"\bpool (?:is )?exhausted", r"no idle connections", r"too many connections",
            r"连接池(?:已)?(?:耗尽|打满|满)"),
        (_m(r"pool_(?:active|pending|waiting|in_use|used)", "up"),),
        "connection pool exhausted Connection is not available pool saturated 连接池耗尽",
        ("Find and stop what holds the connections (long transactions, a batch job, a leak) before resizing the pool.",
         "Give batch workloads their own connection pool so they cannot starve request traffic."),
        ("先找出并停止长期占用连接的来源（长事务、批处理任务或连接泄漏），不要直接调大连接池。",
         "为批处理任务配置独立的连接池，避免与在线请求争用连接。"),
    ),
    Cause(
        "memory_leak_oom",
        "memory leak (heap growth ending in OutOfMemoryError / OOM kills)", "内存泄漏（堆内存持续增长，最终 OutOfMemoryError / OOM）",
        _rx(r"outofmemoryerror", r"\boomkilled\b", r"java heap space", r"gc overhead", r"full gc \(allocation failure\)",
            r"memory leak", r"\bunbounded\b", r"内存泄漏", r"内存溢出"),
        (_m(r"heap_used|memory_working_set|memory_usage_bytes|memory_rss", "up"), _m(r"restarts", "up"),
         _m(r"gc_time", "up")),
        "memory leak OutOfMemoryError OOMKilled heap growth 内存泄漏",
        ("Roll back the release that started the heap growth, or bound the cache/collection that grows, then restart the pods.",
         "Capture a heap dump before the next OOM kill to confirm what holds the memory."),
        ("回滚引入堆内存增长的版本，或为不断增长的缓存/集合设置上限，然后重启实例。",
         "在下一次 OOM 之前抓取堆转储（heap dump），确认占用内存的对象。"),
    ),
    Cause(
        "disk_full",
        "disk full (No space left on device)", "磁盘已满（No space left on device，磁盘空间耗尽）",
        _rx(r"no space left on device", r"\bdisk (?:is )?full\b", r"disk usage on \S+ at (?:9\d|100)%",
            r"log rotation skipped", r"\bfull disk\b", r"磁盘(?:空间)?(?:已满|不足|写满|耗尽)"),
        (_m(r"disk_used|disk_usage|filesystem_used|volume_used", "up"), _m(r"disk_free|filesystem_avail|disk_avail", "down")),
        "disk full No space left on device disk usage log rotation 磁盘空间",
        ("Free space on the full volume (compress or delete old logs, remove stale files) and repair log rotation.",
         "Turn verbose logging back down and alert on disk usage before it reaches 90%."),
        ("清理已满的磁盘卷（压缩或删除旧日志、清理陈旧文件），并修复日志轮转。",
         "把日志级别调回正常，并在磁盘使用率达到 90% 之前告警。"),
    ),
    Cause(
        "slow_downstream_dependency",
        "slow downstream dependency (slow queries, full table scans)", "下游依赖变慢（慢查询、全表扫描）",
        _rx(r"\bslow quer(?:y|ies)\b", r"rows_examined=\d{5,}", r"\bkey=null\b", r"full table scan", r"\bdrop index\b",
            r"timeout after \d+ ?ms calling", r"upstream \S+ timed out", r"timed out calling", r"慢查询", r"全表扫描"),
        (_m(r"downstream_latency|dependency_latency|upstream_latency", "up"),
         _m(r"db_query_latency|query_duration|query_latency", "up"), _m(r"rows_examined", "up")),
        "slow downstream dependency slow query timeout calling full table scan index 慢查询",
        ("Fix the slow dependency first; for slow queries check the query plan and restore the missing index.",
         "Protect the callers meanwhile with cached fallbacks or rate limits instead of scaling them out."),
        ("先修复变慢的下游依赖；如果是慢查询，检查执行计划并恢复缺失的索引。",
         "修复期间为调用方启用缓存降级或限流，不要扩容调用方。"),
        remote=True,
    ),
    Cause(
        "noisy_neighbour_cpu",
        "noisy neighbour (CPU contention on a shared node)", "吵闹邻居（共享节点上的 CPU 争用，CPU contention）",
        _rx(r"\bcpu pressure\b", r"load average [\d.]+ on \d+ vcpu", r"qosclass=besteffort", r"cpu limit=none",
            r"\bcpu steal", r"noisy neighbou?r", r"neighbou?r (?:saturat|workload|pod|task|job)", r"邻居", r"cpu ?争用"),
        (_m(r"cpu_pressure", "up"), _m(r"node_cpu_utili[sz]ation", "up"), _m(r"node_load", "up"),
         _m(r"cpu_steal", "up"), _m(r"container_cpu_usage", "down")),
        "noisy neighbour CPU contention node CPU saturated BestEffort pod 节点 CPU 争用",
        ("Evict or CPU-limit the neighbour workload that saturates the node (set CPU requests and limits).",
         "Run latency-sensitive services with Guaranteed QoS or on a separate node pool."),
        ("驱逐占满节点 CPU 的邻居任务，或为它设置 CPU request/limit。",
         "让对延迟敏感的服务使用 Guaranteed QoS，或调度到独立的节点池。"),
    ),
    Cause(
        "db_replication_lag",
        "database replication lag (the replica lags behind the primary, stale reads)",
        "数据库主从同步延迟（从库落后于主库，读到过期数据）",
        _rx(r"replication lag", r"replica(?:tion)? (?:is )?(?:lagging|behind)", r"seconds_behind_(?:master|source)",
            r"主从(?:同步)?延迟", r"复制延迟", r"落后于主库", r"过期数据", r"stale (?:read|data)"),
        (_m(r"replication_lag|replica_lag|seconds_behind", "up"),),
        "replication lag replica behind primary large transaction 主从同步延迟 大事务",
        ("Route the affected reads to the primary until the replica has caught up.",
         "Split the large transaction into small batches and enable parallel replication."),
        ("在从库追平之前，把受影响的读取临时切换到主库。",
         "把大事务拆成小批次提交，并开启并行复制。"),
        remote=True,
    ),
    Cause(
        "cache_memory_limit",
        "cache memory limit reached (maxmemory): writes are rejected", "缓存内存达到上限（maxmemory，内存上限），写入被拒绝",
        _rx(r"\bmaxmemory\b", r"oom command not allowed", r"\bnoeviction\b", r"cachewriterejected", r"evicted_keys",
            r"内存(?:达到)?上限", r"写入被拒绝"),
        (_m(r"(?:redis|cache|memcached)_memory_used", "up"), _m(r"rejected_writes", "up"), _m(r"evicted_keys|evictions_per", "up")),
        "cache maxmemory memory limit OOM command not allowed rejected writes 内存上限",
        ("Free cache memory or raise its memory limit (maxmemory), and add TTLs to keys that grow without bound.",
         "Alert on used/max cache memory before writes start to fail."),
        ("释放缓存内存或临时提高内存上限（maxmemory），并为无限增长的键设置 TTL。",
         "在写入失败之前，对缓存已用内存/内存上限的比例告警。"),
        remote=True,
    ),
    Cause(
        "cache_disabled",
        "cache disabled (the query cache is off, cache hit ratio collapsed)", "缓存被禁用（查询缓存关闭，缓存命中率骤降）",
        _rx(r"cache (?:is )?disabled", r"cache\.size=0", r"cache: miss\b", r"缓存(?:已)?(?:禁用|关闭)"),
        (_m(r"cache_hit_ratio|cache_hit_rate|hit_ratio", "down"),),
        "query cache disabled cache hit ratio config change 查询缓存",
        ("Revert the configuration change that disabled the cache and confirm the hit ratio recovers.",
         "Guard cache-size settings with review and alert on a sudden drop of the hit ratio."),
        ("回滚关闭缓存的配置变更，并确认缓存命中率恢复。",
         "对缓存大小配置的变更加审核，并在命中率骤降时告警。"),
    ),
    Cause(
        "upstream_breaking_change",
        "breaking API contract change in an upstream release (the response schema changed)",
        "上游发布引入不兼容的接口变更（响应 schema 变更）",
        _rx(r"schema_version", r"\brenamed\b", r"has field '[^']+' and no '[^']+'", r"missing (?:required )?field",
            r"unknown field", r"breaking change", r"incompatible (?:schema|response|api)", r"contract (?:change|test)",
            r"broke(?:n)? the contract", r"接口变更", r"契约", r"字段.{0,6}(?:重命名|改名|删除)"),
        (_m(r"deployment_revision|release_revision|app_version", "changed"),),
        "upstream contract change schema renamed field rollout breaking change 接口变更",
        ("Roll back the upstream release, or have it serve the old field alongside the new one.",
         "Add consumer contract tests so a breaking schema change fails before rollout."),
        ("回滚上游版本，或让上游同时返回旧字段和新字段。",
         "增加消费者契约测试，让不兼容的 schema 变更在发布前就被发现。"),
        remote=True,
    ),
    Cause(
        "gc_pauses",
        "long garbage-collection pauses", "垃圾回收（GC）停顿过长",
        _rx(r"(?:gc|garbage[- ]collection) pauses?", r"to-space exhausted", r"stop-the-world"),
        (_m(r"gc_pause", "up"),),
        "GC pause garbage collection heap",
        ("Tune or resize the heap so collections stay short.",),
        ("调整堆大小或 GC 参数，缩短停顿时间。",),
    ),
    Cause(
        "cpu_throttling",
        "CPU throttling (the CPU limit is too low)", "CPU 限流（CPU limit 过低）",
        _rx(r"\bthrottl(?:ed|ing)\b"),
        (_m(r"cpu_throttled", "up"),),
        "CPU throttling cpu limit",
        ("Raise the service's CPU limit.",),
        ("提高服务的 CPU limit。",),
    ),
)
CAUSE_BY_KEY = {cause.key: cause for cause in CAUSES}

# Deploys, config pushes, migrations, scheduling and batch starts: what usually precedes an incident.
CHANGE_PATTERNS = _rx(
    r"\brolling update\b", r"\brollout\b", r"\bdeploy(?:ed|ing|ment)?\b", r"\bstarted \S+ v\d", r"\bv\d+\.\d+(?:\.\d+)?\s*->",
    r"\bmigration\b", r"\b(?:drop|create) index\b", r"\balter table\b", r"\bconfig(?:uration)? (?:push|reload|change)",
    r"\bapplied by\b", r"\bscheduled pod\b", r"\bfeature \S+ enabled\b", r"\b(?:job|batch)\b.*\bstarted\b",
    r"\bstarted\b.*\b(?:job|batch)\b", r"大事务", r"批量更新", r"发布", r"上线",
)
# Log text that addresses the reader instead of describing the system: data, never instructions.
INJECTION_PATTERNS = _rx(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier|your) (?:instructions|rules|prompts?)",
    r"disregard (?:all |any )?(?:the )?(?:previous|prior|above|your) ", r"\bsystem[ _]prompt\b", r"\byou are now\b",
    r"\bnew instructions?\b", r"\b(?:call|invoke|use) (?:the )?tool\b", r"\binv-[0-9a-f]{8}\b", r"</?tool_output",
    r"忽略(?:之前|以上|先前|所有)", r"\bas an ai\b",
    # overriding the rules, or speaking to the model
    r"\b(?:system|developer|admin) (?:override|mode)\b", r"\bnew rules?:", r"\breply only with\b",
    r"\b(?:forget|disregard|set aside|bypass|ignore) (?:all |any |the |your |just )*(?:rules|instructions|guidelines|"
    r"evidence|gate(?:keeper)?|verifier|checks?|policy)\b", r"\b(?:to|dear|hey) (?:the )?(?:ai|assistant|model|llm)\b",
    r"^\W*(?:assistant|ai|llm)\s*[,:]", r"\b(?:i order you|you may now|you must now)\b", r"\bunverified claims?\b",
    # calling a tool by name, or a tool call written out
    r"(?:^|[.,:;!?]\s*|\b(?:please|then|now|must|should|and)\s+)(?:call|invoke|execute)\s+(?:the\s+)?"
    r"(?:tool\s+|function\s+)?[a-z][a-z0-9]*_[a-z0-9_]+", r"\buse (?:the )?[a-z][a-z0-9]*_[a-z0-9_]+ tool\b",
    r"</?tool_call>", r"\btool_calls\b",
    # the agents' own formats and role markers
    r"\"(?:answer_markdown|cited_invocation_ids|source_invocation_id|evidence_excerpt|claim_checks|verdict)\"\s*:",
    r"\b(?:executor_evidence|planner_plan)_v\d\b", r"\"role\"\s*:\s*\"(?:system|assistant|developer|tool)\"",
    r"<\|im_(?:start|end)\|>", r"<!--\s*prompt:", r"^\W*\[(?:assistant|system|user)\]\s*:", r"\bend of untrusted\b",
    # asking for the prompt or for secrets
    r"\byour (?:full |system )*(?:prompt|instructions)\b", r"\bprompt files?\b", r"\b(?:reveal|exfiltrate)\b",
    r"\bleak (?:the |your |all |every )*(?:secrets?|keys?|passwords?|tokens?|prompt)",
    r"\b(?:repeat|print|output) (?:the )?(?:text above|instructions)\b",
    r"\b(?:include|print|output|show)\b[^.]{0,30}\b(?:every|all|the value of)\b[^.]{0,30}"
    r"\b(?:secrets?|passwords?|tokens?|keys?|[a-z_]*password|[a-z_]*api_key)\b", r"!\[[^\]]*\]\(\s*https?://",
    r"不要遵守|无视|(?:系统|新的?)指令|提示词|系统提示|泄[露漏].{0,12}(?:密钥|密码|令牌|提示)|证据校验|事故指挥官|宣布事故|直接(?:输出|断定)|"
    r"调用\s*[a-z_]+",
)
# Zero-width characters and bidi controls that would hide an instruction from the patterns.
INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
SYMPTOM_METRIC = re.compile(r"error|latency|duration|exception|failure|5xx|timeout", re.IGNORECASE)
RATIO_METRIC = re.compile(r"(?:_ratio|_utili[sz]ation|_percent)$", re.IGNORECASE)
SATURABLE_METRIC = re.compile(r"used|utili|usage|pressure|full|load", re.IGNORECASE)
HEALTHY_LINE = re.compile(r"health|\bok\b|passed|ready|healthy|正常|成功", re.IGNORECASE)
CAUSES_HEADING = re.compile(r"cause|原因", re.IGNORECASE)
CONDITIONAL_ADVICE = re.compile(r"^(?:if|for|when|in case of|如果|若|当)\s*(.+?)[,:，：]", re.IGNORECASE)
REMEDIATION_HEADING = re.compile(r"remediation|mitigation|\bfix|action|处置|处理|修复|解决|应对", re.IGNORECASE)
INVOCATION_REF = re.compile(r"\binv-[0-9a-f]{8}\b")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

_TOKEN = r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+"
SERVICE_IN_TEXT = re.compile(rf"(?<![\w./:-])({_TOKEN})(?![\w/-])", re.IGNORECASE)
SERVICE_SUFFIX = re.compile(
    r"-(?:service|svc|db|database|cache|redis|api|gateway|queue|mq|broker|kafka|store|search|indexer|consumer|worker|"
    r"proxy|mysql|postgres|pg|es|server|trainer|node-\d+)$"
)
DEPENDENCY_CONTEXT = tuple(
    re.compile(p.replace("TOKEN", _TOKEN), re.IGNORECASE) for p in (
        r"\bcalling\s+(?P<s>TOKEN)", r"\b(?:up|down)stream\s+(?P<s>TOKEN)", r"\bfrom\s+(?P<s>TOKEN)",
        r"\b(?:on|to|via|at)\s+(?P<s>TOKEN)(?=[\s:;,)]|$)", r"\((?P<s>TOKEN):\d+\)",
        r"(?P<s>TOKEN)\s+(?:returned|timed out|is unavailable|unavailable|refused|rejected)",
        r"\bconnect(?:ion|ing)?\s+(?:to\s+)?(?P<s>TOKEN)",
    )
)
SCHEDULED_POD = re.compile(r"scheduled pod (\S+) onto (\S+)", re.IGNORECASE)
GENERIC_HYPHENATED = frozenset({
    "on-call", "real-time", "end-to-end", "follow-up", "e-mail", "built-in", "up-to-date", "read-only", "long-running",
    "non-stop", "re-run", "time-out", "roll-back", "set-up", "check-in", "log-in", "sign-in", "x-request-id",
})


# --------------------------------------------------------------------------- small helpers


def question_language(text: str) -> str:
    """`zh` when the text is Chinese (the same rule as the agents' runtime), else `en`."""
    return "zh" if len(CJK.findall(text or "")) >= 2 else "en"


def _is_id_like(token: str) -> bool:
    """Order ids, hashes and invocation ids are hyphenated too; service names rarely carry 4+ digits."""
    return any(sum(c.isdigit() for c in seg) >= 4 or (len(seg) >= 6 and re.fullmatch(r"[0-9a-f]+", seg)
                                                    and any(c.isdigit() for c in seg))
               for seg in token.split("-")) or token.startswith(("inv-", "run-"))


def services_in_question(question: str) -> list[str]:
    """Service-looking names in the question: hyphenated ASCII names such as payment-service."""
    found: list[str] = []
    for match in SERVICE_IN_TEXT.finditer(question or ""):
        token = match.group(1)
        low = token.lower()
        if low in GENERIC_HYPHENATED or _is_id_like(low) or low in (f.lower() for f in found):
            continue
        found.append(token)
    return found[:MAX_NAMED_SERVICES]


def _suspicious(text: str) -> bool:
    text = INVISIBLE.sub("", text or "")
    return any(p.search(text) for p in INJECTION_PATTERNS)


def _parse_ts(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _iso(ts: float | None) -> str:
    if ts is None:
        return "?"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _number(value: float) -> str:
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".4g")


def _template(message: str) -> str:
    """The shape of a log line: quoted values and tokens with digits collapsed, for counting repeats."""
    text = re.sub(r"\"[^\"]*\"|'[^']*'", "<q>", message)
    return re.sub(r"\S*\d\S*", "<*>", text).strip()


def _workload(pod: str) -> str:
    """`ml-batch-trainer-5821-x7k2q` -> `ml-batch-trainer`: drop the replica-set and pod suffixes."""
    segs = pod.split("-")
    if len(segs) > 2 and re.fullmatch(r"[a-z0-9]{5}", segs[-1]) and any(c.isdigit() for c in segs[-1]):
        segs.pop()
    while len(segs) > 1 and re.fullmatch(r"[0-9a-f]{4,10}|\d+", segs[-1]) and any(c.isdigit() for c in segs[-1]):
        segs.pop()
    return "-".join(segs)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _canonical(tool: str, arguments: Mapping[str, Any] | None) -> str:
    return f"{tool}:{json.dumps(arguments or {}, sort_keys=True, ensure_ascii=False)}"


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


# --------------------------------------------------------------------------- what the tools returned


@dataclass
class LogLine:
    invocation_id: str
    index: int
    timestamp: str
    ts: float | None
    service: str
    level: str
    message: str

    @property
    def path(self) -> str:
        return f"$.records[{self.index}].message"

    def binding(self) -> dict[str, str]:
        return _binding(self.invocation_id, "query_logs", self.path, self.message)


@dataclass
class Series:
    invocation_id: str
    index: int
    labels: dict[str, str]
    points: list[tuple[float, float]]
    description: str
    baseline: float = 0.0
    noise: float = 0.0
    peak: float = 0.0
    trough: float = 0.0
    last: float = 0.0
    direction: str | None = None  # "up" | "down" | "saturated" | "changed" | None (near baseline)
    onset: float | None = None
    severity: float = 0.0
    limit: Series | None = None

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")

    @property
    def service(self) -> str:
        return self.labels.get("service", "")

    @property
    def anomalous(self) -> bool:
        return self.direction in ("up", "down", "saturated")

    def binding(self) -> dict[str, str]:
        return _binding(self.invocation_id, "query_metrics", f"$.series[{self.index}].description", self.description)


@dataclass
class Alert:
    invocation_id: str
    index: int
    labels: dict[str, str]
    summary: str
    description: str
    state: str
    active_at: str

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def service(self) -> str:
        return self.labels.get("service", "")

    @property
    def text(self) -> str:
        return f"{self.name} {self.summary} {self.description}"

    def binding(self) -> dict[str, str]:
        return _binding(self.invocation_id, "query_alerts", f"$.alerts[{self.index}].annotations.summary", self.summary)


@dataclass
class KnowledgeChunk:
    invocation_id: str
    index: int
    title: str
    path: str
    content: str
    source_type: str

    def lines(self) -> Iterable[tuple[str, str]]:
        """(section heading, line) for every citable line of the chunk, list markers removed."""
        heading = ""
        for raw in self.content.splitlines():
            line = raw.strip()
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
                continue
            line = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", line).strip()
            if len(line) >= MIN_RUNBOOK_EXCERPT and " ".join(line.split()) in " ".join(self.content.split()):
                yield heading, line

    def binding(self, line: str) -> dict[str, str]:
        return _binding(self.invocation_id, "lookup_knowledge", f"$.results[{self.index}].content", line)


def _binding(invocation_id: str, tool: str, path: str, excerpt: str) -> dict[str, str]:
    return {"source_invocation_id": invocation_id, "tool_name": tool, "raw_path": path, "evidence_excerpt": excerpt}


@dataclass
class Pattern:
    """Repeated log lines of one service and level with the same shape."""

    service: str
    level: str
    template: str
    lines: list[LogLine]
    causes: tuple[str, ...]

    @property
    def first(self) -> LogLine:
        return self.lines[0]

    @property
    def count(self) -> int:
        return len(self.lines)


@dataclass
class Profile:
    """Everything one service showed in this run, and what it suggests."""

    service: str
    lines: list[LogLine] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)
    changes: list[LogLine] = field(default_factory=list)
    dependencies: Counter = field(default_factory=Counter)
    dependency_lines: dict[str, LogLine] = field(default_factory=dict)
    causes: Counter = field(default_factory=Counter)
    onset: float | None = None

    @property
    def anomalies(self) -> list[Series]:
        # A series at its hard limit says more than any spike: it comes first.
        return sorted((s for s in self.series if s.anomalous), key=lambda s: (s.direction != "saturated", -s.severity))

    @property
    def problem_patterns(self) -> list[Pattern]:
        return [p for p in self.patterns if p.level in ("ERROR", "FATAL", "WARN")]

    @property
    def firing(self) -> list[Alert]:
        return [a for a in self.alerts if a.state in ("firing", "pending")]

    @property
    def has_signal(self) -> bool:
        """Something is wrong here: a metric moved, errors, warnings of a known failure, or an alert."""
        significant = [p for p in self.problem_patterns if p.level != "WARN" or p.causes]
        return bool(self.anomalies or significant or self.firing)

    def dominant_cause(self) -> Cause | None:
        if not self.causes:
            return None
        key, score = max(self.causes.items(), key=lambda kv: (kv[1], -_cause_rank(kv[0])))
        return CAUSE_BY_KEY[key] if score > 0 else None

    def cue_lines(self, cause: Cause) -> list[LogLine]:
        """The first error naming the cause, the first warning naming it, the first context line naming it."""
        found = []
        for levels in (("ERROR", "FATAL"), ("WARN",), ("INFO", "DEBUG")):
            lines = [p.first for p in self.patterns if cause.key in p.causes and p.level in levels
                     and not (levels[0] == "INFO" and HEALTHY_LINE.search(p.first.message))]
            if lines:
                found.append(min(lines, key=lambda line: (line.ts or 0, line.index)))
        return found

    def cue_line(self, cause: Cause) -> LogLine | None:
        lines = self.cue_lines(cause)
        return lines[0] if lines else None

    def cause_series(self, cause: Cause) -> list[Series]:
        """Series that moved the way the cause moves them, the cause's defining metric first."""
        def rank(s: Series) -> tuple:
            index = next((i for i, (p, _) in enumerate(cause.metrics) if p.search(s.name)), len(cause.metrics))
            return (index, s.direction != "saturated", -s.severity)
        moved = [s for s in self.series if cause.matches_series(s.name, s.direction)]
        return sorted(moved, key=rank)


def _cause_rank(key: str) -> int:
    return next(i for i, cause in enumerate(CAUSES) if cause.key == key)


class Observations:
    """The successful tool results of a run, parsed once, with per-service profiles."""

    def __init__(self, tool_results: Iterable[Mapping[str, Any]]):
        self.lines: list[LogLine] = []
        self.series: list[Series] = []
        self.alerts: list[Alert] = []
        self.knowledge: list[KnowledgeChunk] = []
        self.failed: list[str] = []
        self.suspicious: Counter = Counter()
        self.queried: list[str] = []  # services asked for by name, in order
        self.calls: set[str] = set()
        seen_lines, seen_series, seen_alerts = set(), set(), set()
        for item in tool_results or ():
            tool, args = item.get("tool_name"), item.get("arguments") or {}
            self.calls.add(_canonical(str(tool), args))
            result = item.get("result")
            if item.get("status") != "SUCCESS" or not isinstance(result, Mapping):
                self.failed.append(f"{tool}({_short(_json(args), 80)}): {_short(item.get('error') or item.get('status'), 120)}")
                continue
            inv = str(item.get("invocation_id"))
            if tool in ("query_logs", "query_metrics") and isinstance(args.get("service"), str):
                if args["service"] not in self.queried:
                    self.queried.append(args["service"])
            if tool == "query_logs":
                for j, rec in enumerate(result.get("records") or []):
                    if not isinstance(rec, Mapping) or not isinstance(rec.get("message"), str):
                        continue
                    key = (rec.get("service"), rec.get("timestamp"), rec.get("message"))
                    if key in seen_lines:
                        continue
                    seen_lines.add(key)
                    service = str(rec.get("service") or args.get("service") or "")
                    if _suspicious(rec["message"]):
                        self.suspicious[service] += 1
                        continue
                    self.lines.append(LogLine(inv, j, str(rec.get("timestamp", "")), _parse_ts(rec.get("timestamp")),
                                              service, str(rec.get("level", "INFO")).upper(), rec["message"]))
            elif tool == "query_metrics":
                self._add_series(inv, result, seen_series)
            elif tool == "query_alerts":
                for k, raw in enumerate(result.get("alerts") or []):
                    if not isinstance(raw, Mapping):
                        continue
                    labels = {str(a): str(b) for a, b in (raw.get("labels") or {}).items()}
                    notes = raw.get("annotations") or {}
                    summary = notes.get("summary")
                    key = (labels.get("alertname"), labels.get("service"), summary)
                    if key in seen_alerts or not isinstance(summary, str) or _suspicious(summary):
                        continue
                    seen_alerts.add(key)
                    self.alerts.append(Alert(inv, k, labels, summary, str(notes.get("description", "")),
                                             str(raw.get("state", "firing")), str(raw.get("activeAt", ""))))
            elif tool == "lookup_knowledge":
                for i, raw in enumerate(result.get("results") or []):
                    if isinstance(raw, Mapping) and isinstance(raw.get("content"), str):
                        self.knowledge.append(KnowledgeChunk(inv, i, str(raw.get("title", "")), str(raw.get("path", "")),
                                                             raw["content"], str(raw.get("source_type", "runbook"))))
        _pair_limits(self.series)
        self.profiles: dict[str, Profile] = {}
        self._build_profiles()

    def _add_series(self, inv: str, result: Mapping[str, Any], seen: set) -> None:
        for i, raw in enumerate(result.get("series") or []):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("description"), str):
                continue
            labels = {str(a): str(b) for a, b in (raw.get("labels") or {}).items()}
            key = tuple(sorted(labels.items()))
            if key in seen:
                continue
            seen.add(key)
            points = []
            for pair in raw.get("values") or []:
                try:
                    t, v = float(pair[0]), float(pair[1])
                except (TypeError, ValueError, IndexError):
                    continue
                if math.isfinite(v):
                    points.append((t, v))
            if points:
                self.series.append(_analyse_series(Series(inv, i, labels, points, raw["description"])))

    def _build_profiles(self) -> None:
        for line in self.lines:
            self.profile(line.service).lines.append(line)
        for series in self.series:
            self.profile(series.service).series.append(series)
        for alert in self.alerts:
            if alert.service:
                self.profile(alert.service).alerts.append(alert)
        for profile in self.profiles.values():
            _analyse_profile(profile)

    def profile(self, service: str) -> Profile:
        if service not in self.profiles:
            self.profiles[service] = Profile(service)
        return self.profiles[service]

    def has(self, service: str) -> bool:
        profile = self.profiles.get(service)
        return bool(profile and (profile.lines or profile.series))


# --------------------------------------------------------------------------- metric anomalies


def _analyse_series(series: Series) -> Series:
    """Baseline (median of the first third), noise, direction of a significant move, onset, severity."""
    values = [v for _, v in series.points]
    head = values[: max(1, len(values) // 3)]
    base = statistics.median(head)
    spread = statistics.pstdev(head) if len(head) > 1 else 0.0
    noise = max(spread, 0.02 * abs(base), 1e-9)
    peak, trough, last = max(values), min(values), values[-1]
    up, down = peak - base, base - trough
    rel_up = up / abs(base) if base else (math.inf if up > 0 else 0.0)
    rel_down = down / abs(base) if base else 0.0
    z_up, z_down = up / noise, down / noise
    is_up = up > 0 and ((z_up >= 6 and rel_up >= 0.25) or (z_up >= 4 and rel_up >= 1.0))
    is_down = down > 0 and ((z_down >= 6 and rel_down >= 0.25) or (z_down >= 4 and rel_down >= 0.6))
    series.baseline, series.noise, series.peak, series.trough, series.last = base, noise, peak, trough, last
    saturated = False
    if RATIO_METRIC.search(series.name) and SATURABLE_METRIC.search(series.name):
        scale = 100.0 if series.name.lower().endswith("_percent") else 1.0
        saturated = peak / scale >= 0.95 and base / scale < 0.85
    if saturated:
        series.direction = "saturated"
    elif is_up and (not is_down or z_up >= z_down):
        series.direction = "up"
    elif is_down:
        series.direction = "down"
    elif spread == 0 and last != base and values.count(last) >= 2:
        series.direction = "changed"  # a flat series that stepped to a new level: a deploy, a config value
    if series.direction in ("up", "saturated"):
        series.onset = _onset(series.points, lambda v: v - base, max(3 * noise, 0.2 * up))
        series.severity = min(z_up, 60) / 10 + min(rel_up, 10) + (3 if saturated else 0)
    elif series.direction == "down":
        series.onset = _onset(series.points, lambda v: base - v, max(3 * noise, 0.2 * down))
        series.severity = min(z_down, 60) / 10 + min(rel_down, 10)
    elif series.direction == "changed":
        series.onset = next((t for t, v in series.points if v != base), None)
        series.severity = 0.5
    return series


def _onset(points: list[tuple[float, float]], deviation: Callable[[float], float], threshold: float) -> float | None:
    return next((t for t, v in points if deviation(v) > threshold), None)


def _pair_limits(series: list[Series]) -> None:
    """`x_used_bytes` next to `x_max_bytes` (same other labels): saturated when the one meets the other."""
    by_key = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "__name__"))): s for s in series}
    for s in series:
        for word in ("used", "active", "in_use"):
            if f"_{word}_" not in f"_{s.name}_":
                continue
            others = tuple(sorted((k, v) for k, v in s.labels.items() if k != "__name__"))
            for limit_word in ("max", "limit", "capacity"):
                limit = by_key.get((re.sub(rf"(^|_){word}(_|$)", rf"\g<1>{limit_word}\g<2>", s.name), others))
                if limit and limit.last > 0:
                    s.limit = limit
                    if s.peak >= 0.98 * limit.last and s.baseline < 0.9 * limit.last:
                        up = s.peak - s.baseline
                        rel = up / abs(s.baseline) if s.baseline else 10.0
                        s.direction = "saturated"
                        s.onset = next((t for t, v in s.points if v >= 0.98 * limit.last), s.onset)
                        s.severity = 3 + min(up / max(s.noise, 1e-9), 60) / 10 + min(rel, 10)


# --------------------------------------------------------------------------- per-service reading


def _analyse_profile(profile: Profile) -> None:
    groups: dict[tuple[str, str], list[LogLine]] = {}
    for line in sorted(profile.lines, key=lambda l: (l.ts or 0, l.index)):
        groups.setdefault((line.level, _template(line.message)), []).append(line)
        if any(p.search(line.message) for p in CHANGE_PATTERNS):
            profile.changes.append(line)
        if line.level in ("ERROR", "FATAL", "WARN"):
            for ref in _dependencies(line.message, profile.service):
                profile.dependencies[ref] += 1
                profile.dependency_lines.setdefault(ref, line)
    for (level, template), lines in groups.items():
        causes = tuple(c.key for c in CAUSES if c.matches_text(lines[0].message))
        profile.patterns.append(Pattern(profile.service, level, template, lines, causes))
    info_credit: Counter = Counter()
    for pattern in profile.patterns:
        for key in pattern.causes:
            if pattern.level in ("ERROR", "FATAL", "WARN"):
                weight = 2.0 if pattern.level in ("ERROR", "FATAL") else 1.5
                profile.causes[key] += weight + 0.25 * min(pattern.count, 8)
            elif info_credit[key] < 1.0 and not HEALTHY_LINE.search(pattern.first.message):
                # Context lines count a little, however many there are; "replica lag 0 s, healthy" not at all.
                info_credit[key] += 0.5
                profile.causes[key] += 0.5
    for series in profile.series:
        for cause in CAUSES:
            if cause.matches_series(series.name, series.direction):
                profile.causes[cause.key] += 2.0 + (1.0 if series.direction == "saturated" else 0.0)
    for alert in profile.firing:
        for cause in CAUSES:
            if cause.matches_text(alert.text):
                profile.causes[cause.key] += 1.0
    # Routine warnings (a replayed idempotency key) do not date an incident; errors and cued warnings do.
    starts = [p.first.ts for p in profile.problem_patterns
              if p.first.ts is not None and (p.level != "WARN" or p.causes)]
    starts += [s.onset for s in profile.anomalies if s.onset is not None]
    profile.onset = min(starts) if starts else None


def _dependencies(message: str, own: str) -> list[str]:
    refs = []
    for pattern in DEPENDENCY_CONTEXT:
        for match in pattern.finditer(message):
            name = match.group("s").lower()
            if name != own.lower() and not name.startswith(own.lower() + "-") and not _is_id_like(name) \
                    and name not in GENERIC_HYPHENATED and name not in refs:
                refs.append(name)
    return refs


# --------------------------------------------------------------------------- the diagnosis


@dataclass
class Diagnosis:
    """What the evidence says: a root cause (service + category) or that nothing is wrong."""

    symptoms: list[str]
    root: str | None = None
    cause: Cause | None = None
    via: str = ""  # how the root was reached: self | dependency | same-cause | neighbour
    trigger: LogLine | None = None
    nothing_wrong: bool = False
    neighbour_line: LogLine | None = None
    neighbour_series: Series | None = None
    node_series: Series | None = None


def _named_symptoms(obs: Observations, named: list[str]) -> list[str]:
    """The services the question is about: those it names, else those queried after the alerts."""
    lowered = {p.lower(): p for p in obs.profiles}
    symptoms = [lowered[n.lower()] for n in named if n.lower() in lowered]
    if symptoms or named:
        return symptoms
    return [s for s in obs.queried if obs.has(s)]


def alerting_services(obs: Observations, question: str) -> list[str]:
    """Firing services: those whose name shares a word with the question first, then those the runbooks
    retrieved for the question name (a Chinese question names no ASCII service), then by severity and age."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", question or "")}
    retrieved = " ".join(f"{c.title} {c.content}" for c in obs.knowledge)
    ranked = sorted((a for a in obs.alerts if a.state == "firing" and a.service),
                    key=lambda a: (-len(words & set(a.service.lower().split("-"))), -retrieved.count(a.service),
                                   _alert_priority(a)))
    return list(dict.fromkeys(a.service for a in ranked))


def _alert_priority(alert: Alert) -> tuple:
    severity = {"critical": 0, "page": 0, "error": 1, "warning": 2}.get(alert.labels.get("severity", "").lower(), 3)
    return (0 if alert.state == "firing" else 1, severity, alert.active_at)


def diagnose(obs: Observations, named: list[str]) -> Diagnosis:
    symptoms = _named_symptoms(obs, named)
    diagnosis = Diagnosis(symptoms=symptoms)
    if not symptoms:
        return diagnosis
    scope = set(symptoms) | set(obs.queried)
    if not any(obs.profiles[s].has_signal for s in scope if s in obs.profiles):
        diagnosis.nothing_wrong = True
        return diagnosis
    votes: Counter = Counter()
    reasons: dict[str, tuple[str, Diagnosis]] = {}
    for symptom in symptoms:
        if not obs.profiles[symptom].has_signal:
            continue
        found = _trace_root(obs, symptom, symptoms, depth=0)
        votes[found.root] += 1
        reasons.setdefault(found.root, (symptom, found))
    if not votes:  # the named services are quiet but something they were queried with is not
        noisy = [s for s in scope if s in obs.profiles and obs.profiles[s].has_signal]
        found = _trace_root(obs, noisy[0], symptoms, depth=0)
        votes[found.root] += 1
        reasons[found.root] = (noisy[0], found)
    root = max(votes, key=lambda r: (votes[r], -(obs.profiles[r].onset or 0) if r in obs.profiles else 0))
    found = reasons[root][1]
    found.symptoms = symptoms
    if found.cause is None:
        found.cause = _root_cause_category(obs, found, reasons[root][0])
    found.trigger = _trigger(obs, found)
    return found


def _trace_root(obs: Observations, service: str, symptoms: list[str], depth: int) -> Diagnosis:
    profile = obs.profiles[service]
    cause = profile.dominant_cause()
    neighbour = _noisy_neighbour(obs, profile)
    if neighbour is not None:
        return neighbour
    onset = profile.onset
    for dep, _count in profile.dependencies.most_common():
        if not obs.has(dep) or depth >= 2:
            continue
        other = obs.profiles[dep]
        if (other.has_signal or _changed_before(other, onset)) and _not_later(other.onset, onset):
            deeper = _trace_root(obs, dep, symptoms, depth + 1)
            if deeper.root != dep or deeper.via != "self":
                return deeper
            return Diagnosis(symptoms, root=dep, via="dependency")
    if cause is not None:
        # A service the caller did not name but that shows the same trouble first: the caller's
        # errors are the echo (stale reads from a lagging replica, a full shared cache).
        echoed = [other for other in obs.profiles.values()
                  if other.service != service and other.service not in symptoms and obs.has(other.service)
                  and _own_cause_score(other, cause) > 0 and _not_later(other.onset, onset)]
        if echoed:
            first = min(echoed, key=lambda p: p.onset if p.onset is not None else math.inf)
            return Diagnosis(symptoms, root=first.service, via="same-cause")
    return Diagnosis(symptoms, root=service, via="self")


def _changed_before(profile: Profile, onset: float | None, window_s: float = 1800) -> bool:
    """A quiet dependency that shipped a change (a rollout, a config value) shortly before its caller broke."""
    if onset is None:
        return False
    times = [c.ts for c in profile.changes if c.ts is not None]
    times += [s.onset for s in profile.series if s.direction == "changed" and s.onset is not None]
    return any(onset - window_s <= t <= onset + 60 for t in times)


def _own_cause_score(profile: Profile, cause: Cause) -> float:
    score = sum(1.0 for p in profile.problem_patterns if cause.key in p.causes)
    return score + sum(1.0 for s in profile.anomalies if cause.matches_series(s.name, s.direction))


def _not_later(candidate: float | None, reference: float | None) -> bool:
    return candidate is None or reference is None or candidate <= reference + ONSET_TOLERANCE_S


def _noisy_neighbour(obs: Observations, profile: Profile) -> Diagnosis | None:
    """A service starved of CPU on a saturated node: the workload that took the node's CPU is the cause."""
    noisy = CAUSE_BY_KEY["noisy_neighbour_cpu"]
    starving = [s for s in profile.anomalies if noisy.matches_series(s.name, s.direction)]
    if not starving:
        return None
    for node in dict.fromkeys(s.labels.get("node") for s in profile.series if s.labels.get("node")):
        on_node = [s for s in obs.series if s.labels.get("node") == node or s.service == node]
        node_hot = [s for s in on_node if s.service == node and s.anomalous and s.direction in ("up", "saturated")]
        users = [s for s in on_node if s.service not in (profile.service, node) and "cpu" in s.name
                 and s.direction in ("up", "saturated")]
        scheduled = []
        for line in obs.profiles.get(node, Profile(node)).lines:
            match = SCHEDULED_POD.search(line.message)
            if match and match.group(2).rstrip(".,;") == node and noisy.matches_text(line.message):
                workload = _workload(match.group(1))
                if workload != profile.service:
                    scheduled.append((workload, line))
        if not (node_hot or users or scheduled):
            continue
        candidates = [s.service for s in sorted(users, key=lambda s: -s.severity)] + [w for w, _ in scheduled]
        root = candidates[0] if candidates else node
        return Diagnosis(
            [], root=root, cause=noisy, via="neighbour",
            neighbour_line=next((line for w, line in scheduled if w == root), scheduled[0][1] if scheduled else None),
            neighbour_series=next((s for s in users if s.service == root), None),
            node_series=max(node_hot, key=lambda s: s.severity) if node_hot else None,
        )
    return None


def _root_cause_category(obs: Observations, found: Diagnosis, symptom: str) -> Cause | None:
    profile = obs.profiles.get(found.root or "")
    if profile is not None and profile.dominant_cause() is not None:
        return profile.dominant_cause()
    caller = obs.profiles.get(symptom)
    if caller is not None and found.root in caller.dependency_lines:
        line = caller.dependency_lines[found.root]
        keys = [c for c in CAUSES if c.matches_text(line.message)]
        if keys:
            return keys[0]
    return caller.dominant_cause() if caller is not None else None


def _trigger(obs: Observations, found: Diagnosis) -> LogLine | None:
    """The latest change (deploy, config push, migration, batch start) shortly before the trouble began."""
    if found.via == "neighbour" and found.neighbour_line is not None:
        return found.neighbour_line
    profile = obs.profiles.get(found.root or "")
    if profile is None:
        return None
    starts = [obs.profiles[s].onset for s in found.symptoms if s in obs.profiles and obs.profiles[s].onset]
    onset = profile.onset or (min(starts) if starts else None)
    before = [c for c in profile.changes if c.ts is not None and (onset is None or c.ts <= onset + 60)]
    if not before:
        return None
    # Prefer a change that also names the cause (a config push disabling the cache, an index drop).
    if found.cause is not None:
        named = [c for c in before if found.cause.matches_text(c.message)]
        if named:
            return named[-1]
    return before[-1]


# --------------------------------------------------------------------------- claims


class ClaimBook:
    """Numbered claims with de-duplicated citations."""

    def __init__(self, start: int = 1):
        self.claims: list[dict[str, Any]] = []
        self.next_id = start
        self.cited: set[tuple[str, str]] = set()

    def add(self, statement: str, bindings: Iterable[dict[str, str] | None], *, reuse: bool = True) -> dict | None:
        evidence, seen = [], set()
        for b in bindings:
            if not b or not b.get("evidence_excerpt"):
                continue
            key = (b["source_invocation_id"], b["raw_path"])
            if key in seen or (not reuse and key in self.cited):
                continue
            seen.add(key)
            evidence.append(b)
        if not evidence or len(self.claims) >= MAX_CLAIMS:
            return None
        self.cited |= seen
        claim = {"claim_id": f"c{self.next_id}", "statement": statement, "evidence": evidence}
        self.next_id += 1
        self.claims.append(claim)
        return claim


ROOT_RE = re.compile(r"^Root cause \((?P<cause>[a-z_]+)\): (?P<service>\S+) — ")
AFFECTED_RE = re.compile(r"Affected: (?P<list>[^.]+)\.")
NOTHING_RE = re.compile(r"^No anomaly found for (?P<services>[^:]+):")
METRIC_RE = re.compile(r"^Metric (?P<metric>\S+) of (?P<service>\S+) (?:is anomalous \((?P<direction>\w+)\)|changed)")
LOGS_RE = re.compile(r"^Logs of (?P<service>\S+): (?P<count>\d+) (?P<level>[A-Z]+) line")
QUIET_LOGS_RE = re.compile(r"^Logs of (?P<service>\S+): no ERROR(?: or WARN)? lines among (?P<count>\d+) lines")
HEALTHY_METRICS_RE = re.compile(r"^Metrics of (?P<service>\S+) stay near baseline: (?P<names>.+)\.$")
ALERT_RE = re.compile(r"^Alert (?P<name>\S+) is (?P<state>\w+) for (?P<service>\S+)")
RUNBOOK_RE = re.compile(r"^Runbook \"(?P<title>[^\"]*)\" advises:")
MISMATCH_RE = re.compile(r"^Runbook \"(?P<title>[^\"]*)\" points to (?P<cause>[a-z_]+), but (?P<metric>\S+) of (?P<service>\S+) stays near baseline")
CHANGE_RE = re.compile(r"^Change in (?P<service>\S+) at (?P<at>\S+):")


def _series_statement(s: Series) -> str:
    if s.direction == "changed":
        return f"Metric {s.name} of {s.service} changed from {_number(s.baseline)} to {_number(s.last)} at {_iso(s.onset)}."
    if s.direction == "saturated" and s.limit is not None:
        detail = f"reached its limit {s.limit.name}={_number(s.limit.last)} (peak {_number(s.peak)}, baseline {_number(s.baseline)})"
    elif s.direction == "down":
        detail = f"fell from baseline {_number(s.baseline)} to {_number(s.trough)}"
    else:
        detail = f"rose from baseline {_number(s.baseline)} to {_number(s.peak)}"
    return f"Metric {s.name} of {s.service} is anomalous ({s.direction}): {detail}, starting {_iso(s.onset)}."


def _pattern_statement(p: Pattern) -> str:
    return (f"Logs of {p.service}: {p.count} {p.level} line{'s' if p.count != 1 else ''} like "
            f"\"{_short(p.first.message, 140)}\", first at {p.first.timestamp or '?'}.")


def build_claims(obs: Observations, found: Diagnosis, book: ClaimBook, language: str = "en") -> str:
    """Claims for a diagnosis, most important first; returns the summary."""
    if found.nothing_wrong:
        return _healthy_claims(obs, found, book)
    if found.root is None:
        for service in found.symptoms or obs.queried:
            _service_claims(obs.profiles.get(service), book)
        return "No service named in the question returned telemetry; nothing could be diagnosed."
    _root_claim(obs, found, book)
    # Only what this investigation looked at: the default demo world (or a real Alertmanager) also
    # returns the alerts of unrelated services.
    order = [s for s in dict.fromkeys([found.root, *found.symptoms, *obs.queried]) if obs.has(s)]
    for service in order:
        _service_claims(obs.profiles.get(service), book)
    if found.trigger is not None:
        t = found.trigger
        book.add(f"Change in {t.service} at {t.timestamp}: \"{_short(t.message, 160)}\".", [t.binding()], reuse=False)
    for alert in sorted(obs.alerts, key=_alert_priority):
        if alert.service in (found.root, *found.symptoms, *order) and alert.state in ("firing", "pending"):
            book.add(f"Alert {alert.name} is {alert.state} for {alert.service} since {alert.active_at}: {alert.summary}",
                     [alert.binding()], reuse=False)
    _runbook_claims(obs, found, book, language)
    cause = found.cause.label_en if found.cause else "unclassified failure"
    affected = [s for s in found.symptoms if s != found.root]
    return (f"Root cause: {found.root} — {cause}" + (f"; it explains the failures of {', '.join(affected)}" if affected else "")
            + ".")


def _root_claim(obs: Observations, found: Diagnosis, book: ClaimBook) -> None:
    cause = found.cause
    profile = obs.profiles.get(found.root or "", Profile(found.root or ""))
    bindings: list[dict[str, str] | None] = []
    if cause is not None:
        cues = profile.cue_lines(cause)
        bindings.append(cues[0].binding() if cues else None)
        series = profile.cause_series(cause)
        bindings.append(series[0].binding() if series else None)
        bindings += [line.binding() for line in cues[1:]]
    if found.neighbour_series is not None:
        bindings.append(found.neighbour_series.binding())
    if found.node_series is not None:
        bindings.append(found.node_series.binding())
    if found.trigger is not None:
        bindings.append(found.trigger.binding())
    affected = [s for s in found.symptoms if s != found.root]
    for service in affected:
        caller = obs.profiles.get(service)
        if caller is None:
            continue
        if found.root in caller.dependency_lines:
            bindings.append(caller.dependency_lines[found.root].binding())
        elif cause is not None and caller.cue_line(cause) is not None:
            bindings.append(caller.cue_line(cause).binding())
        if found.via == "neighbour":
            starving = [s for s in caller.anomalies if cause and cause.matches_series(s.name, s.direction)]
            bindings.append(starving[0].binding() if starving else None)
    impact = _impact_series(obs, affected or [found.root or ""])
    bindings.append(impact.binding() if impact else None)
    bindings = [b for b in bindings if b]
    if len(bindings) < 2:  # make sure the claim cites what the service itself showed
        bindings += [s.binding() for s in profile.anomalies[:2]] + [p.first.binding() for p in _top_patterns(profile)]
    alerts = [a for a in sorted(obs.alerts, key=_alert_priority) if a.service in (found.root, *affected)]
    if alerts:
        bindings.append(alerts[0].binding())
    label = cause.label_en if cause else "unclassified failure"
    text = f"Root cause ({cause.key if cause else 'unclassified'}): {found.root} — {label}."
    if affected:
        text += f" Affected: {', '.join(affected)}."
    if found.trigger is not None:
        text += f" It began after: \"{_short(found.trigger.message, 140)}\"."
    book.add(text, bindings[:8])


def _impact_series(obs: Observations, services: list[str]) -> Series | None:
    for service in services:
        profile = obs.profiles.get(service)
        if profile is None:
            continue
        symptom = [s for s in profile.anomalies if SYMPTOM_METRIC.search(s.name)] or profile.anomalies
        if symptom:
            return symptom[0]
    return None


def _top_patterns(profile: Profile) -> list[Pattern]:
    """The dominant ERROR and WARN shapes, plus the first one naming the service's main cause."""
    chosen: list[Pattern] = []
    for levels in (("ERROR", "FATAL"), ("WARN",)):
        group = [p for p in profile.patterns if p.level in levels]
        if group:
            chosen.append(max(group, key=lambda p: (p.count, -(p.first.ts or 0))))
    cause = profile.dominant_cause()
    if cause is not None:
        cued = [p for p in profile.problem_patterns if cause.key in p.causes and p not in chosen]
        if cued:
            chosen.append(min(cued, key=lambda p: p.first.ts or 0))
    return chosen


def _service_claims(profile: Profile | None, book: ClaimBook) -> None:
    """The service's most significant metric moves and its dominant error and warning shapes."""
    if profile is None:
        return
    for series in profile.anomalies[:3]:
        book.add(_series_statement(series), [series.binding()], reuse=False)
    for series in profile.series:
        if series.direction == "changed":
            book.add(_series_statement(series), [series.binding()], reuse=False)
    for pattern in _top_patterns(profile):
        book.add(_pattern_statement(pattern), [pattern.first.binding()], reuse=False)


def _healthy_claims(obs: Observations, found: Diagnosis, book: ClaimBook) -> str:
    services = [s for s in found.symptoms if s in obs.profiles]
    first: list[dict[str, str]] = []
    for service in services:
        profile = obs.profiles[service]
        ordered = sorted(profile.series, key=lambda s: (0 if SYMPTOM_METRIC.search(s.name) else 1, s.index))[:3]
        if ordered:
            book.add(f"Metrics of {service} stay near baseline: {', '.join(s.name for s in ordered)}.",
                     [s.binding() for s in ordered])
            first.append(ordered[0].binding())
        if profile.lines:
            info = [l for l in profile.lines if l.level not in ("ERROR", "FATAL", "WARN")]
            healthy = [l for l in info if HEALTHY_LINE.search(l.message)] or info
            warnings = sum(1 for l in profile.lines if l.level == "WARN")
            if healthy:
                line = healthy[-1]
                quiet = "no ERROR or WARN lines" if not warnings else "no ERROR lines"
                routine = f" ({warnings} routine WARN line{'s' if warnings != 1 else ''})" if warnings else ""
                book.add(f"Logs of {service}: {quiet} among {len(profile.lines)} lines{routine}; "
                         f"for example \"{_short(line.message, 100)}\".", [line.binding()])
                first.append(line.binding())
        for change in profile.changes[-1:]:
            book.add(f"Change in {service} at {change.timestamp}: \"{_short(change.message, 140)}\" "
                     "(no anomaly followed it).", [change.binding()])
    if first:
        book.claims.insert(0, {
            "claim_id": "c0", "evidence": first[:2],
            "statement": f"No anomaly found for {', '.join(services)}: metrics stay near baseline, no error log lines, "
                         "no firing alert. Nothing wrong was found.",
        })
        for i, claim in enumerate(book.claims, start=1):
            claim["claim_id"] = f"c{i}"
        book.next_id = len(book.claims) + 1
    return f"No anomaly found for {', '.join(services)}: nothing wrong was found (metrics at baseline, no error lines, no firing alert)."


def _chunk_causes(chunk: KnowledgeChunk) -> Counter:
    counts: Counter = Counter()
    for _heading, line in chunk.lines():
        for cause in CAUSES:
            if cause.matches_text(line):
                counts[cause.key] += 1
    return counts


def _runbook_claims(obs: Observations, found: Diagnosis, book: ClaimBook, language: str) -> None:
    cause = found.cause
    if cause is None:
        return
    services = [s for s in {found.root, *found.symptoms} if s]
    # A runbook is about this incident when a section of it seen in this run names the cause; its
    # remediation section then applies even if that section does not name it again.
    about_cause = {c.path for c in obs.knowledge if cause.matches_text(f"{c.title}\n{c.content}")}
    about_root = {c.path for c in obs.knowledge if found.root and found.root in f"{c.title}\n{c.content}"}
    scored: list[tuple[float, KnowledgeChunk, str]] = []
    for chunk in obs.knowledge:
        counts = _chunk_causes(chunk)
        if chunk.path not in about_cause:
            continue  # a runbook that never mentions this kind of failure has no advice for it
        for position, (heading, line) in enumerate(chunk.lines()):
            score = (3 if REMEDIATION_HEADING.search(heading) else 0) + (2 if cause.matches_text(line) else 0)
            if found.root in line:
                score += 1
            elif any(s in line for s in services):
                score -= 2  # advice about the service that only shows the symptom
            score -= 0.05 * position  # runbooks list the first thing to do first
            score += 1 + (1 if chunk.path in about_root else 0)
            score += 1 if question_language(line) == language else 0  # advice the reader can read as is
            if counts and not counts.get(cause.key):
                score -= 3  # a section about another kind of failure
            condition = CONDITIONAL_ADVICE.match(line)
            if condition and not cause.matches_text(condition.group(1)):
                score -= 3  # "If X: do Y" for an X that is not what happened here
            if REMEDIATION_HEADING.search(heading) and not _suspicious(line):
                scored.append((score, chunk, line))
    used: Counter = Counter()
    for score, chunk, line in sorted(scored, key=lambda x: (-x[0], x[1].invocation_id, x[1].index)):
        key = f"{chunk.invocation_id}#{chunk.index}"
        if score < 4 or used[key] >= 2 or sum(used.values()) >= 3:
            continue
        used[key] += 1
        book.add(f"Runbook \"{chunk.title}\" advises: {_short(line, 200)}", [chunk.binding(line)])
    _runbook_mismatch(obs, found, book)


def _runbook_mismatch(obs: Observations, found: Diagnosis, book: ClaimBook) -> None:
    """A runbook that blames another cause whose own metric is flat here: say so, with both citations."""
    cause = found.cause
    services = [s for s in dict.fromkeys([found.root, *found.symptoms]) if s in obs.profiles]
    documents: dict[str, Counter] = {}
    for chunk in obs.knowledge:
        documents.setdefault(chunk.path, Counter()).update(_chunk_causes(chunk))
    for chunk in obs.knowledge:
        counts = documents[chunk.path]
        if not counts or counts.get(cause.key):
            continue  # the runbook also knows the cause found here: no contradiction
        other = CAUSE_BY_KEY[max(counts, key=lambda k: (counts[k], -_cause_rank(k)))]
        flat = [s for svc in services for s in obs.profiles[svc].series if other.watches(s.name) and s.direction is None]
        line = next((l for h, l in chunk.lines()
                     if other.matches_text(l) and CAUSES_HEADING.search(h) and not _suspicious(l)), None)
        if flat and line:
            s = flat[0]
            book.add(f"Runbook \"{chunk.title}\" points to {other.key}, but {s.name} of {s.service} stays near baseline "
                     f"({_short(s.description, 120)}).", [chunk.binding(line), s.binding()])
            return


# --------------------------------------------------------------------------- follow-up queries


def follow_up_calls(obs: Observations, named: list[str], offered: set[str], question: str) -> list[tuple[str, dict]]:
    """Where the first results point: a dependency named in errors, the node of a CPU-starved service,
    the database of a service with database-side symptoms, the services of firing alerts."""
    wanted: list[tuple[str, dict]] = []
    queried = {s.lower() for s in obs.queried}
    services: list[str] = []

    def want_service(name: str) -> None:
        if name and name.lower() not in queried and name not in services:
            services.append(name)

    symptoms = _named_symptoms(obs, named)
    if not named and not symptoms:
        # No service in the question: follow the one alert it most likely means, not every alert firing.
        for service in alerting_services(obs, question)[:1]:
            want_service(service)
    for service in symptoms:
        profile = obs.profiles.get(service)
        if profile is None:
            continue
        for dep, _n in profile.dependencies.most_common(2):
            want_service(dep)
        noisy = CAUSE_BY_KEY["noisy_neighbour_cpu"]
        if any(noisy.matches_series(s.name, s.direction) for s in profile.anomalies):
            for node in dict.fromkeys(s.labels.get("node") for s in profile.series if s.labels.get("node")):
                if node.lower() not in queried:
                    wanted.append(("query_logs", {"service": node, "limit": LOG_LIMIT}))
                    wanted.append(("query_metrics", {"query": f'{{node="{node}"}}'}))
        cause = profile.dominant_cause()
        if cause is not None and cause.remote and not profile.dependencies:
            for candidate in _runbook_dependencies(obs, service, cause):
                want_service(candidate)
            if cause.key in ("db_replication_lag", "slow_downstream_dependency") and not services:
                # Naming convention as a last resort: the service's own database.
                stem = re.sub(r"-(?:service|svc|api)$", "", service)
                if stem != service:
                    want_service(f"{stem}-db")
    for service in services[:MAX_FOLLOW_UP_SERVICES]:
        wanted.append(("query_logs", {"service": service, "limit": LOG_LIMIT}))
        wanted.append(("query_metrics", {"service": service}))
    causes = [obs.profiles[s].dominant_cause() for s in symptoms if s in obs.profiles]
    cause = next((c for c in causes if c is not None), None)
    if cause is not None:
        # Ask for what to do, in the reader's language: remediation sections are what the answer needs.
        action = "处置 处理 建议" if question_language(question) == "zh" else "remediation fix"
        terms = " ".join(dict.fromkeys([*(services[:1] or symptoms[:1]), cause.search, action]))
        wanted.append(("lookup_knowledge", {"query": terms, "top_k": KNOWLEDGE_TOP_K + 2}))
    return [(tool, args) for tool, args in wanted if tool in offered and _canonical(tool, args) not in obs.calls]


def _runbook_dependencies(obs: Observations, service: str, cause: Cause) -> list[str]:
    """Services a runbook names on a line about the same kind of failure (where to look next)."""
    found: list[str] = []
    for chunk in obs.knowledge:
        for _heading, line in chunk.lines():
            if not cause.matches_text(line):
                continue
            for match in SERVICE_IN_TEXT.finditer(line):
                name = match.group(1).lower()
                if name != service.lower() and SERVICE_SUFFIX.search(name) and not _is_id_like(name) and name not in found:
                    found.append(name)
    return found


# --------------------------------------------------------------------------- the roles


def _plan(si: Mapping[str, Any]) -> dict[str, Any]:
    question = str(si.get("question", ""))
    language = si.get("language") if si.get("language") in ("en", "zh") else question_language(question)
    allowed = set(si.get("allowed_tools") or DEFAULT_TOOLS)
    if si.get("mode") == "EVIDENCE_GAP_ONLY":
        steps, services = [], []
        for gap in ((si.get("retry_context") or {}).get("critical_evidence_gaps") or [])[:4]:
            query = gap.get("suggested_query") if isinstance(gap, Mapping) else None
            if not isinstance(query, Mapping) or query.get("tool") not in allowed or not isinstance(query.get("arguments", {}), Mapping):
                continue
            arguments = dict(query.get("arguments") or {})
            if any(_canonical(s["tool"], s["arguments"]) == _canonical(query["tool"], arguments) for s in steps):
                continue
            steps.append({"tool": query["tool"], "arguments": arguments, "purpose": _short(str(gap.get("gap", "")), 200)})
            if isinstance(arguments.get("service"), str):
                services.append(arguments["service"])
        goal = "Close the critical evidence gaps named by the verifier." if language == "en" else "补齐校验环节指出的关键证据缺口。"
        return {"version": PLAN_VERSION, "goal": goal, "services": list(dict.fromkeys(services)), "language": language,
                "steps": steps}
    services = services_in_question(question)
    steps: list[dict[str, Any]] = []

    def step(tool: str, arguments: dict, purpose: str) -> None:
        if tool in allowed:
            steps.append({"tool": tool, "arguments": arguments, "purpose": purpose})

    step("query_alerts", {}, "Active alerts: which services are firing and since when.")
    step("lookup_knowledge", {"query": question[:500], "top_k": KNOWLEDGE_TOP_K}, "Runbooks and past cases for this question.")
    for service in services:
        step("query_logs", {"service": service, "limit": LOG_LIMIT}, f"Recent log lines of {service}: errors, warnings, changes.")
        step("query_metrics", {"service": service}, f"Metric series of {service} against their baselines.")
    if services:
        goal = f"Find why {', '.join(services)} {'is' if len(services) == 1 else 'are'} misbehaving and cite the evidence."
    else:
        goal = "Find the failing services from the active alerts, then explain the incident with cited evidence."
    if language == "zh":
        goal = f"查明 {'、'.join(services) or '告警中的服务'} 出现问题的原因，并给出可核验的证据。"
    return {"version": PLAN_VERSION, "goal": goal, "services": services, "language": language, "steps": steps}


def _offered_tools(request: ChatRequest) -> set[str]:
    names = set()
    for spec in request.tools or ():
        name = (spec.get("function") or {}).get("name") if isinstance(spec, Mapping) else None
        if isinstance(name, str):
            names.add(name)
    return names


def _tool_rounds(request: ChatRequest) -> int:
    """How many tool-call turns this executor already took: its own assistant messages in the conversation."""
    return sum(1 for m in request.messages if isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("tool_calls"))


def _tool_calls(calls: list[tuple[str, dict]], first_id: int) -> list[ToolCall]:
    return [ToolCall(id=f"call_{first_id + i}", name=tool, arguments=dict(args), raw_arguments=_json(args))
            for i, (tool, args) in enumerate(calls)]


_PRIORITY = {"query_alerts": 0, "query_logs": 1, "query_metrics": 1, "lookup_knowledge": 2}


def _executor(request: ChatRequest, si: Mapping[str, Any]) -> tuple[str | None, list[ToolCall]]:
    plan = si.get("plan") if isinstance(si.get("plan"), Mapping) else {}
    results = list(si.get("tool_results") or [])
    mode = si.get("mode") or plan.get("mode") or "NORMAL"
    budget = si.get("tool_budget") if isinstance(si.get("tool_budget"), int) else 0
    offered = _offered_tools(request)
    rounds = _tool_rounds(request)
    named = [s for s in plan.get("services") or [] if isinstance(s, str)] or services_in_question(str(si.get("question", "")))
    if offered and budget > 0:
        if rounds == 0:
            steps = [(s.get("tool"), s.get("arguments") or {}) for s in plan.get("steps") or [] if isinstance(s, Mapping)]
            steps = [(t, a) for t, a in steps if t in offered and isinstance(a, Mapping)]
            steps = sorted(dict((_canonical(t, a), (t, dict(a))) for t, a in steps).values(), key=lambda s: _PRIORITY.get(s[0], 3))
            if steps:
                return None, _tool_calls(steps[:budget], len(results) + 1)
        elif mode != "EVIDENCE_GAP_ONLY":
            # One follow-up round where the results point; two when the question named no service and
            # the first one only found which service the alerts are about.
            has_service_steps = any(isinstance(s, Mapping) and s.get("tool") in ("query_logs", "query_metrics")
                                    for s in plan.get("steps") or [])
            if rounds - 1 < (1 if has_service_steps else 2):
                obs = Observations(results)
                calls = follow_up_calls(obs, named, offered, str(si.get("question", "")))
                allowed = budget - GAP_RESERVE if budget > GAP_RESERVE + 2 else budget
                if calls and allowed > 0:
                    return None, _tool_calls(calls[:allowed], len(results) + 1)
    return _json(_evidence(si, results, named, mode)), []


def _evidence(si: Mapping[str, Any], results: list, named: list[str], mode: str) -> dict[str, Any]:
    obs = Observations(results)
    previous = si.get("previous_snapshot") if mode == "EVIDENCE_GAP_ONLY" else None
    if isinstance(previous, Mapping) and isinstance(previous.get("claims"), list):
        return _extend_snapshot(previous, obs)
    found = diagnose(obs, named)
    book = ClaimBook()
    language = si.get("language") if si.get("language") in ("en", "zh") else question_language(str(si.get("question", "")))
    summary = build_claims(obs, found, book, language)
    return {"version": EVIDENCE_VERSION, "summary": summary, "claims": book.claims, "open_questions": _open_questions(obs, found)}


def _open_questions(obs: Observations, found: Diagnosis) -> list[str]:
    questions = [f"Tool call failed: {failure}" for failure in obs.failed[:3]]
    for service, count in obs.suspicious.items():
        questions.append(f"{count} log line(s) of {service} read like instructions to an AI and were ignored as untrusted data.")
    if found.via == "neighbour" and found.root and not obs.has(found.root):
        questions.append(f"The metrics and logs of {found.root} itself were not queried.")
    return questions


def _extend_snapshot(previous: Mapping[str, Any], obs: Observations) -> dict[str, Any]:
    """EVIDENCE_GAP_ONLY: the full earlier snapshot, the root-cause claim strengthened, new claims added."""
    claims = [dict(c) for c in previous["claims"] if isinstance(c, Mapping)]
    numbers = [int(m.group(1)) for c in claims for m in [re.fullmatch(r"c(\d+)", str(c.get("claim_id", "")))] if m]
    book = ClaimBook(start=max(numbers, default=0) + 1)
    for claim in claims:
        match = ROOT_RE.match(str(claim.get("statement", "")))
        if not match:
            continue
        profile = obs.profiles.get(match.group("service"))
        cause = CAUSE_BY_KEY.get(match.group("cause"))
        if profile is None:
            continue
        extra: list[dict[str, str]] = []
        if cause is not None:
            extra += [s.binding() for s in profile.cause_series(cause)[:1]]
            cue = profile.cue_line(cause)
            extra += [cue.binding()] if cue else []
        extra += [s.binding() for s in profile.anomalies[:1]] + [p.first.binding() for p in _top_patterns(profile)[:1]]
        have = {(b.get("source_invocation_id"), b.get("raw_path")) for b in claim.get("evidence") or []}
        claim["evidence"] = list(claim.get("evidence") or []) + [
            b for b in dict(((b["source_invocation_id"], b["raw_path"]), b) for b in extra).values()
            if (b["source_invocation_id"], b["raw_path"]) not in have][:3]
    book.cited = {(b.get("source_invocation_id"), b.get("raw_path")) for c in claims for b in c.get("evidence") or []
                  if isinstance(b, Mapping)}
    for service in obs.profiles:
        _service_claims(obs.profiles[service], book)
    summary = str(previous.get("summary", ""))
    summary += f" The evidence retry added {len(book.claims)} claim(s) from {len(obs.calls)} new quer{'y' if len(obs.calls) == 1 else 'ies'}."
    return {"version": EVIDENCE_VERSION, "summary": summary.strip(), "claims": claims + book.claims,
            "open_questions": list(previous.get("open_questions") or [])[:10] + _open_questions(obs, Diagnosis([]))}


# --------------------------------------------------------------------------- verifier


TELEMETRY_TOOLS = ("query_logs", "query_metrics", "query_alerts")
V = {  # what the verifier says, in the language of the question (the composer quotes it)
    "pass": {"en": "The root cause ({cause} in {service}) is supported by evidence from {tools}, checked against the "
                   "patterns of its category.",
             "zh": "根因（{service} 的 {cause}）得到 {tools} 的证据支持，且证据符合该类故障的特征。"},
    "single": {"en": "the root cause in {service} is supported only by {tools}",
               "zh": "{service} 的根因只有 {tools} 的证据支持"},
    "gap_metrics": {"en": "{service}'s metrics would confirm or refute the root cause.",
                    "zh": "需要 {service} 的指标来证实或否定该根因。"},
    "gap_logs": {"en": "{service}'s logs would confirm or refute the root cause.",
                 "zh": "需要 {service} 的日志来证实或否定该根因。"},
    "healthy": {"en": "Metrics near baseline and logs without errors support that nothing is wrong.",
                "zh": "指标保持在基线附近、日志中没有错误，支持“未发现异常”的结论。"},
    "healthy_thin": {"en": "the no-anomaly finding rests on a single kind of telemetry",
                     "zh": "“未发现异常”的结论只有一种遥测数据支持"},
    "unexplained": {"en": "some observations are supported, but no verified claim explains the incident",
                    "zh": "部分观察结果得到支持，但没有经过校验的结论能解释本次故障"},
    "gap_errors": {"en": "No verified root cause; the error lines of {service} may name it.",
                   "zh": "尚无经过校验的根因；{service} 的错误日志可能指明原因。"},
    "reject": {"en": "No claim is supported by its evidence.", "zh": "没有任何结论得到其证据的支持。"},
    "capped": {"en": " Capped at the gatekeeper ceiling {ceiling}.", "zh": "（受校验上限 {ceiling} 限制。）"},
}


def _verify(si: Mapping[str, Any]) -> dict[str, Any]:
    language = si.get("language") if si.get("language") in ("en", "zh") else "en"

    def say(key: str, **values: Any) -> str:
        return V[key][language].format(**values)

    output = si.get("verified_executor_output") or {}
    claims = [c for c in output.get("claims") or [] if isinstance(c, Mapping)]
    ceiling = si.get("verdict_ceiling") if si.get("verdict_ceiling") in ("PASS", "LOW_CONFID", "REJECT") else "REJECT"
    checks, supported = [], {}
    for claim in claims:
        ok, why = _check_claim(claim)
        supported[claim.get("claim_id")] = ok
        checks.append({
            "claim_id": claim.get("claim_id"), "supported": ok, "rationale": why,
            "evidence_refs": [{"claim_id": claim.get("claim_id"), "source_invocation_id": b.get("source_invocation_id"),
                               "tool_name": b.get("tool_name"), "raw_path": b.get("raw_path")}
                              for b in claim.get("evidence") or [] if isinstance(b, Mapping)],
        })
    roots = [c for c in claims if ROOT_RE.match(str(c.get("statement", ""))) and supported.get(c.get("claim_id"))]
    nothing = [c for c in claims if NOTHING_RE.match(str(c.get("statement", ""))) and supported.get(c.get("claim_id"))]
    gaps: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    if roots:
        match = ROOT_RE.match(roots[0]["statement"])
        service = match.group("service")
        evidence = [b for b in roots[0].get("evidence") or [] if isinstance(b, Mapping)]
        tools = {b.get("tool_name") for b in evidence} & set(TELEMETRY_TOOLS)
        listed = ", ".join(sorted(tools)) or "lookup_knowledge"
        # Logs and metrics are independent views of a service: a cause both show is corroborated.
        corroborated = {"query_logs", "query_metrics"} <= tools
        facts.append({"fact": f"The root-cause service {service} appears in the cited evidence.",
                      "consistent": any(service in str(b.get("evidence_excerpt", "")) for b in evidence)})
        facts.append({"fact": f"The root cause is supported by logs and metrics (tools: {listed}).", "consistent": corroborated})
        if corroborated:
            verdict, rationale = "PASS", say("pass", cause=match.group("cause"), service=service, tools=listed)
        else:
            verdict, rationale = "LOW_CONFID", say("single", service=service, tools=listed)
            missing = "query_metrics" if "query_metrics" not in tools else "query_logs"
            arguments = {"service": service} if missing == "query_metrics" else {"service": service, "limit": LOG_LIMIT}
            gaps.append({"gap": say("gap_metrics" if missing == "query_metrics" else "gap_logs", service=service),
                         "suggested_query": {"tool": missing, "arguments": arguments}})
    elif nothing:
        tools = {b.get("tool_name") for c in claims if supported.get(c.get("claim_id")) for b in c.get("evidence") or []}
        verdict = "PASS" if {"query_logs", "query_metrics"} <= tools else "LOW_CONFID"
        rationale = say("healthy" if verdict == "PASS" else "healthy_thin")
        facts.append({"fact": "No anomaly was found in the verified evidence.", "consistent": True})
    elif any(supported.values()):
        verdict, rationale = "LOW_CONFID", say("unexplained")
        service = _first_service(claims)
        if service:
            gaps.append({"gap": say("gap_errors", service=service),
                         "suggested_query": {"tool": "query_logs", "arguments": {"service": service, "query": "level:ERROR,WARN",
                                                                                 "limit": LOG_LIMIT}}})
    else:
        verdict, rationale = "REJECT", say("reject")
    rank = {"REJECT": 0, "LOW_CONFID": 1, "PASS": 2}
    if rank[verdict] > rank[ceiling]:
        rationale += say("capped", ceiling=ceiling)
        verdict = ceiling
    score = {"PASS": 0.9, "LOW_CONFID": 0.55, "REJECT": 0.1}[verdict]
    if claims:
        score = round(score * (0.8 + 0.2 * sum(supported.values()) / len(claims)), 3)
    return {"verdict": verdict, "score": score, "claim_checks": checks, "fact_checks": facts,
            "critical_evidence_gaps": gaps if verdict == "LOW_CONFID" else [], "rationale": rationale}


def _check_claim(claim: Mapping[str, Any]) -> tuple[bool, str]:
    evidence = [b for b in claim.get("evidence") or [] if isinstance(b, Mapping)]
    excerpts = " ".join(str(b.get("evidence_excerpt", "")) for b in evidence)
    statement = str(claim.get("statement", ""))
    if not evidence:
        return False, "No verified evidence."
    root = ROOT_RE.match(statement)
    if root:
        cause = CAUSE_BY_KEY.get(root.group("cause"))
        if cause is None:
            return len(evidence) >= 2, "Unclassified root cause; supported only by the number of citations."
        text_hit = cause.matches_text(excerpts)
        metric_hit = any(cause.watches(m) for m in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\{)", excerpts))
        if text_hit or metric_hit:
            return True, f"The excerpts show the {cause.key} pattern ({'log text' if text_hit else 'metric'})."
        return False, f"No excerpt shows the {cause.key} pattern."
    metric = METRIC_RE.match(statement) or HEALTHY_METRICS_RE.match(statement)
    if metric:
        names = [metric.group("metric")] if "metric" in metric.groupdict() and metric.group("metric") else \
            [n.strip() for n in metric.groupdict().get("names", "").split(",")]
        ok = any(n and n in excerpts for n in names)
        return ok, "The cited series description matches the metric." if ok else "The cited series is another metric."
    return True, "The excerpt is quoted verbatim from the tool output."


def _first_service(claims: list[Mapping[str, Any]]) -> str | None:
    for claim in claims:
        for regex in (METRIC_RE, LOGS_RE, ALERT_RE, CHANGE_RE):
            match = regex.match(str(claim.get("statement", "")))
            if match and "service" in match.groupdict():
                return match.group("service")
    return None


# --------------------------------------------------------------------------- composer


T = {
    "summary_pass": {"en": "The offline analyser traced the incident to **{root}**: {label}.",
                     "zh": "离线分析器将本次故障定位到 **{root}**：{label}。"},
    "summary_low": {"en": "The most likely cause is **{root}**: {label}; confidence is limited.",
                    "zh": "最可能的原因是 **{root}**：{label}；但置信度有限。"},
    "summary_nothing": {"en": "No anomaly found: nothing wrong was detected for {services}. Metrics stay near their "
                                "baselines, the logs show no errors and no alert is firing; the service looks healthy.",
                        "zh": "未发现异常：{services} 的指标保持在基线附近，日志中没有错误，也没有告警触发，服务运行正常。"},
    "summary_reject": {"en": "The collected evidence could not be verified well enough to name a root cause.",
                       "zh": "收集到的证据未能通过校验，无法给出根因结论。"},
    "summary_unknown": {"en": "Some observations were verified, but none of them explains the incident yet.",
                        "zh": "部分观察结果已通过校验，但尚不足以解释本次故障。"},
    "verified": {"en": "{n} claim(s) were verified against this run's tool output.",
                 "zh": "共有 {n} 条结论通过了本次运行工具输出的校验。"},
    "root_head": {"en": "**Root cause**", "zh": "**根因**"},
    "assess_head": {"en": "**Assessment**", "zh": "**初步判断**"},
    "evidence_head": {"en": "**Evidence**", "zh": "**证据**"},
    "limits_head": {"en": "**Limitations**", "zh": "**局限性**"},
    "actions_head": {"en": "**Recommended actions**", "zh": "**建议措施**"},
    "affected": {"en": " It explains the failures of {services}.", "zh": "它导致了 {services} 的故障。"},
    "trigger": {"en": " It began after this change: `{excerpt}`.", "zh": "问题始于这次变更之后：`{excerpt}`。"},
    "low_reason": {"en": "Confidence is limited: {reason}", "zh": "置信度有限：{reason}"},
    "offline_limit": {"en": "Written by the offline analyser (rule-based pattern matching, no LLM): it recognises known "
                            "failure patterns and can miss new ones.",
                      "zh": "本回答由离线分析器生成（基于规则的模式匹配，未使用大模型）：它能识别常见故障模式，但可能遗漏新的故障类型。"},
    "window_limit": {"en": "Only the telemetry of the last hour and the services queried in this run were examined.",
                     "zh": "只检查了最近一小时的遥测数据，以及本次运行中查询过的服务。"},
    "no_evidence": {"en": "No evidence passed verification.", "zh": "没有证据通过校验。"},
    "nothing_action": {"en": "No action is needed now. If users still report failures, ask again with the exact symptom, "
                             "time and endpoint.",
                       "zh": "目前无需处理。如果用户仍反馈故障，请补充具体现象、时间和接口后重新提问。"},
    "reject_action": {"en": "Check the error logs and the key metrics (errors, latency, saturation) of the services involved, "
                            "and ask again naming the failing service.",
                      "zh": "检查相关服务的错误日志和关键指标（错误率、延迟、资源饱和度），并在提问时指明出问题的服务。"},
    "runbook_action": {"en": "{excerpt} (runbook “{title}”)", "zh": "{excerpt}（运维手册《{title}》）"},
    "missing": {"en": "Missing evidence: {gap}", "zh": "缺少的证据：{gap}"},
}


def _t(key: str, language: str, **values: Any) -> str:
    return T[key][language].format(**values)


def _evidence_line(claim: Mapping[str, Any], language: str, safe: Callable[[str], str]) -> str:
    statement = str(claim.get("statement", ""))
    evidence = [b for b in claim.get("evidence") or [] if isinstance(b, Mapping)]
    excerpt = safe(str(evidence[0].get("evidence_excerpt", ""))) if evidence else ""
    if language == "en":
        return safe(_short(statement, 320))
    directions = {"up": "上升", "down": "下降", "saturated": "达到上限", "changed": "发生变化"}
    if m := METRIC_RE.match(statement):
        return f"{m.group('service')} 的指标 {m.group('metric')} 异常（{directions.get(m.group('direction') or 'changed', '异常')}）：`{excerpt}`"
    if m := QUIET_LOGS_RE.match(statement):
        return f"{m.group('service')} 的 {m.group('count')} 行日志中没有 ERROR，例如：`{excerpt}`"
    if m := LOGS_RE.match(statement):
        return f"{m.group('service')} 日志中有 {m.group('count')} 条 {m.group('level')}，例如：`{excerpt}`"
    if m := HEALTHY_METRICS_RE.match(statement):
        return f"{m.group('service')} 的指标保持在基线附近（{m.group('names')}）：`{excerpt}`"
    if m := ALERT_RE.match(statement):
        state = "正在触发" if m.group("state") == "firing" else "待触发"
        return f"告警 {m.group('name')}（{m.group('service')}）{state}：{excerpt}"
    if m := MISMATCH_RE.match(statement):
        cause = CAUSE_BY_KEY.get(m.group("cause"))
        return (f"运维手册《{m.group('title')}》认为原因是{cause.label_zh if cause else m.group('cause')}，"
                f"但 {m.group('service')} 的 {m.group('metric')} 保持在基线附近")
    if m := RUNBOOK_RE.match(statement):
        return f"运维手册《{m.group('title')}》建议：{excerpt}"
    if m := CHANGE_RE.match(statement):
        return f"{m.group('service')} 在 {m.group('at')} 发生变更：`{excerpt}`"
    if m := NOTHING_RE.match(statement):
        return f"未发现 {m.group('services')} 的异常"
    return f"`{excerpt}`"


def _compose(si: Mapping[str, Any]) -> dict[str, Any]:
    """The composer's structure (answer_plan_v1): which verified claims are the root cause, evidence,
    impact and timeline, and the next steps. The server renders the words (diagnosis/answer_render.py)."""
    language = si.get("language") if si.get("language") in ("en", "zh") else "en"
    claims = [c for c in (si.get("verified_executor_output") or {}).get("claims") or [] if isinstance(c, Mapping)]
    verdict = si.get("effective_verdict") if si.get("effective_verdict") in ("PASS", "LOW_CONFID", "REJECT") else "REJECT"
    verifier = si.get("verifier") or {}
    unsupported = {c.get("claim_id") for c in verifier.get("claim_checks") or [] if isinstance(c, Mapping) and c.get("supported") is False}
    claims = [c for c in claims if c.get("claim_id") not in unsupported]
    plan: dict[str, Any] = {"version": "answer_plan_v1", "root_cause": [], "evidence": [], "impact": [],
                            "timeline": [], "next_steps": []}
    root = next((c for c in claims if ROOT_RE.match(str(c.get("statement", "")))), None)
    nothing = next((c for c in claims if NOTHING_RE.match(str(c.get("statement", "")))), None)
    actions: list[str] = []
    if verdict in ("PASS", "LOW_CONFID") and root is not None:
        plan["root_cause"].append(root["claim_id"])
        cause = CAUSE_BY_KEY.get(ROOT_RE.match(root["statement"]).group("cause"))
        if cause:
            actions += list(cause.actions(language))
    elif verdict in ("PASS", "LOW_CONFID") and nothing is not None:
        plan["evidence"].append(nothing["claim_id"])
        actions.append(_t("nothing_action", language))
    else:
        actions.append(_t("reject_action", language))

    def excerpt_language(claim) -> str:
        return question_language(str((claim.get("evidence") or [{}])[0].get("evidence_excerpt", "")))

    runbooks = [c for c in claims if RUNBOOK_RE.match(str(c.get("statement", "")))]
    # Advice in the reader's language first; a runbook in the other language is still quoted as is.
    if any(excerpt_language(c) == language for c in runbooks):
        runbooks = [c for c in runbooks if excerpt_language(c) == language]
    if verdict != "REJECT":
        plan["next_steps"] += [{"claim_id": c["claim_id"]} for c in runbooks[:3]]
    for claim in claims:
        if claim is root or claim is nothing or claim in runbooks:
            continue
        statement = str(claim.get("statement", ""))
        if CHANGE_RE.match(statement):
            plan["timeline"].append(claim["claim_id"])
        elif ALERT_RE.match(statement):
            plan["impact"].append(claim["claim_id"])
        elif not RUNBOOK_RE.match(statement):
            plan["evidence"].append(claim["claim_id"])
    plan["evidence"] = plan["evidence"][:8]
    plan["next_steps"] += [{"text": a} for a in actions[: max(1, 3 - len(plan["next_steps"]))]]
    return plan


# --------------------------------------------------------------------------- simple chat


def _simple(si: Mapping[str, Any], request: ChatRequest) -> str:
    question = str(si.get("question") or _last_user_text(request))
    language = question_language(question)
    services = services_in_question(question)
    if language == "zh":
        text = "你好！我是本诊断服务的离线分析器（基于规则，未使用大模型），不能自由聊天，但可以根据日志、指标、告警和运维手册诊断故障。"
        text += (f"如果想了解 {services[0]} 的问题，请以诊断模式提问，例如“{services[0]} 为什么报错？”。" if services
                 else "请在问题中指明服务名，例如“payment-service 为什么报错？”，我会给出带证据引用的诊断。")
        return text
    text = ("Hello! I am the offline analyser of this diagnosis service (rule-based, no LLM). I cannot chat freely, but I can "
            "diagnose incidents from logs, metrics, alerts and runbooks. ")
    text += (f"To look into {services[0]}, ask in diagnosis mode, e.g. “Why is {services[0]} failing?”." if services
             else "Name the service in your question, e.g. “Why is payment-service failing?”, to get a diagnosis with cited evidence.")
    return text


def _last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, Mapping) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


# --------------------------------------------------------------------------- alert analysis (role aiops)

AIOPS_MIN_TASK_CALLS = 3  # logs, metrics and runbooks of one service
AIOPS_SEVERITY = {"critical": 0, "page": 0, "error": 1, "high": 1, "warning": 2, "medium": 2, "info": 3, "low": 3}
CITATION_LIKE = re.compile(r"\binv-[\w-]*\w")
A = {  # the alert report, in the language of the alerts
    "alerts_head": {"en": "**Active alerts**", "zh": "**活跃告警**"},
    "table_head": {"en": "| alert | service | severity | state | since | analysed |",
                   "zh": "| 告警 | 服务 | 级别 | 状态 | 开始时间 | 已分析 |"},
    "no_alerts": {"en": "No active alert.", "zh": "当前没有活跃告警。"},
    "yes": {"en": "yes", "zh": "是"},
    "no": {"en": "no", "zh": "否"},
    "per_alert": {"en": "**Per alert**", "zh": "**逐条分析**"},
    "root": {"en": "Root cause: **{service}** — {label}.", "zh": "根因：**{service}**：{label}。"},
    "affected": {"en": " It also explains {services}.", "zh": "它同时导致了 {services} 的问题。"},
    "trigger": {"en": " It began after: `{excerpt}`.", "zh": "问题始于：`{excerpt}`。"},
    "nothing": {"en": "No anomaly found for {service}: its metrics stay near baseline and its logs show no errors; the "
                      "alert may be noise or its threshold too tight.",
                "zh": "未发现 {service} 的异常：指标保持在基线附近，日志中没有错误；该告警可能是误报或阈值过紧。"},
    "observations": {"en": "No verified root cause; verified observations:", "zh": "没有经过验证的根因；已验证的观察结果："},
    "no_evidence": {"en": "No evidence was verified for this alert (investigation status: {status}).",
                    "zh": "该告警没有任何证据通过校验（调查状态：{status}）。"},
    "not_analysed": {"en": "Not analysed in this run", "zh": "本次运行未分析的告警"},
    "hint": {"en": "the alert text points to {label}; no tool evidence verified this",
             "zh": "告警文本指向{label}，但没有工具证据验证这一点"},
    "conclusion": {"en": "**Conclusion**", "zh": "**结论**"},
    "analysed": {"en": "{n} of {total} alert(s) were analysed.", "zh": "共 {total} 条告警，已分析 {n} 条。"},
    "roots": {"en": "Verified root cause(s): {roots}.", "zh": "经过验证的根因：{roots}。"},
    "shared": {"en": " The alerts of {services} share one root cause in {root}.",
               "zh": "{services} 的告警源于同一个根因：{root}。"},
    "urgent": {"en": " Most urgent: {root} — {label}, behind the {severity} alert {alert}.",
               "zh": "最紧急的是 {root}（{label}），对应 {severity} 级告警 {alert}。"},
    "no_roots": {"en": "No root cause could be verified for the analysed alerts.",
                 "zh": "已分析的告警均未能验证出根因。"},
    "actions": {"en": "**Recommended actions**", "zh": "**建议措施**"},
    "risks": {"en": "**Risks**", "zh": "**风险**"},
    "risk_missing": {"en": "{n} alert(s) were not analysed within the round and tool budget: {names}.",
                     "zh": "在轮次和工具调用预算内，有 {n} 条告警未被分析：{names}。"},
    "risk_no_root": {"en": "No verified root cause for {services}; another incident may be hiding there.",
                     "zh": "{services} 没有经过验证的根因，可能还隐藏着其他故障。"},
    "risk_single": {"en": "The root cause in {service} rests on {tools} evidence only.",
                    "zh": "{service} 的根因只有 {tools} 的证据支持。"},
    "risk_failed": {"en": "The investigation of {service} did not complete ({status}).",
                    "zh": "对 {service} 的调查没有完成（{status}）。"},
    "risk_intake": {"en": "The active alerts could not be fetched: {error}.", "zh": "无法获取活跃告警：{error}。"},
}


def _a(key: str, language: str, **values: Any) -> str:
    return A[key][language].format(**values)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _alert_rows(si: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The alerts of an aiops request in the supervisor's compact shape; raw alerts (labels/annotations) too."""
    rows = []
    for i, raw in enumerate(si.get("alerts") or []):
        if not isinstance(raw, Mapping):
            continue
        labels = raw.get("labels") if isinstance(raw.get("labels"), Mapping) else {}
        notes = raw.get("annotations") if isinstance(raw.get("annotations"), Mapping) else {}
        rows.append({
            "alert_id": str(raw.get("alert_id") or f"a{i + 1}"),
            "alertname": str(raw.get("alertname") or labels.get("alertname", "")),
            "service": str(raw.get("service") or labels.get("service", "")),
            "severity": str(raw.get("severity") or labels.get("severity", "")),
            "state": str(raw.get("state") or raw.get("status") or "firing"),
            "since": str(raw.get("since") or raw.get("activeAt") or raw.get("startsAt") or ""),
            "summary": str(raw.get("summary") or notes.get("summary", "")),
            "description": str(raw.get("description") or notes.get("description", "")),
            "analysed": bool(raw.get("analysed")),
        })
    return rows


def _row_priority(row: Mapping[str, Any]) -> tuple:
    return (row["state"] != "firing", AIOPS_SEVERITY.get(row["severity"].lower(), 4), row["since"])


def _aiops_plan(si: Mapping[str, Any], language: str) -> dict[str, Any]:
    """PLAN one task per alerting service (most urgent first, as many as rounds and tools allow), then
    EXECUTE them one per round, then FINISH."""
    zh = language == "zh"
    alerts = _alert_rows(si)
    plan = [t for t in si.get("plan") or [] if isinstance(t, Mapping)]
    rounds_left = _int(si.get("max_rounds"), 4) - _int(si.get("round"), 1)
    budget = _int(si.get("tool_budget"), 0)
    if not alerts:
        return {"decision": "FINISH", "rationale": "没有需要分析的活跃告警。" if zh else "No active alert to analyse."}
    if not plan:
        groups: dict[str, list[dict]] = {}
        for row in sorted(alerts, key=_row_priority):
            if row["service"] and row["state"] in ("firing", "pending"):
                groups.setdefault(row["service"], []).append(row)
        capacity = min(rounds_left, budget // AIOPS_MIN_TASK_CALLS)
        if not groups or capacity < 1:
            return {"decision": "FINISH", "rationale": "没有可调查的服务或预算已用完。" if zh
                    else "No alert names a service that could be investigated within the budget."}
        tasks = []
        for n, (service, rows) in enumerate(list(groups.items())[:capacity], start=1):
            names = ", ".join(dict.fromkeys(r["alertname"] for r in rows))
            goal = (f"查明 {service} 的告警（{names}）的原因。" if zh
                    else f"Find why {names} {'fires' if len(rows) == 1 else 'fire'} for {service}.")
            tasks.append({"task_id": f"t{n}", "service": service, "alert_ids": [r["alert_id"] for r in rows], "goal": goal})
        left = len(groups) - len(tasks)
        rationale = (f"按紧急程度为 {len(tasks)} 个服务制定调查任务" + (f"，另有 {left} 个服务超出预算。" if left else "。")) if zh else \
            (f"One task per alerting service, most urgent first: {len(tasks)} task(s)"
             + (f"; {left} more service(s) do not fit the round and tool budget." if left else "."))
        return {"decision": "PLAN", "rationale": rationale, "plan": tasks}
    pending = [t for t in plan if t.get("status") == "pending"]
    if pending and budget > 0:
        task = pending[0]
        return {"decision": "EXECUTE", "task_id": task.get("task_id"), "tool_budget": max(1, budget // len(pending)),
                "rationale": (f"调查 {task.get('service')}。" if zh else f"Investigate {task.get('service')} next.")}
    return {"decision": "FINISH", "rationale": "计划中的任务已全部执行。" if zh else "Every planned task was executed."}


def _aiops_execute(request: ChatRequest, si: Mapping[str, Any], language: str) -> tuple[str | None, list[ToolCall]]:
    """Investigate one service: its logs, metrics and runbooks, then where they point; then cite what they show."""
    task = si.get("task") if isinstance(si.get("task"), Mapping) else {}
    service = str(task.get("service") or "")
    alerts = _alert_rows(si)
    results = list(si.get("tool_results") or [])
    context = list(si.get("context_results") or [])
    budget = _int(si.get("tool_budget"), 0)
    offered = _offered_tools(request)
    rounds = _tool_rounds(request)
    alert_text = " ".join(f"{a['alertname']} {a['summary']}" for a in alerts)
    if offered and budget > 0 and service:
        calls: list[tuple[str, dict]] = []
        if rounds == 0:
            calls = [("query_logs", {"service": service, "limit": LOG_LIMIT}), ("query_metrics", {"service": service}),
                     ("lookup_knowledge", {"query": f"{service} {alert_text}"[:500], "top_k": KNOWLEDGE_TOP_K})]
            calls = [(t, a) for t, a in calls if t in offered]
        elif rounds == 1:
            calls = follow_up_calls(Observations(context + results), [service], offered, alert_text)
        if calls:
            return None, _tool_calls(calls[:budget], len(results) + 1)
    obs = Observations(context + results)
    found = diagnose(obs, [service] if service else [])
    book = ClaimBook()
    summary = build_claims(obs, found, book, language)
    if (found.root and found.cause) or found.nothing_wrong:
        status = "COMPLETED"
    else:
        status = "PARTIAL" if book.claims else "FAILED"
    if found.root and found.root != service and not obs.has(found.root):
        hint = f"Query the logs and metrics of {found.root}."
    elif obs.failed:
        hint = f"A tool call failed: {obs.failed[0]}"
    elif not found.root and not found.nothing_wrong:
        hint = f"No telemetry of {service or 'the alert'} was found; check the service name of the alert."
    else:
        hint = ""
    return _json({"status": status, "summary": summary, "evidence": book.claims, "nextHint": hint}), []


def _aiops_report(si: Mapping[str, Any], language: str) -> str:
    """The Markdown alert-analysis report from the verified findings only."""
    alerts = _alert_rows(si)
    findings = [f for f in si.get("findings") or [] if isinstance(f, Mapping)]
    claims_of = {id(f): [c for c in f.get("verified_claims") or [] if isinstance(c, Mapping)] for f in findings}
    verified_ids = {str(b.get("source_invocation_id")) for claims in claims_of.values() for c in claims
                    for b in c.get("evidence") or [] if isinstance(b, Mapping)}
    legacy = Observations(si.get("tool_results") or []) if si.get("tool_results") else None

    def safe(text: str) -> str:
        text = CITATION_LIKE.sub(lambda m: m.group(0) if m.group(0) in verified_ids else "inv-…", str(text))
        return _short(text.replace("`", "'"), 220)

    def cite(claim: Mapping[str, Any]) -> str:
        ids = dict.fromkeys(str(b.get("source_invocation_id")) for b in claim.get("evidence") or []
                            if isinstance(b, Mapping) and str(b.get("source_invocation_id")) in verified_ids)
        return " ".join(f"[{i}]" for i in list(ids)[:4])

    def cell(value: str, limit: int = 80) -> str:
        return _short(value, limit).replace("|", "\\|") or "-"

    by_id = {a["alert_id"]: a for a in alerts}
    analysed = {a["alert_id"] for a in alerts if a["analysed"]} | {
        str(i) for f in findings for i in f.get("alert_ids") or []}
    lines = [BADGE[language], "", _a("alerts_head", language), ""]
    if alerts:
        lines += [_a("table_head", language), "|---|---|---|---|---|---|"]
        for a in alerts:
            lines.append(f"| {cell(a['alertname'])} | {cell(a['service'])} | {cell(a['severity'], 20)} | {cell(a['state'], 20)} "
                         f"| {cell(a['since'], 40)} | {_a('yes' if a['alert_id'] in analysed else 'no', language)} |")
    else:
        lines.append(_a("no_alerts", language))
    roots: list[tuple[Mapping, Mapping, str, Cause | None]] = []  # (finding, root claim, root service, cause)
    risks: list[str] = []
    lines += ["", _a("per_alert", language), ""]
    kinds = {"query_logs": ("Log", "日志"), "query_metrics": ("Metric", "指标"), "query_alerts": ("Alert", "告警"),
             "lookup_knowledge": ("Runbook", "运维手册")}
    for finding in findings:
        claims = claims_of[id(finding)]
        service = str(finding.get("service", ""))
        names = ", ".join(dict.fromkeys(by_id[i]["alertname"] for i in finding.get("alert_ids") or [] if i in by_id))
        lines.append(f"**{safe(names or service)}** ({safe(service)})")
        root = next((c for c in claims if ROOT_RE.match(str(c.get("statement", "")))), None)
        nothing = next((c for c in claims if NOTHING_RE.match(str(c.get("statement", "")))), None)
        others = [c for c in claims if c is not root and c is not nothing and not RUNBOOK_RE.match(str(c.get("statement", "")))]
        if root is not None:
            match = ROOT_RE.match(root["statement"])
            cause = CAUSE_BY_KEY.get(match.group("cause"))
            label = cause.label(language) if cause else ("未归类的故障" if language == "zh" else "unclassified failure")
            sentence = _a("root", language, service=match.group("service"), label=label)
            affected = AFFECTED_RE.search(root["statement"])
            if affected:
                sentence += _a("affected", language, services=affected.group("list"))
            trigger = re.search(r"It began after: \"(?P<t>.+?)\"\.", root["statement"])
            if trigger:
                sentence += _a("trigger", language, excerpt=safe(trigger.group("t")))
            lines.append(f"- {sentence} {cite(root)}".rstrip())
            for b in [b for b in root.get("evidence") or [] if isinstance(b, Mapping)][:3]:
                kind = kinds.get(str(b.get("tool_name")), ("Evidence", "证据"))[language == "zh"]
                lines.append(f"  - {kind}{'：' if language == 'zh' else ': '}`{safe(str(b.get('evidence_excerpt', '')))}` "
                             f"[{b.get('source_invocation_id')}]")
            roots.append((finding, root, match.group("service"), cause))
            tools = {str(b.get("tool_name")) for b in root.get("evidence") or [] if isinstance(b, Mapping)}
            if not {"query_logs", "query_metrics"} <= tools:
                risks.append(_a("risk_single", language, service=match.group("service"),
                                tools=", ".join(sorted(tools & {"query_logs", "query_metrics", "query_alerts"})) or "lookup_knowledge"))
        elif nothing is not None:
            lines.append(f"- {_a('nothing', language, service=service)} {cite(nothing)}".rstrip())
        elif claims:
            lines.append(f"- {_a('observations', language)}")
            others = claims
            risks.append(_a("risk_no_root", language, services=service))
        else:
            lines.append(f"- {_a('no_evidence', language, status=str(finding.get('status', '?')))}")
            risks.append(_a("risk_failed", language, service=service, status=str(finding.get("status", "?"))))
        for claim in others[:3]:
            lines.append(f"  - {_evidence_line(claim, language, safe)} {cite(claim)}".rstrip())
        lines.append("")
    missing = [a for a in alerts if a["alert_id"] not in analysed]
    if missing:
        lines.append(f"**{_a('not_analysed', language)}**")
    for a in missing[:20]:
        profile = legacy.profiles.get(a["service"]) if legacy else None
        cause = (profile.dominant_cause() if profile else None) or next(
            (c for c in CAUSES if c.matches_text(f"{a['alertname']} {a['summary']} {a['description']}")), None)
        hint = f": {_a('hint', language, label=cause.label(language))}" if cause is not None else ""
        lines.append(f"- {safe(a['alertname'])} ({safe(a['service'] or '-')}){hint}")
    if len(missing) > 20:
        lines.append(f"- … (+{len(missing) - 20})")
    lines += [_a("conclusion", language), _a("analysed", language, n=len(analysed & set(by_id)), total=len(alerts))]
    if roots:
        described = []
        for finding, _root, service, cause in roots:
            label = cause.label(language) if cause else "?"
            described.append(f"{service} — {label}" if language == "en" else f"{service}：{label}")
        lines[-1] += " " + _a("roots", language, roots="; ".join(dict.fromkeys(described)))
        shared: dict[str, list[str]] = {}
        for finding, _root, service, _cause in roots:
            shared.setdefault(service, []).append(str(finding.get("service", "")))
        for service, callers in shared.items():
            if len(set(callers)) > 1:
                lines[-1] += _a("shared", language, services=", ".join(dict.fromkeys(callers)), root=service)
        urgent = min(roots, key=lambda r: min((_row_priority(by_id[i]) for i in r[0].get("alert_ids") or [] if i in by_id),
                                              default=(True, 9, "")))
        first = min((by_id[i] for i in urgent[0].get("alert_ids") or [] if i in by_id), key=_row_priority, default=None)
        if first is not None and len({r[2] for r in roots}) > 1:
            lines[-1] += _a("urgent", language, root=urgent[2], label=urgent[3].label(language) if urgent[3] else "?",
                            severity=first["severity"] or "-", alert=first["alertname"])
    elif findings:
        lines[-1] += " " + _a("no_roots", language)
    actions: list[str] = []
    advice = [c for f in findings for c in claims_of[id(f)] if RUNBOOK_RE.match(str(c.get("statement", "")))]
    # Advice in the reader's language first; a runbook in the other language is still quoted as is.
    for claim in sorted(advice, key=lambda c: question_language(str(c.get("statement", ""))) != language):
        m = RUNBOOK_RE.match(str(claim.get("statement", "")))
        if m and len(actions) < 3:
            excerpt = safe(str((claim.get("evidence") or [{}])[0].get("evidence_excerpt", "")))
            actions.append(f"{_t('runbook_action', language, excerpt=excerpt, title=m.group('title'))} {cite(claim)}".rstrip())
    for _finding, _root, _service, cause in roots:
        if cause is not None and cause.actions(language)[0] not in actions:
            actions.append(cause.actions(language)[0])
    if actions:
        lines += ["", _a("actions", language)] + [f"{i}. {item}" for i, item in enumerate(actions[:5], start=1)]
    if missing:
        names = ", ".join(a["alertname"] for a in missing[:10]) + (" …" if len(missing) > 10 else "")
        risks.insert(0, _a("risk_missing", language, n=len(missing), names=safe(names)))
    intake = si.get("intake") if isinstance(si.get("intake"), Mapping) else {}
    if intake.get("status") not in (None, "SUCCESS"):
        risks.insert(0, _a("risk_intake", language, error=safe(str(intake.get("error") or intake.get("status")))))
    risks += [_t("offline_limit", language), _t("window_limit", language)]
    lines += ["", _a("risks", language)] + [f"- {item}" for item in dict.fromkeys(risks)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def _aiops(request: ChatRequest, si: Mapping[str, Any]) -> tuple[str | None, list[ToolCall]]:
    """The alert-analysis supervisor's phases: plan, execute, report (a report when no phase is given)."""
    language = si.get("language")
    if language not in ("en", "zh"):
        rows = _alert_rows(si)
        language = question_language(" ".join(f"{r['summary']} {r['description']}" for r in rows)
                                     or str(si.get("question", "")))
    phase = si.get("phase")
    if phase == "plan":
        return _json(_aiops_plan(si, language)), []
    if phase == "execute":
        return _aiops_execute(request, si, language)
    report = _aiops_report(si, language)
    return (_json({"status": "FINISH", "report_markdown": report}) if request.wants_json else report), []


# --------------------------------------------------------------------------- the model


class OfflineAnalyser:
    """The ChatModel of the embedded default: deterministic, rule-based, offline."""

    model_name = MODEL_NAME

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None = None) -> OfflineAnalyser:
        return cls()

    def complete(self, request: ChatRequest) -> ChatReply:
        started = time.perf_counter()
        si = request.structured_input
        if si is None and request.role not in ("simple", "aiops"):
            raise ModelNonRetryableError(
                f"The offline analyser reads the structured input of a {request.role} request; none was given",
                code="offline_no_structured_input", model=MODEL_NAME,
            )
        si = si or {}
        tool_calls: list[ToolCall] = []
        if request.role == "planner":
            content = _json(_plan(si))
        elif request.role == "executor":
            content, tool_calls = _executor(request, si)
        elif request.role == "verifier":
            content = _json(_verify(si))
        elif request.role == "composer":
            content = _json(_compose(si))
        elif request.role == "simple":
            content = _simple(si, request)
        else:  # aiops: the alert-analysis supervisor's phases
            content, tool_calls = _aiops(request, si)
        return ChatReply(
            content=content, tool_calls=tool_calls, usage=_usage(request, content, tool_calls), model=MODEL_NAME,
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
            finish_reason="tool_calls" if tool_calls else "stop",
        )


def _usage(request: ChatRequest, content: str | None, calls: list[ToolCall]) -> Usage:
    """Approximate tokens (four characters each) so budgets and audits have figures."""
    prompt_chars = sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else len(_json(m.get("content")))
                       for m in request.messages if isinstance(m, Mapping))
    prompt_chars += len(_json(request.tools)) if request.tools else 0
    completion_chars = len(content or "") + sum(len(c.raw_arguments) + len(c.name) for c in calls)
    prompt, completion = max(1, prompt_chars // 4), max(1, completion_chars // 4)
    return Usage(prompt, completion, prompt + completion)
