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
from drain3.masking import MaskingInstruction
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
_MASKS = [
    MaskingInstruction(r"[a-z][a-z0-9+.-]*://\S+", "URL"),
    MaskingInstruction(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "IP"),
    MaskingInstruction(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "UUID"),
    MaskingInstruction(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b", "HEX"),
    MaskingInstruction(r"(?<![A-Za-z])-?\d+(?:\.\d+)?(?:ms|s|us|µs|m|h|%|[KMG]i?B?)?(?![A-Za-z])", "NUM"),
]


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
    config.masking_instructions = list(_MASKS)
    config.mask_prefix, config.mask_suffix = "<", ">"
    config.profiling_enabled = False
    config.parametrize_numeric_tokens = True
    return config


def _stripped(message: str) -> str:
    head = message.split("\n", 1)[0]  # a stack trace is one record; its first line names it
    return _TIMESTAMPS.sub(" ", head).strip()[:400]


def mine(records: list[LogRecord]) -> dict[tuple[str, int], Template]:
    """Templates per service, keyed by (service, cluster id)."""
    miners: dict[str, TemplateMiner] = {}
    templates: dict[tuple[str, int], Template] = {}
    for record in sorted(records, key=lambda r: r.ts):
        miner = miners.get(record.service)
        if miner is None:
            miner = miners[record.service] = TemplateMiner(config=_config())
        result = miner.add_log_message(f"{record.level} {_stripped(record.message)}")
        key = (record.service, int(result["cluster_id"]))
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
