"""What a log line points at, and how long it says something took.

Leads are the dependencies a line names: ``host:port``, URLs (``jdbc:mysql://db-main:3306``,
``https://idp.internal/…``), Kubernetes service DNS names (``api.ns.svc.cluster.local``),
a resolver (``lookup x on 10.96.0.10:53``), ``upstream x``. They are read the same way for every
incident; the diagnosis queries them as further services within the tool budget.

Durations are read from the words real software writes (``"duration":"7.8s"``, ``completed in
10.01 s``, ``duration: 8841.227 ms``, ``"latency_ms":80``, ``耗时=12ms``) and compared with absolute
thresholds that the symptom stated in the question tightens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HOST = r"[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*"
HOST_PORT = re.compile(rf"(?<![\w.@/-])(?P<host>{_HOST}):(?P<port>\d{{2,5}})\b(?![.:]\d)", re.IGNORECASE)
URL = re.compile(rf"\b[a-z][a-z0-9+.-]*://(?:[^@/\s\"']+@)?(?P<host>{_HOST})(?::(?P<port>\d{{2,5}}))?", re.IGNORECASE)
IP_PORT = re.compile(r"(?<![\d.])(?P<ip>\d{1,3}(?:\.\d{1,3}){3}):(?P<port>\d{2,5})\b")
RESOLVER = re.compile(r"\blookup \S+ on (?P<ip>\d{1,3}(?:\.\d{1,3}){3}):53\b|\bnameserver (?P<ns>\S+)", re.IGNORECASE)
NAMED = re.compile(r"\b(?:upstream|dependency|backend|issuer|host|server|db|database|broker)s?[\"']?\s*[=:]\s*[\"']?"
                   rf"(?P<host>{_HOST})", re.IGNORECASE)
# Cluster-internal suffixes: the first label is the service (`api.ns.svc.cluster.local`).
INTERNAL_DOMAIN = re.compile(r"\.(?:svc(?:\.cluster\.local)?|cluster\.local|internal|local|lan|corp|intra)$", re.IGNORECASE)
NOT_A_HOST = frozenset({
    "http", "https", "tcp", "udp", "tls", "ssl", "line", "error", "warn", "info", "debug", "fatal", "level", "ts",
    "time", "at", "port", "localhost", "caused", "exception", "jdbc", "mysql", "postgresql", "redis", "file", "step",
    "id", "pid", "code", "status", "key", "user", "msg", "err", "duration", "latency", "took", "type", "thread",
})


@dataclass(frozen=True)
class Lead:
    """A dependency a line names: the service to query, and how the line named it."""

    service: str
    kind: str  # host_port | url | dns_name | resolver | named

    def __str__(self) -> str:
        return self.service


def _service_of(host: str) -> str | None:
    host = host.lower().rstrip(".")
    if not host or host in NOT_A_HOST or re.fullmatch(r"[\d.]+", host):
        return None
    if "." in host:
        first = host.split(".", 1)[0]
        if INTERNAL_DOMAIN.search(host) or "-" in first:
            host = first
        else:
            return None  # a public host name is not a service this run can query
    if host in NOT_A_HOST or len(host) < 3:
        return None
    return host


def leads_in(message: str, own: str, *, dns_failure: bool = False) -> list[Lead]:
    """The dependencies one line names, its own service excluded.

    A failed name lookup points at the resolver, never at the name looked up: that host was not reached.
    """
    found: list[Lead] = []
    own = own.lower()

    def add(name: str | None, kind: str) -> None:
        if not name or name == own or name.startswith(own + "-") or any(l.service == name for l in found):
            return
        found.append(Lead(name, kind))

    resolver = RESOLVER.search(message)
    if resolver or (dns_failure and any(m.group("port") == "53" for m in IP_PORT.finditer(message))):
        return found  # a resolver is reached by an address: no service name is guessed for it
    for match in URL.finditer(message):
        add(_service_of(match.group("host")), "url")
    for match in HOST_PORT.finditer(message):
        start = match.start()
        if message[max(0, start - 3):start] == "://":
            continue  # already read as a URL
        add(_service_of(match.group("host")), "dns_name" if "." in match.group("host") else "host_port")
    for match in NAMED.finditer(message):
        host = match.group("host")
        if "-" in host or "." in host:
            add(_service_of(host), "named")
    return found


# --------------------------------------------------------------------------- durations

_UNIT_S = {"ms": 0.001, "msec": 0.001, "millis": 0.001, "milliseconds": 0.001, "毫秒": 0.001,
           "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "秒": 1.0,
           "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "m": 60.0, "min": 60.0, "minutes": 60.0, "分钟": 60.0}
_UNITS = "|".join(sorted((re.escape(u) for u in _UNIT_S), key=len, reverse=True))
# A duration word, then a number with its unit: "took 3.2s", "completed in 10.01 s", "duration: 8841.2 ms",
# "\"duration\":\"7.8s\"", "耗时=12ms"; or a key that carries the unit: "\"latency_ms\":80", "elapsed_seconds=4".
DURATION = re.compile(
    rf"(?:\b(?:duration|took|elapsed|latency|response[_ ]time|request[_ ]time|completed in|finished in|done in|in|after)"
    rf"|耗时|用时)[\"']?\s*[:=]?\s*[\"']?(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>{_UNITS})(?![a-z])"
    rf"|\b(?:duration|took|elapsed|latency|response_time|request_time|time)_(?P<kunit>ms|millis|s|sec|seconds)[\"']?\s*[:=]\s*"
    rf"[\"']?(?P<knum>\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
# Slow enough to matter whatever the question says; the lower bound applies when the question states slowness.
SLOW_ABSOLUTE_S = 5.0
SLOW_STATED_S = 1.0

# The symptoms a question states, a vocabulary each (English, then Chinese): alike in shape only, no logic to share.
LATENCY_SYMPTOM = re.compile(r"\bslow|latenc|\btimes? out\b|timing out|\bhang|\bsluggish|响应慢|很慢|变慢|这么慢|慢|延迟|卡顿|超时",
                             re.IGNORECASE)
FAILURE_SYMPTOM = re.compile(
    r"\bfail|\berror|\bbroken|\bdown\b|\bcrash|restart|\bunavailable|\boutage|\b5\d\d\b|throwing|exception|"
    r"\bwhat(?:'s| is) (?:wrong|going on)|\bkeeps? \w+ing\b|\bmisbehav|\bacting up\b|\bnot working\b|\bdegraded\b|"
    r"\broot cause\b|\bincident\b|\balerts? (?:\w+ )?(?:firing|fired|went off)\b|\bpaged\b|"
    r"失败|报错|错误|故障|挂了|宕机|崩溃|重启|不可用|起不来|异常|出了什么问题|怎么了|根因|告警", re.IGNORECASE)
HEALTH_QUESTION = re.compile(r"^\s*(?:is|are|does|do)\b.*\b(?:healthy|ok|okay|fine|wrong)\b|正常吗|健康吗|有没有问题|有问题吗",
                             re.IGNORECASE)

# A question asking for a procedure ("how do I rotate ...", "what are the steps to ...", "如何扩容 ..."), not for an
# explanation of a state: it is answered from the runbooks, never with a root cause.
HOWTO_QUESTION = re.compile(
    r"^\s*(?:(?:please\s+)?(?:how\s+(?:do|can|should|would|could)\s+(?:i|we|you|one)\b|how\s+to\b)|"
    r"what(?:'s|\s+is|\s+are)\s+the\s+(?:steps|procedure|process|right\s+way|best\s+way)\b|"
    r"(?:the\s+)?(?:steps|procedure|runbook)\s+(?:for|to)\b)"
    r"|如何|怎么(?!了|回事|样了|会|又|一直|老是|总是)|怎样(?!了)|操作步骤|步骤是",
    re.IGNORECASE)


def howto_question(question: str) -> bool:
    """A how-to question that states no symptom: "How do I scale X?" is; "How do I fix the errors on X?" is not."""
    text = question or ""
    return bool(HOWTO_QUESTION.search(text)) and not (
        LATENCY_SYMPTOM.search(text) or FAILURE_SYMPTOM.search(text) or re.search(r"\bwhy\b|为什么", text, re.IGNORECASE))


def duration_s(message: str) -> float | None:
    """The longest duration the line states, in seconds (None when it states none)."""
    longest = None
    for match in DURATION.finditer(message):
        if match.group("num") is not None:
            value, unit = float(match.group("num")), match.group("unit").lower()
        else:
            value, unit = float(match.group("knum")), match.group("kunit").lower()
        seconds = value * _UNIT_S.get(unit, _UNIT_S.get(unit.rstrip("s"), 1.0))
        longest = seconds if longest is None else max(longest, seconds)
    return longest


@dataclass(frozen=True)
class Symptom:
    """What the question says is wrong: slowness, failures, or nothing (a health check)."""

    latency: bool = False
    failure: bool = False

    @property
    def stated(self) -> bool:
        return self.latency or self.failure

    @property
    def slow_threshold_s(self) -> float:
        return SLOW_STATED_S if self.latency else SLOW_ABSOLUTE_S


def stated_symptom(question: str) -> Symptom:
    text = question or ""
    if HEALTH_QUESTION.search(text) and not re.search(r"\bwhy\b|为什么", text, re.IGNORECASE):
        return Symptom()
    return Symptom(latency=bool(LATENCY_SYMPTOM.search(text)), failure=bool(FAILURE_SYMPTOM.search(text)))
