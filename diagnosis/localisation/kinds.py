"""The kind of a fault (``taxonomy.CAUSE_KINDS``), recognised from typed signals.

Each signal votes: a metric by its kind (CPU, memory, disk, pool saturation), a Kubernetes fact by its
reason, a change by its kind, and a log template by words that mean the same thing across stacks
(the phrases of glibc, Go, Java, Node.js, Python, PostgreSQL, MySQL, Redis, nginx and Envoy for the
same failure, and the Chinese terms for it). The words are matched case-insensitively on word boundaries against the template
text (placeholders masked), never against one incident's wording. A dependency's role (database,
cache, queue, external API) comes from the schemes, images and metric prefixes that name it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Mapping

from diagnosis.localisation.signals import Signal, metric_kind

# A table, one (kind, words, weight) row per kind: its rows are alike in shape by design.
_WORDS: tuple[tuple[str, str, float], ...] = (
    ("network.dns", r"域名解析|(?:主机名?|dns) ?解析失败|无法解析(?:主机|域名)|no such host|nxdomain|name resolution|unknownhost|enotfound|could not resolve(?! placeholder)|"
                    r"servfail|name or service not known|nodename nor servname|dns (?:lookup|resolution)|"
                    r"resolv(?!e placeholder)|lookup \S+ on", 3.0),
    ("network.tls", r"证书|x509|certificate|tls|ssl|handshake|pkix|cert(?:ificate)? (?:has )?expired|"
                    r"unknown authority", 3.0),
    ("network.refused", r"连接被拒绝|拒绝连接|连接重置|connection refused|econnrefused|connection reset|econnreset|reset by peer|"
                        r"broken pipe|connect(?:ion)? failed|no healthy upstream|upstream connect error|"
                        r"refused", 2.0),
    ("network.timeout", r"超时|timed? ?out|timeout|deadline exceeded|etimedout|context deadline|"
                        r"read timeout|upstream request timeout|took too long", 1.5),
    ("network.loss", r"丢包|网络不可达|no route to host|network is unreachable|ehostunreach|enetunreach|packet loss|"
                     r"retransmi|retranssegs|unreachable|packets? dropped|dropped packets|drops|"
                     r"(?:receive|transmit) (?:packets )?dropped", 3.0),
    ("resource.memory", r"内存不足|内存溢出|内存耗尽|out ?of ?memory|outofmemory|heap space|oomkilled|oom|cannot allocate memory|"
                        r"memory limit|gc overhead|killed process", 3.0),
    ("resource.disk", r"磁盘已满|磁盘空间不足|空间不足|no space left|enospc|disk (?:is )?full|filesystem (?:is )?full|disk quota|"
                      r"read-only file system|insufficient (?:disk|storage)|disk usage (?:exceeded|above|over)|"
                      r"(?:flood[- ]stage|high|low) (?:disk )?watermark|(?:low on|out of) disk", 3.0),
    ("resource.cpu", r"cpu|throttl(?:ed|ing) (?:cpu|cfs)|load average", 1.0),
    ("resource.pool", r"连接池|线程池|(?:connection|thread|worker|db|database|client) ?pool|pool (?:is )?(?:exhausted|full|"
                      r"timeout|limit|size)|hikaripool|connection is not available|too many connections|too many clients|max_connections|connection limit|"
                      r"no (?:available|free) (?:connection|worker|thread)|exhausted|"
                      r"remaining connection slots|queue (?:is )?full|rejectedexecution|"
                      r"(?:acquir|obtain|check ?out|borrow)\w* (?:a |an idle )?connection|queuepool limit|"
                      r"resourcerequest timed out|pool is probably full", 2.5),
    # A setting its program cannot read, as loaders word it (Spring's "Failed to bind properties", Go's "invalid
    # duration", a value "is not a valid" one), and the settings file a loader names (``/etc/x/application.yml``).
    ("change.config", r"配置|无法绑定|绑定失败|不是(?:一个)?合法的|不合法|非法的?(?:值|参数|配置)|"
                      r"config(?:uration|map)?(?![a-z])|invalid (?:value|setting|option|duration|directive)|"
                      r"missing (?:key|setting|env)|unknown (?:option|directive|setting)|parse error in|yaml|toml|resolve placeholder|"
                      r"(?:failed|unable) to bind|is not a valid (?:duration|value|number|integer|boolean|size)|"
                      r"[\w/-]\.(?:ya?ml|properties|toml|ini|conf|cfg)(?![\w.])", 1.5),
    ("change.secret", r"密码|凭据|认证失败|鉴权失败|secret|credential|password|access denied|authentication failed|unauthori[sz]ed|"
                      r"invalid (?:api )?key|forbidden|permission denied|40[13](?!\d)", 2.0),
    ("change.image", r"imagepull|errimagepull|image|manifest unknown|pull access denied", 2.0),
    ("change.flag", r"feature flag|flag|toggle|experiment", 2.0),
    ("change.deploy", r"deploy|rollout|release|version|upgrade|rolled out|new revision", 1.0),
    ("dependency.database", r"数据库|从库|主库|主从|复制延迟|死锁|锁等待|database|deadlock|lock wait|replica(?:tion)? lag|slave lag|sqlstate|"
                            r"slow query|query execution|jdbc|postgres|mysql|mariadb|mongo", 1.5),
    ("dependency.cache", r"缓存|redis|memcache|cache|maxmemory|evict", 1.5),
    ("dependency.queue", r"消息队列|消息积压|消费延迟|kafka|rabbit|amqp|broker|consumer|partition|nats|sqs|pubsub|queue", 1.5),
    ("dependency.external_api", r"third[- ]party|external api|partner|provider|upstream api|vendor", 1.5),
    # A parser's "line 1 column 5" is a position in a text, not a table's column: only a column missing counts.
    ("data.schema", r"no such (?:table|column)|doesn't exist|does not exist|schema|migration|undefined (?:table|column)|"
                    r"unknown column|relation \S+ does not exist|missing field", 2.5),
    # A message its consumer cannot read, as parsers word it (V8's JSON.parse "in JSON at position", Go's
    # encoding/json "looking for beginning of value", Jackson's JsonParseException), and the broker handing it
    # back again and again (redelivered, requeued). "解析失败" alone is a parse that failed ("支付金额解析失败");
    # a failed name lookup says whose name ("域名解析失败", "DNS 解析失败") and is network.dns.
    ("data.poison_message", r"(?<!域名)(?<!主机)(?<!主机名)(?<!dns)(?<!dns )解析失败|反序列化|deserializ|unmarshal|malformed|cannot (?:parse|decode)|[a-z]*decod(?:e|ing) ?error|unparseable|poison|"
                            r"dead[- ]letter|dlq|invalid (?:json|payload|message|record)|in json at position|"
                            r"looking for beginning of value|json ?parse ?exception|redeliver|requeu", 2.5),
    ("capacity.rate_limit", r"限流|rate ?limit|too many requests|429(?!\d)|throttl|slow down|request limit", 3.0),
    ("capacity.quota", r"配额|quota|limit exceeded|exceeded (?:the )?limit|resourceexhausted|insufficient quota", 3.0),
    ("scheduling.pending", r"failedscheduling|unschedulable|insufficient (?:cpu|memory)|pending|"
                           r"didn't match|untolerated taint", 3.0),
    ("scheduling.eviction", r"evict", 2.5),
    ("scheduling.node_pressure", r"memorypressure|diskpressure|pidpressure|node pressure|nodenotready", 3.0),
)
_COMPILED = [(kind, re.compile(rf"(?<![A-Za-z0-9])(?:{words})", re.I), weight) for kind, words, weight in _WORDS]

_METRIC_KINDS = {"cpu": "resource.cpu", "memory": "resource.memory", "disk": "resource.disk"}
_OWN_RESOURCE_KINDS = tuple(_METRIC_KINDS.values())
_KUBE_REASONS = (
    (re.compile(r"OOMKill(?:ed|ing)|SystemOOM", re.I), "resource.memory"),  # the container's state, the node's events
    (re.compile(r"Evict", re.I), "scheduling.eviction"),
    (re.compile(r"FailedScheduling|Unschedulable", re.I), "scheduling.pending"),
    (re.compile(r"ImagePull|ErrImage|InvalidImageName", re.I), "change.image"),
    (re.compile(r"\w+Pressure|NodeNotReady", re.I), "scheduling.node_pressure"),
)
# The ResourceQuota admission plugin's refusal, as the API server words it for every controller that creates
# pods ("... is forbidden: exceeded quota: <name>, requested: ..., used: ..., limited: ...").
_ADMISSION_QUOTA = re.compile(r"forbidden: exceeded quota\b", re.I)
_PROBE_FAILED = re.compile(r"\b(?:liveness|readiness|startup) probe failed\b", re.I)
_CHANGE_KINDS = {"config": "change.config", "secret": "change.secret", "rollout": "change.deploy",
                 "helm": "change.deploy", "argocd": "change.deploy"}
_ROLE_HINTS = (
    ("dependency.database", re.compile(r"jdbc:|postgres(?:ql)?://|mysql://|mongodb(?:\+srv)?://|"
                                       r"\b(?:mysql|mariadb|postgres|pg|mongodb|cassandra)_", re.I)),
    ("dependency.cache", re.compile(r"redis://|rediss://|memcached|\bredis_", re.I)),
    ("dependency.queue", re.compile(r"amqps?://|kafka://|nats://|\b(?:kafka|rabbitmq|nats)_", re.I)),
)
GENERIC = {"network.timeout", "network.refused", "change.deploy", "resource.cpu"}


def kind_support(kind: str, votes: Mapping[str, float]) -> float:
    """The votes for ``kind``. A specific change (an image, a setting, a flag, a secret) ships as a deploy,
    so what says a new version went out ("deploy", "version 2.4") supports it too."""
    support = votes.get(kind, 0.0)
    if kind.startswith("change.") and kind != "change.deploy":
        support += votes.get("change.deploy", 0.0)
    return support


MIN_KIND_VOTES = 1.2  # one passing word is not a kind


def kind_named(kind: str | None, votes: Mapping[str, float]) -> bool:
    """Whether the votes name this kind: more than one passing word supports it."""
    return kind is not None and kind_support(kind, votes) >= MIN_KIND_VOTES


def masked(text: str, names: set[str] | frozenset = frozenset()) -> str:
    """The text with service names blanked: a service called \"image-cache\" says nothing about images or caches.
    A name leaves a token in its place, so the phrase around it still reads ("lookup _.internal on")."""
    for name in sorted(names, key=len, reverse=True):
        if name and name in text:
            text = text.replace(name, "_")
    return text


# The names of a structured record's fields (JSON ``"key":``, logfmt ``key=``): the format's schema, not what
# happened. Envoy's ``response_flags`` says nothing about feature flags, ``retry_count=`` nothing of retries.
_FIELD_NAME = re.compile(r'"[A-Za-z_@][\w.@-]*"\s*:|(?<![\w.])[A-Za-z_][\w.]*=(?!=)')


# A JVM logger or class name's package path (``c.t.app.config.StartupRunner``, ``org.acme.cache.Loader``):
# where the code lives, not what happened. The class name after it stays (``SocketTimeoutException``).
_PACKAGE_PATH = re.compile(r"(?<![\w.])(?:[a-z][a-z0-9_]*\.){2,}(?=[A-Z])")


# The name of a setting a line speaks of (``property 'ledger.redis.timeout'``, ``属性 'a.cache.ttl'``, ``unknown
# directive "proxy_cache_valid"``): which setting, not what happened. Its words (redis, cache) name no dependency.
_SETTING_NAME = re.compile(r"(?<![A-Za-z])(propert(?:y|ies)(?: under)?|属性|配置项|参数|directive|setting|option|"
                           r"placeholder|parameter)\s*[:：]?\s*(?:['\"‘“`][\w.\-\[\]${}]+['\"’”`]|[A-Za-z]\w*[._][\w.\-]*)",
                           re.I)
_PLACEHOLDER = re.compile(r"\$\{[\w.:-]*\}")  # a reference to a setting by its name: ``${db.url}``


# A product and its version (``Version/17.4``, ``Safari/605.1.15``, ``HTTP/1.1``, ``okhttp/4.12.0``): which software
# sent or served a request, as user agents and server banners name it, not what happened.
_PRODUCT_TOKEN = re.compile(r"(?<![\w./-])[A-Za-z][\w.-]*/v?\d[\w.]*")  # from a token's start only: linear


def word_votes(text: str, names: set[str] | frozenset = frozenset()) -> Counter:
    text = _PRODUCT_TOKEN.sub(" ", text)
    text = _SETTING_NAME.sub(r"\1 ", _PLACEHOLDER.sub(" ", _FIELD_NAME.sub(" ", text)))
    text = _PACKAGE_PATH.sub("", masked(text, names))
    votes: Counter = Counter()
    for kind, pattern, weight in _COMPILED:
        if pattern.search(text):
            votes[kind] += weight
    return votes


def own_words(text: str, names: set[str] | frozenset = frozenset()) -> Counter:
    """The votes of a service's own line. A rate limit is an answer ("429 ... disk usage exceeded"): the reason
    it gives is the answerer's, whose disk or memory ran short, not that of the service that logs what it got."""
    votes = word_votes(text, names)
    if "capacity.rate_limit" in votes:
        for kind in _OWN_RESOURCE_KINDS:
            votes.pop(kind, None)
    return votes


def typed_reason(reason: str, message: str = "") -> str | None:
    """The kind a Kubernetes reason names by itself (OOMKilled, Evicted, FailedScheduling, ErrImagePull,
    MemoryPressure, a container's missing config or secret, a quota refusal), or None for the reasons every
    crash shows whatever its cause (BackOff, CrashLoopBackOff, Error, Unhealthy, Killing)."""
    kind = next((kind for pattern, kind in _KUBE_REASONS if pattern.search(reason)), None)
    if kind is None and reason == "CreateContainerConfigError":
        kind = "change.secret" if word_votes(message).get("change.secret") else "change.config"
    if kind is None and _ADMISSION_QUOTA.search(message):
        kind = "capacity.quota"
    return kind


def signal_votes(signal: Signal, names: set[str] | frozenset = frozenset()) -> Counter:
    votes: Counter = Counter()
    if signal.source == "metric":
        kind = _METRIC_KINDS.get(signal.kind)
        if kind:
            votes[kind] += 3.0 * signal.strength
        elif signal.kind == "saturation":
            votes["resource.pool"] += 1.0 * signal.strength
            votes.update({k: v * 0.3 for k, v in word_votes(signal.text.replace("_", " "), names).items()})
        else:  # what the series counts, by its name: dropped packets, evictions, throttled requests
            votes.update({k: v * 0.5 * signal.strength
                          for k, v in word_votes(signal.text.replace("_", " "), names).items()})
        return votes
    if signal.source == "kube":
        typed = typed_reason(signal.kind, masked(signal.text, names))
        if typed:
            votes[typed] += 4.0
            return votes
        # A probe's failure is the kubelet's own call to the service and what it answered (refused, timed out):
        # the service's own answer, as much as a line of its own. Other reasons' words are second-hand.
        weight = 1.0 if _PROBE_FAILED.search(signal.text) else 0.5
        votes.update({k: v * weight for k, v in word_votes(signal.text, names).items()})
        return votes
    if signal.source == "change":
        votes[change_kind(signal.kind, masked(str(signal.detail.get("what", "")), names))] += 2.0
        return votes
    if signal.source in ("log", "trace", "named"):
        said = own_words(signal.text, names) if signal.source == "log" else word_votes(signal.text, names)
        votes.update({k: v * signal.strength for k, v in said.items()})
    return votes


_CHANGE_WHAT = (
    ("change.flag", re.compile(r"feature[ _-]?flag|\bflag\b|toggle|experiment|rollout percentage", re.I)),
    ("change.secret", re.compile(r"secret|credential|password|api[ _-]?key|token|certificate", re.I)),
    # A rollout that says its image stayed ("image unchanged") changed something else: its pod template.
    ("change.image", re.compile(r"\bimage\b(?!\s+(?:is\s+|was\s+)?(?:unchanged|the same))|:\d+\.\d+\.\d+ -> |tag", re.I)),
    ("change.config", re.compile(r"config|setting|parameter|\S+=\S+|enabled|disabled|limit|timeout|size", re.I)),
)


_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|「[^」]*」')


def change_kind(kind: str, what: str) -> str:
    """A change record's kind, refined by what it says changed: a flag, a secret, an image, a setting. A quoted
    text is the release's own note ("show the verified-buyer flag"): what the release does, not what changed."""
    what = _QUOTED.sub(" ", what)
    if kind in ("secret", "config"):
        return _CHANGE_KINDS[kind] if kind == "secret" or not _CHANGE_WHAT[0][1].search(what) else "change.flag"
    for refined, pattern in _CHANGE_WHAT:
        if pattern.search(what):
            return refined
    return "change.deploy"


def role_of(service: str, texts: list[str], own_metrics: list[str] = (), external: set[str] = frozenset()) -> str | None:
    """The dependency role of a service when the evidence names it by a scheme or driver next to its name,
    when its own metrics carry a datastore exporter's prefix, or when it is an ExternalName Service."""
    if service in external:
        return "dependency.external_api"
    texts = [text for text in texts if service in text]  # the name must follow the hint in the same text
    for role, pattern in _ROLE_HINTS:
        if any(pattern.match(name) for name in own_metrics):
            return role
        for text in texts:
            for match in pattern.finditer(text):
                if not match.group(0).endswith("_") and service in text[match.end(): match.end() + 80]:
                    return role
    return None


def evident(kind: str, text: str) -> bool:
    """Whether a text (quoted records) shows a fault of this kind by the words or metric kinds that mean it."""
    if word_votes(text).get(kind):
        return True
    names = re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]{3,}", text)
    if any(_METRIC_KINDS.get(metric_kind(n, {})) == kind for n in names):
        return True
    # What a series counts, by the words of its name (``container_network_receive_packets_dropped_total``), as
    # the localiser reads it.
    return bool(word_votes(" ".join(n.replace("_", " ") for n in names if "_" in n)).get(kind))
