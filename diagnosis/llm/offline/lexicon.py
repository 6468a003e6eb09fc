"""The incident lexicon: causes, change and injection patterns, and small text helpers."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any, Mapping

from wordfreq import zipf_frequency

from diagnosis.contracts import EXECUTOR_EVIDENCE_VERSION, INVOCATION_REF_RE
from diagnosis.llm.offline.cause import Cause, _m, _rx
from diagnosis.llm.offline.taxonomy import BROAD_CAUSES
from diagnosis.localisation.signals import KUBE_FAULTS

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



# --------------------------------------------------------------------------- the incident lexicon


CAUSES: tuple[Cause, ...] = (
    Cause(
        "db_connection_pool_exhausted",
        "database connection pool exhausted (connection pool exhaustion)",
        _rx(r"connection is not available", r"failed to obtain (?:jdbc )?connection", r"pool stats \([^)]*idle=0",
            r"connection leak detection", r"\bpool (?:is )?exhausted", r"no idle connections", r"too many connections",
            r"连接池(?:已)?(?:耗尽|打满|满)"),
        (_m(r"pool_(?:active|pending|waiting|in_use|used)", "up"),),
    ),
    Cause(
        "memory_leak_oom",
        "memory leak (heap growth ending in OutOfMemoryError / OOM kills)",
        _rx(r"outofmemoryerror", r"java heap space", r"gc overhead", r"full gc \(allocation failure\)",
            r"memory leak", r"\bunbounded\b", r"内存泄漏", r"内存溢出"),
        # Restarts alone are no leak (a crash loop restarts too); an OOM kill alone is a limit, not a leak.
        (_m(r"heap_used|memory_working_set|memory_usage_bytes|memory_rss", "up"), _m(r"gc_time", "up")),
    ),
    Cause(
        "disk_full",
        "disk full (No space left on device)",
        _rx(r"no space left on device", r"\bdisk (?:is )?full\b", r"disk usage on \S+ at (?:9\d|100)%",
            r"log rotation skipped", r"\bfull disk\b", r"磁盘(?:空间)?(?:已满|不足|写满|耗尽)"),
        (_m(r"disk_used|disk_usage|filesystem_used|volume_used", "up"), _m(r"disk_free|filesystem_avail|disk_avail", "down")),
    ),
    Cause(
        "slow_downstream_dependency",
        "slow downstream dependency (slow queries, full table scans)",
        _rx(r"\bslow quer(?:y|ies)\b", r"rows_examined=\d{5,}", r"\bkey=null\b", r"full table scan", r"\bdrop index\b",
            r"timeout after \d+ ?ms calling", r"upstream \S+ timed out", r"timed out calling", r"慢查询", r"全表扫描"),
        (_m(r"downstream_latency|dependency_latency|upstream_latency", "up"),
         _m(r"db_query_latency|query_duration|query_latency", "up"), _m(r"rows_examined", "up")),
    ),
    Cause(
        "noisy_neighbour_cpu",
        "noisy neighbour (CPU contention on a shared node)",
        _rx(r"\bcpu pressure\b", r"load average [\d.]+ on \d+ vcpu", r"qosclass=besteffort", r"cpu limit=none",
            r"\bcpu steal", r"noisy neighbou?r", r"neighbou?r (?:saturat|workload|pod|task|job)", r"邻居", r"cpu ?争用"),
        (_m(r"cpu_pressure", "up"), _m(r"node_cpu_utili[sz]ation", "up"), _m(r"node_load", "up"),
         _m(r"cpu_steal", "up"), _m(r"container_cpu_usage", "down")),
    ),
    Cause(
        "db_replication_lag",
        "database replication lag (the replica lags behind the primary, stale reads)",
        _rx(r"replication lag", r"replica(?:tion)? (?:is )?(?:lagging|behind)", r"seconds_behind_(?:master|source)",
            r"主从(?:同步)?延迟", r"复制延迟", r"落后于主库", r"过期数据", r"stale (?:read|data)"),
        (_m(r"replication_lag|replica_lag|seconds_behind", "up"),),
    ),
    Cause(
        "cache_memory_limit",
        "cache memory limit reached (maxmemory): writes are rejected",
        _rx(r"\bmaxmemory\b", r"oom command not allowed", r"\bnoeviction\b", r"cachewriterejected", r"evicted_keys",
            r"内存(?:达到)?上限", r"写入被拒绝"),
        (_m(r"(?:redis|cache|memcached)_memory_used", "up"), _m(r"rejected_writes", "up"), _m(r"evicted_keys|evictions_per", "up")),
    ),
    Cause(
        "cache_disabled",
        "cache disabled (the query cache is off, cache hit ratio collapsed)",
        _rx(r"cache (?:is )?disabled", r"cache\.size=0", r"cache: miss\b", r"缓存(?:已)?(?:禁用|关闭)"),
        (_m(r"cache_hit_ratio|cache_hit_rate|hit_ratio", "down"),),
    ),
    Cause(
        "upstream_breaking_change",
        "breaking API contract change in an upstream release (the response schema changed)",
        _rx(r"schema_version", r"\brenamed\b", r"has field '[^']+' and no '[^']+'", r"missing (?:required )?field",
            r"unknown field", r"breaking change", r"incompatible (?:schema|response|api)", r"contract (?:change|test)",
            r"broke(?:n)? the contract", r"接口变更", r"契约", r"字段.{0,6}(?:重命名|改名|删除)"),
        (_m(r"_revision$|_version$", "changed"),),
    ),
    Cause(
        "gc_pauses",
        "long garbage-collection pauses",
        _rx(r"(?:gc|garbage[- ]collection) pauses?", r"to-space exhausted", r"stop-the-world"),
        (_m(r"gc_pause", "up"),),
    ),
    Cause(
        "cpu_throttling",
        "CPU throttling (the CPU limit is too low)",
        _rx(r"\bthrottl(?:ed|ing)\b"),
        (_m(r"cpu_throttled", "up"),),
    ),
)
CAUSES = CAUSES + BROAD_CAUSES  # the broad taxonomy ranks after the categories above
CAUSE_BY_KEY = {cause.key: cause for cause in CAUSES}

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
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

_TOKEN = r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+"
SERVICE_IN_TEXT = re.compile(rf"(?<![\w./:-])({_TOKEN})(?![\w/-])", re.IGNORECASE)
DEPENDENCY_CONTEXT = tuple(
    re.compile(p.replace("TOKEN", _TOKEN), re.IGNORECASE) for p in (
        r"\bcalling\s+(?P<s>TOKEN)", r"\b(?:up|down)stream\s+(?P<s>TOKEN)", r"\bfrom\s+(?P<s>TOKEN)",
        r"\b(?:on|to|via|at)\s+(?P<s>TOKEN)(?=[\s:;,)]|$)", r"\((?P<s>TOKEN):\d+\)",
        r"(?P<s>TOKEN)\s+(?:returned|timed out|is unavailable|unavailable|refused|rejected)",
        r"\bconnect(?:ion|ing)?\s+(?:to\s+)?(?P<s>TOKEN)",
    )
)
GENERIC_HYPHENATED = frozenset({
    "on-call", "real-time", "end-to-end", "follow-up", "e-mail", "built-in", "up-to-date", "read-only", "long-running",
    "non-stop", "re-run", "time-out", "roll-back", "set-up", "check-in", "log-in", "sign-in", "x-request-id",
})


# --------------------------------------------------------------------------- small helpers


def question_language(text: str) -> str:
    """`zh` when the text is Chinese (the same rule as the agents' runtime), else `en`."""
    return "zh" if len(CJK.findall(text or "")) >= 2 else "en"


# The short words that join an English phrase ("add-to-cart", "pay-as-you-go", "state-of-the-art"); a service's
# name joins nouns, and often ends in a word names are built with (``_NAME_PARTS``).
_PHRASE_JOINERS = frozenset({"a", "an", "and", "as", "at", "by", "for", "in", "of", "on", "or", "the", "to", "up",
                             "you", "with"})


_NAME_PARTS = frozenset({"api", "svc", "service", "server", "srv", "db", "gw", "gateway", "worker", "web", "app", "proxy",
                         "bff", "backend", "frontend", "cache", "queue", "job", "cron", "ui"})


def _english_phrase(token: str) -> bool:
    """A hyphenated English phrase, not a name: words of English joined by a short word that joins phrases, and
    none of the words a service's name is built with ("store-to-door-api" is a name)."""
    parts = token.lower().split("-")
    return (len(parts) >= 3 and any(p in _PHRASE_JOINERS for p in parts) and not _NAME_PARTS & set(parts)
            and all(p in _PHRASE_JOINERS or zipf_frequency(p, "en") >= 3.0 for p in parts))


def _is_id_like(token: str) -> bool:
    """Order ids, hashes and invocation ids are hyphenated too; service names rarely carry 4+ digits."""
    return any(sum(c.isdigit() for c in seg) >= 4 or (len(seg) >= 6 and re.fullmatch(r"[0-9a-f]+", seg)
                                                    and any(c.isdigit() for c in seg))
               for seg in token.split("-")) or token.startswith(("inv-", "run-"))


# A word with a short number at its end is a host or workload name ("web01", "pricing2"), unless it is one of the
# versioned technology names questions mention.
NUMBERED_NAME = re.compile(r"(?<![\w./:-])([a-z]{3,}[0-9]{1,3})(?![\w/-])", re.IGNORECASE)
NUMBERED_TECHNOLOGY = re.compile(
    r"(?:https?|ipv|utf|sha|md|base|log4j|python|java|node|mysql|postgres|redis|tls|ssl|oauth|x|gpt|win|amd|arm|"
    r"iso|rfc|http|html|css|es|ecmascript|ubuntu|debian|centos|rhel|el|alpine|php|perl|ruby|go|dotnet|net|"
    r"vue|angular|react|spring|kafka|mongo|mongodb|elasticsearch|nginx|envoy|istio|jdk|jre|gcc|llvm|cuda)\d+$",
    re.IGNORECASE)


# A plain word that is no word of English is a name: "velmora", "kreteir". wordfreq's Zipf scale is log10 of a
# word's uses per billion words; below 1 means fewer than ten per billion across its corpora, which no English word
# and most technology names ("redis" 2.0, "nginx" 2.2, "postgres" 2.0) are not, and which "istio" or "kubelet" are:
# those are components a question asks about by name too. A Kubernetes reason ("oomkilled") is a state, not a
# name; a word after "namespace", "cluster", "node", "region" or "zone" names where, not what.
PLAIN_NAME = re.compile(r"(?<![\w./:-])([A-Za-z][a-z]{3,})(?![\w/-])")
PLAIN_NAME_MAX_ZIPF = 1.0
PLACE_BEFORE = re.compile(r"(?:namespace|cluster|node|region|zone|context|命名空间|集群|节点|区域)\s*[:=]?\s*$", re.IGNORECASE)


def _unknown_words(question: str) -> list[tuple[int, str]]:
    return [(match.start(), match.group(1)) for match in PLAIN_NAME.finditer(question)
            if zipf_frequency(match.group(1).lower(), "en") < PLAIN_NAME_MAX_ZIPF
            and not KUBE_FAULTS.fullmatch(match.group(1)) and not PLACE_BEFORE.search(question[:match.start()])]


def services_in_question(question: str) -> list[str]:
    """Service-looking names in the question: hyphenated ASCII names such as web-frontend, numbered names such as
    web01, and plain words that are no English word (``PLAIN_NAME``). A name that is also a word ("checkout") is
    read only once the evidence shows such a service: ``Observations.services_named_in``."""
    found: list[tuple[int, str]] = []
    for match in SERVICE_IN_TEXT.finditer(question or ""):
        token = match.group(1)
        low = token.lower()
        if low in GENERIC_HYPHENATED or _is_id_like(low) or _english_phrase(low) or low in (f.lower() for _at, f in found):
            continue
        found.append((match.start(), token))
    for match in NUMBERED_NAME.finditer(question or ""):
        token = match.group(1)
        if not NUMBERED_TECHNOLOGY.fullmatch(token) and token.lower() not in (f.lower() for _at, f in found):
            found.append((match.start(), token))
    for at, token in _unknown_words(question or ""):
        if token.lower() not in (f.lower() for _at, f in found):
            found.append((at, token.lower()))
    return [token for _at, token in sorted(found)][:MAX_NAMED_SERVICES]


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


