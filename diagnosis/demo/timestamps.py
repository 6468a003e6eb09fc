"""Timestamps inside raw log lines: ``{ts:<layout>}`` placeholders rendered from the record's served time.

A scenario stores times relative to "now", so a raw line cannot carry a fixed date. A line writes
``{ts:nginx}`` where nginx would print its time; the demo backend replaces it with the record's own
time (after the shift to "now") in that layout, so the text and the record's ``timestamp`` agree.
Every layout renders UTC. Stdlib only.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Callable

__all__ = ["TIMESTAMP_LAYOUTS", "PLACEHOLDER_RE", "placeholder_names", "render_timestamps"]

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _ms(t: datetime) -> str:
    return f"{t.microsecond // 1000:03d}"


# layout name -> (renderer, example for 2026-11-29 10:02:03.042 UTC, who writes it)
TIMESTAMP_LAYOUTS: dict[str, tuple[Callable[[datetime], str], str, str]] = {
    "iso": (lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.") + _ms(t) + "Z", "2026-11-29T10:02:03.042Z",
            "JSON loggers, Spring Boot 3 (UTC), logfmt ts=, zap ISO8601"),
    "iso_seconds": (lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"), "2026-11-29T10:02:03Z",
                    "Kubernetes, Go time.RFC3339"),
    "iso_micros": (lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "2026-11-29T10:02:03.042000Z",
                   "MySQL 8 error log"),
    "iso_offset": (lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.") + _ms(t) + "+00:00", "2026-11-29T10:02:03.042+00:00",
                   "Logback/Log4j ISO8601 with offset, Python isoformat"),
    "datetime": (lambda t: t.strftime("%Y-%m-%d %H:%M:%S.") + _ms(t), "2026-11-29 10:02:03.042",
                 "Logback/Log4j default, Spring Boot 2"),
    "python": (lambda t: t.strftime("%Y-%m-%d %H:%M:%S,") + _ms(t), "2026-11-29 10:02:03,042",
               "Python logging %(asctime)s"),
    "gunicorn": (lambda t: t.strftime("%Y-%m-%d %H:%M:%S +0000"), "2026-11-29 10:02:03 +0000",
                 "gunicorn error log"),
    "postgres": (lambda t: t.strftime("%Y-%m-%d %H:%M:%S.") + _ms(t) + " UTC", "2026-11-29 10:02:03.042 UTC",
                 "PostgreSQL log_line_prefix %m"),
    "nginx": (lambda t: f"{t.day:02d}/{_MONTHS[t.month - 1]}/{t.year}:{t:%H:%M:%S} +0000",
              "29/Nov/2026:10:02:03 +0000", "nginx/Apache access log $time_local"),
    "nginx_error": (lambda t: t.strftime("%Y/%m/%d %H:%M:%S"), "2026/11/29 10:02:03", "nginx error log"),
    "syslog": (lambda t: f"{_MONTHS[t.month - 1]} {t.day:2d} {t:%H:%M:%S}", "Nov 29 10:02:03",
               "RFC 3164 syslog (day padded with a space)"),
    "glog": (lambda t: t.strftime("%m%d %H:%M:%S.%f"), "1129 10:02:03.042000",
             "glog/klog, after the level letter: E1129 10:02:03.042000"),
    "redis": (lambda t: f"{t.day:02d} {_MONTHS[t.month - 1]} {t.year} {t:%H:%M:%S}.{_ms(t)}",
              "29 Nov 2026 10:02:03.042", "Redis server log"),
    "epoch": (lambda t: f"{t.timestamp():.3f}", "1795946523.042", "zap/zerolog JSON ts as float seconds"),
    "epoch_millis": (lambda t: str(round(t.timestamp() * 1000)), "1795946523042", "epoch milliseconds"),
}

PLACEHOLDER_RE = re.compile(r"\{ts:([a-z_]+)\}")


def placeholder_names(message: str) -> list[str]:
    """The layout names of every ``{ts:...}`` placeholder in ``message``, in order."""
    return PLACEHOLDER_RE.findall(message)


def render_timestamps(message: str, when: datetime) -> str:
    """``message`` with every ``{ts:<layout>}`` replaced by ``when`` (UTC) in that layout."""
    if "{ts:" not in message:
        return message
    when = when.astimezone(timezone.utc) if when.tzinfo else when.replace(tzinfo=timezone.utc)
    return PLACEHOLDER_RE.sub(lambda m: TIMESTAMP_LAYOUTS[m.group(1)][0](when), message)
