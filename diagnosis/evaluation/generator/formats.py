"""Log lines as real software writes them: JSON, logfmt, Logback/Log4j, zap, zerolog, klog, Python logging,
nginx, PostgreSQL, MySQL, Redis and RabbitMQ.

A generated event is (level, text, logger, optional error); ``render`` writes it in one node's format
with a ``{ts:<layout>}`` placeholder where that software prints its time (diagnosis/demo/README.md),
and says whether the record carries a level label or leaves the level to be read from the line.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from diagnosis.evaluation.generator.graph import Node

FORMATS = ("json", "logfmt", "logback", "log4j", "zap", "zerolog", "klog", "python", "nginx", "postgres", "mysql",
           "redis", "rabbitmq")


@dataclass(frozen=True)
class Failure:
    """An exception or error value attached to a line: class (or Go/Node error code) and message."""

    type: str
    message: str


@dataclass(frozen=True)
class Event:
    """What happened, before it is written in a format."""

    offset: float
    level: str  # DEBUG INFO WARN ERROR CRITICAL FATAL PANIC
    text: str
    logger: str = ""
    failure: Failure | None = None
    pid: int = 1
    raw: bool = False  # the text is the whole line already (an access log line)


_PY = {"WARN": "WARNING"}
_PG = {"INFO": "LOG", "WARN": "WARNING", "CRITICAL": "FATAL"}
_MYSQL = {"INFO": "Note", "WARN": "Warning", "ERROR": "ERROR", "CRITICAL": "ERROR", "FATAL": "ERROR"}
_REDIS = {"DEBUG": ".", "INFO": "*", "WARN": "#", "ERROR": "#", "CRITICAL": "#", "FATAL": "#"}
_PINO = {"DEBUG": 20, "INFO": 30, "WARN": 40, "ERROR": 50, "CRITICAL": 60, "FATAL": 60, "PANIC": 60}


def _java_trace(failure: Failure, logger: str, rng: random.Random) -> str:
    pkg = logger.rsplit(".", 1)[0] if "." in logger else "app"
    frames = [f"{pkg}.{rng.choice(('Repository', 'Client', 'Handler', 'Service'))}.{rng.choice(('load', 'call', 'send', 'find'))}"
              f"({rng.choice(('Repository', 'Client', 'Handler', 'Service'))}.java:{rng.randint(20, 400)})"
              for _ in range(rng.randint(2, 3))]
    return f"{failure.type}: {failure.message}\n" + "".join(f"\tat {f}\n" for f in frames) + \
        f"\t... {rng.randint(40, 90)} common frames omitted"


def _python_trace(failure: Failure, logger: str, rng: random.Random) -> str:
    module = logger.replace(".", "/") or "app"
    lines = ["Traceback (most recent call last):"]
    for _ in range(rng.randint(2, 3)):
        fn = rng.choice(("handle", "fetch", "process", "run", "_send"))
        lines.append(f'  File "/app/{module}.py", line {rng.randint(12, 480)}, in {fn}')
        lines.append(f"    result = {fn}(request)")
    lines.append(f"{failure.type}: {failure.message}")
    return "\n".join(lines)


def _logfmt_value(value: str) -> str:
    return f'"{value}"' if any(c in value for c in ' ="') else value


def render(node: Node, event: Event, rng: random.Random) -> tuple[str, str | None]:
    """The line ``node`` writes for ``event`` and the record's level label (None: read it from the line).

    Why it is long: one short branch per log format and technology; side by side, the differences between the
    formats stay visible."""
    fmt, level, text, failure = node.format, event.level, event.text, event.failure
    logger = event.logger or _logger(node, rng)
    labelled = rng.random() < 0.5  # half the streams carry a level label, the rest are read from the line
    if event.raw:
        return text, None
    if fmt == "json":
        if node.tech == "node":  # pino: numeric level, epoch millis
            record = {"level": _PINO.get(level, 30), "time": "{ts:epoch_millis}", "pid": event.pid,
                      "hostname": node.name, "msg": text}
            if failure:
                record["err"] = {"type": failure.type, "message": failure.message}
            return _json(record), level
        if node.tech == "python":  # python-json-logger / structlog
            record = {"timestamp": "{ts:iso}", "level": level.lower() if level != "WARN" else "warning",
                      "logger": logger, "event": text}
            if failure:
                record["exception"] = _python_trace(failure, logger, rng)
            return _json(record), (_PY.get(level, level) if labelled else None)
        record = {"@timestamp": "{ts:iso}", "level": level if level != "WARN" else "WARN", "logger_name": logger,
                  "thread_name": f"http-nio-{node.port}-exec-{rng.randint(1, 40)}", "message": text}
        if failure:
            record["stack_trace"] = _java_trace(failure, logger, rng) if node.tech == "java" else \
                f"{failure.type}: {failure.message}"
        return _json(record), (level if labelled else None)
    if fmt == "logfmt":
        caller = f"{logger.rsplit('/', 1)[-1]}.go:{rng.randint(20, 300)}" if node.tech == "go" else logger
        parts = ["ts={ts:iso}", f"level={level.lower()}", f"caller={caller}", f"msg={_logfmt_value(text)}"]
        if failure:
            parts.append(f"err={_logfmt_value(failure.message)}")
        return " ".join(parts), (level if labelled else None)
    if fmt == "zap":
        record = {"level": level.lower(), "ts": "{ts:epoch}", "caller": f"{logger}.go:{rng.randint(20, 300)}",
                  "msg": text}
        if failure:
            record["error"] = failure.message
        return _json(record), (level if labelled else None)
    if fmt == "zerolog":
        record = {"level": level.lower(), "time": "{ts:iso_seconds}", "message": text}
        if failure:
            record = {"level": level.lower(), "error": failure.message, "time": "{ts:iso_seconds}", "message": text}
        return _json(record), (level if labelled else None)
    if fmt == "klog":
        letter = {"DEBUG": "I", "INFO": "I", "WARN": "W", "ERROR": "E"}.get(level, "F")
        tail = f": {failure.message}" if failure else ""
        return f"{letter}{{ts:glog}}       1 {logger.rsplit('/', 1)[-1]}.go:{rng.randint(20, 300)}] {text}{tail}", None
    if fmt in ("logback", "log4j"):
        body = text
        if failure:
            body += "\n" + _java_trace(failure, logger, rng)
        if fmt == "logback":
            line = f"{{ts:iso}} {level:>5} 1 --- [{node.name}] [nio-{node.port}-exec-{rng.randint(1, 40)}] " \
                   f"{logger:<40} : {body}"
        else:
            line = f"{{ts:datetime}} [{rng.choice(('main', 'worker-1', 'pool-2-thread-3', 'scheduling-1'))}] " \
                   f"{level:<5} {logger} - {body}"
        return line, (level if labelled else None)
    if fmt == "python":
        body = text + ("\n" + _python_trace(failure, logger, rng) if failure else "")
        return f"{{ts:python}} {_PY.get(level, level)} [{logger}] {body}", (_PY.get(level, level) if labelled else None)
    if fmt == "nginx":
        return f"{{ts:nginx_error}} [{_nginx_level(level)}] {event.pid}#{event.pid}: {text}", None
    pid = event.pid if event.pid != 1 or fmt not in ("postgres", "mysql") else rng.randint(40, 99999)
    if fmt == "postgres":
        word = _PG.get(level, level)
        return f"{{ts:postgres}} [{pid}] {event.logger}{word}:  {text}", {"LOG": "INFO"}.get(word, word)
    if fmt == "mysql":
        return f"{{ts:iso_micros}} {pid} [{_MYSQL.get(level, 'Note')}] [MY-0{rng.randint(10000, 13999)}] " \
               f"[Server] {text}", None
    if fmt == "redis":
        return f"{event.pid}:M {{ts:redis}} {_REDIS.get(level, '*')} {text}", ("WARNING" if level in ("WARN", "ERROR")
                                                                               else level)
    if fmt == "rabbitmq":
        return f"{{ts:datetime}}+00:00 [{level.lower() if level != 'WARN' else 'warning'}] " \
               f"<0.{rng.randint(200, 9000)}.0> {text}", None
    raise ValueError(f"unknown log format {fmt!r}; known: {', '.join(FORMATS)}")


_JAVA_CLASSES = ("web.ApiController", "client.UpstreamClient", "repo.StoreRepository", "service.RequestService",
                 "config.StartupRunner")
_PY_MODULES = ("views", "client", "tasks", "db", "handlers")
_GO_FILES = ("internal/handler/handler", "internal/client/client", "cmd/server/main", "pkg/store/store")


def _logger(node: Node, rng: random.Random) -> str:
    """What the software names the code that wrote the line: a Java class, a Python module, a Go file."""
    stem = node.name.split("-")[0]
    if node.tech == "java":
        return f"c.{stem[0]}.{stem}.{rng.choice(_JAVA_CLASSES)}"
    if node.tech == "python":
        return f"{stem}.{rng.choice(_PY_MODULES)}"
    if node.tech == "go":
        return rng.choice(_GO_FILES)
    return node.name


def _nginx_level(level: str) -> str:
    return {"INFO": "notice", "WARN": "warn", "ERROR": "error", "CRITICAL": "crit", "FATAL": "emerg"}.get(level, "error")


def _json(record: dict) -> str:
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    # zap and pino write epoch times as JSON numbers, not strings
    return text.replace('"{ts:epoch}"', "{ts:epoch}").replace('"{ts:epoch_millis}"', "{ts:epoch_millis}")


def nginx_access(client_ip: str, method: str, path: str, status: int, size: int, seconds: float,
                 upstream_seconds: float | None) -> str:
    """An nginx ``combined`` access line with request and upstream times (its level is read from nothing:
    an access line carries none)."""
    urt = "-" if upstream_seconds is None else f"{upstream_seconds:.3f}"
    return (f'{client_ip} - - [{{ts:nginx}}] "{method} {path} HTTP/1.1" {status} {size} "-" '
            f'"Mozilla/5.0 (X11; Linux x86_64)" rt={seconds:.3f} urt="{urt}"')
