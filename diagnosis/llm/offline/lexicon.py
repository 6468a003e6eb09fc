"""The incident lexicon: causes, change and injection patterns, and small text helpers."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any, Mapping

from diagnosis.contracts import EXECUTOR_EVIDENCE_VERSION, INVOCATION_REF_RE
from diagnosis.llm.offline.cause import Cause, _m, _rx
from diagnosis.llm.offline.taxonomy import BROAD_CAUSES, LAST_ERROR

MODEL_NAME = "offline-analyser-v1"
EVIDENCE_VERSION = EXECUTOR_EVIDENCE_VERSION
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


# --------------------------------------------------------------------------- the incident lexicon


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
        _rx(r"outofmemoryerror", r"java heap space", r"gc overhead", r"full gc \(allocation failure\)",
            r"memory leak", r"\bunbounded\b", r"内存泄漏", r"内存溢出"),
        # Restarts alone are no leak (a crash loop restarts too); an OOM kill alone is a limit, not a leak.
        (_m(r"heap_used|memory_working_set|memory_usage_bytes|memory_rss", "up"), _m(r"gc_time", "up")),
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
        (_m(r"_revision$|_version$", "changed"),),
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
CAUSES = CAUSES + BROAD_CAUSES  # the broad taxonomy ranks after the categories above
CAUSE_BY_KEY = {cause.key: cause for cause in (*CAUSES, LAST_ERROR)}

# Deploys, config pushes, migrations, scheduling and batch starts: what usually precedes an incident.
CHANGE_PATTERNS = _rx(
    # Anchored: something was deployed, rolled out, reloaded or flipped ("Deployed x v2", "deployment x rolled
    # out", "signal 1 (SIGHUP) received, reconfiguring"), never a framework's start-up banner ("do not use it in
    # a production deployment", "Started App in 4.5 seconds") nor a sentence that merely says "rollout".
    r"\brolling update\b", r"\brollout (?:started|finished|complete[d]?|restart(?:ed)?|paused|resumed|\d+/\d+)",
    r"\b(?:successfully )?rolled (?:out|back)\b", r"\bdeploy(?:ed|ing)\b", r"\bdeploy \S+ v?\d",
    r"\bdeployment \S+ (?:rolled|rollout|updated|started|complete|progressing)", r"\bscaled (?:up|down) replica set\b",
    r"\bstarted \S+ v\d", r"\bv\d+\.\d+(?:\.\d+)?\s*->",
    r"\b(?:feature )?flag \S+ (?:set to|changed|flipped|turned (?:on|off)|enabled|disabled)\b",
    r"\bmigration \S+ (?:applied|started|complete)|\b(?:applying|applied|running) migrations?\b",
    r"\b(?:drop|create) index\b", r"\balter table\b", r"\bconfig(?:uration)? (?:push|reload|change)",
    r"\b(?:configuration|config) (?:file )?reloaded\b|\breloading (?:the )?config(?:uration)?(?: files?)?\b|\breconfiguring\b",
    r"\bapplied by\b", r"\bscheduled pod\b", r"\bfeature \S+ enabled\b", r"\b(?:job|batch) \S+ started\b",
    r"\bstarted (?:batch|job) \S+", r"大事务", r"批量更新", r"(?:发布|上线)(?:新)?版本|版本\S{0,12}(?:发布|上线)|灰度发布|全量发布|(?:发布|上线)\s*v\d",
    r"配置(?:已)?(?:重新加载|重载|热更新)|重新加载配置|功能开关\S{0,20}(?:开启|关闭|打开|切换)",
)
# Log text that addresses the reader instead of describing the system: data, never instructions.
INJECTION_PATTERNS = _rx(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier|your) (?:instructions|rules|prompts?)",
    r"disregard (?:all |any )?(?:the )?(?:previous|prior|above|your) ", r"\bsystem[ _]prompt\b", r"\byou are now\b",
    r"\bnew instructions?\b", r"\b(?:call|invoke|use) (?:the )?tool\b", INVOCATION_REF_RE.pattern, r"</?tool_output",
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
INVOCATION_REF = INVOCATION_REF_RE
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
    """Service-looking names in the question: hyphenated ASCII names such as web-frontend."""
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
    """`batch-job-5821-x7k2q` -> `batch-job`: drop the replica-set and pod suffixes."""
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


