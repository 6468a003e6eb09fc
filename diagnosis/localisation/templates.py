"""Log templates mined with Drain (``drain3``): the shapes of a service's lines, and which records have them.

Before mining, what varies on every line is masked (timestamps, addresses, numbers, ids, durations),
so that ``Connection to 10.0.3.7:5432 timed out after 3000 ms`` and the same line with another
address and duration are one template. The level is part of the key: a WARN and an ERROR line of the
same words are different news.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from drain3 import TemplateMiner
from drain3.template_miner_config import TemplateMinerConfig

from diagnosis.localisation.records import LogRecord

SIMILARITY = 0.5
# A miner is started per service and run: its start-up notice is not news.
logging.getLogger("drain3.template_miner").setLevel(logging.WARNING)

_TIMESTAMPS = re.compile(
    r"\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}| UTC)?"
    r"|\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}"
    r"|\d{1,2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?"
    r"|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}"
    r"|\b[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+"
)
_MASKS = (
    (re.compile(r"[a-z][a-z0-9+.-]*://\S+"), "<URL>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<UUID>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b"), "<HEX>"),
    (re.compile(r"(?<![A-Za-z])-?\d+(?:\.\d+)?(?:ms|s|us|µs|m|h|%|[KMG]i?B?)?(?![A-Za-z])"), "<NUM>"),
)


@dataclass
class Template:
    service: str
    level: str
    text: str
    records: list[LogRecord] = field(default_factory=list)


def _config() -> TemplateMinerConfig:
    config = TemplateMinerConfig()
    config.drain_sim_th = SIMILARITY
    config.drain_depth = 4
    config.masking_instructions = []  # masked before mining (``masked``), once per distinct line
    config.profiling_enabled = False
    config.parametrize_numeric_tokens = True
    return config


def _stripped(message: str) -> str:
    head = message.split("\n", 1)[0]  # a stack trace is one record; its first line names it
    return _TIMESTAMPS.sub(" ", head).strip()[:400]


def masked(message: str) -> str:
    text = _stripped(message)
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return text


def mine(records: list[LogRecord]) -> dict[tuple[str, int], Template]:
    """Templates per service, keyed by (service, cluster id). Drain sees each distinct masked line once:
    lines that differ only in what the masks replace are the same line to it."""
    miners: dict[str, TemplateMiner] = {}
    seen: dict[tuple[str, str], int] = {}
    templates: dict[tuple[str, int], Template] = {}
    for record in sorted(records, key=lambda r: r.ts):
        text = f"{record.level} {masked(record.message)}"
        cluster_id = seen.get((record.service, text))
        if cluster_id is None:
            miner = miners.get(record.service)
            if miner is None:
                miner = miners[record.service] = TemplateMiner(config=_config())
            cluster_id = seen[(record.service, text)] = int(miner.add_log_message(text)["cluster_id"])
        key = (record.service, cluster_id)
        template = templates.get(key)
        if template is None:
            template = templates[key] = Template(record.service, record.level, "")
        template.records.append(record)
    for (service, cluster_id), template in templates.items():
        cluster = next(c for c in miners[service].drain.clusters if c.cluster_id == cluster_id)
        template.text = cluster.get_template().split(" ", 1)[-1]
        template.level = max((r.level for r in template.records), key=lambda lv: ("DEBUG", "INFO", "WARN", "ERROR",
                                                                                  "FATAL").index(lv))
    return templates
