"""Log templates mined with Drain (``drain3``): the shapes of a service's lines, and which records have them.

Before mining, what varies on every line is masked (timestamps, addresses, numbers, ids, durations),
so that ``Connection to 10.0.3.7:5432 timed out after 3000 ms`` and the same line with another
address and duration are one template. The level is part of the key: a WARN and an ERROR line of the
same words are different news. Masking is done once per digit shape of a line (``Masker``): a run's
lines mostly differ only in their numbers.
"""

from __future__ import annotations

import logging
import operator
import re
from dataclasses import dataclass, field

from drain3 import TemplateMiner
from drain3.template_miner_config import TemplateMinerConfig

from diagnosis.localisation.records import LogRecord

SIMILARITY = 0.5
# A miner is started per service and run: its start-up notice is not news.
logging.getLogger("drain3.template_miner").setLevel(logging.WARNING)

# These patterns must treat every ASCII digit alike (``\d``, ``[0-9a-f]``, never ``[1-9]``): ``Masker``
# masks a line by its digit shape. tests/localisation/test_shortcuts.py checks it.
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
    records: list[LogRecord] = field(default_factory=list)  # in time order
    shapes: list[str] = field(default_factory=list, repr=False, compare=False)  # each record's ``zeroed`` message


def _config() -> TemplateMinerConfig:
    config = TemplateMinerConfig()
    config.drain_sim_th = SIMILARITY
    config.drain_depth = 4
    config.masking_instructions = []  # masked before mining (``Masker``), once per digit shape
    config.profiling_enabled = False
    config.parametrize_numeric_tokens = True
    return config


def _stripped(message: str) -> str:
    head = message.split("\n", 1)[0]  # a stack trace is one record; its first line names it
    if ":" in head:  # every timestamp shape above has a colon (a shape without one must drop this check)
        head = _TIMESTAMPS.sub(" ", head)
    return head.strip()[:400]


def masked(message: str) -> str:
    """The line as Drain sees it: its first line, timestamps dropped, what varies masked."""
    text = _stripped(message)
    for (pattern, mask), needs in zip(_MASKS, _NEEDS):
        if needs is None or needs in text:
            text = pattern.sub(mask, text)
    return text


_NEEDS = ("://", ".", "-", None, None)  # what a line must contain for each of _MASKS to match at all
# Every pattern above treats all ASCII digits alike, so a line and its copy with each digit turned into
# "0" are masked at the same places: masked(zeroed(line)) == zeroed(masked(line)). Lines that differ only
# in their digits (ids, counts, durations, times) share one masking, and the digits a mask leaves (the
# "1" of "/v1/") are put back from the line itself.
# Every ASCII character mapped (a character missing from a translation table costs a failed lookup).
_ZEROED = {code: ord("0") if chr(code).isdigit() else code for code in range(128)}
_DIGIT = re.compile(r"[0-9]")


# The same table for the bytes of an ASCII line: ``bytes.translate`` is a plain table lookup, several times
# cheaper than ``str.translate`` with a mapping.
_ZEROED_BYTES = bytes(_ZEROED[code] if code < 128 else code for code in range(256))


def zeroed(text: str) -> str:
    """The text's digit shape: every ASCII digit turned into "0"."""
    if text.isascii():
        return text.encode().translate(_ZEROED_BYTES).decode()
    return text.translate(_ZEROED)


class Masker:
    """``masked`` for many lines, each digit shape masked once (a cache per run, not per process)."""

    def __init__(self) -> None:
        # shape -> its masking cut at the digits that survive it, and where those digits stand in the line;
        # None: seen once, and some survive
        self._plans: dict[str, tuple[str, list[str], tuple[int, ...]] | None] = {}

    def __call__(self, message: str, shape: str | None = None) -> tuple[str, bool]:
        """The line masked, and whether every line of its digit shape masks the same (none of its digits
        survive)."""
        shape = zeroed(message) if shape is None else shape
        plan = self._plans.get(shape, _UNSEEN)
        if plan is _UNSEEN:  # the first line of its shape: masked as it is
            text = masked(message)
            same = _DIGIT.search(text) is None
            self._plans[shape] = (text, [], ()) if same else None
            return text, same
        if plan is None:  # the second: worth finding which digits survive, for the lines to come
            plan = self._plans[shape] = _placed(shape, *_plan(shape))
        text, pieces, offsets = plan
        if not offsets:
            return text, True
        out = [pieces[0]]
        for offset, piece in zip(offsets, pieces[1:]):
            out.append(message[offset])  # a line's digits stand where its shape has a "0"
            out.append(piece)
        return "".join(out), False


def _placed(shape: str, text: str, kept: tuple[int, ...]) -> tuple[str, list[str], tuple[int, ...]]:
    """A plan with the surviving digits found by place: the text cut at its zeros, and the offset in the line
    of each survivor (``kept`` numbers them among the line's digits)."""
    digits = [offset for offset, char in enumerate(shape) if char == "0"]
    return text, text.split("0"), tuple(digits[index] for index in kept)


_UNSEEN = object()


def _plan(shape: str) -> tuple[str, tuple[int, ...]]:
    """The masking of a zeroed line, and which of its digits (by position among its digits) survive it.
    Each survivor is found by masking copies whose digits spell the bits of their positions."""
    text = masked(shape)
    survivors = text.count("0")
    if not survivors:
        return text, ()
    pieces = shape.split("0")
    kept = [0] * survivors
    for bit in range((len(pieces) - 2).bit_length()):
        probe = [pieces[0]]
        for position, piece in enumerate(pieces[1:]):
            probe.append("1" if position >> bit & 1 else "0")
            probe.append(piece)
        for i, digit in enumerate(_DIGIT.findall(masked("".join(probe)))):
            if digit == "1":
                kept[i] |= 1 << bit
    return text, tuple(kept)


def mine(records: list[LogRecord]) -> dict[tuple[str, int], Template]:
    """Templates per service, keyed by (service, cluster id), each with its records in time order, in the
    order of their first records in time (a tie: in ``records``). Drain sees each distinct masked line once:
    lines that differ only in what the masks replace are the same line to it. A service's lines are mined
    together (its miner sees nothing of the others'), so one service at a time: its lines lie together."""
    by_service: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        group = by_service.get(record.service)
        if group is None:
            group = by_service[record.service] = []
        group.append(index)
    masker = Masker()
    firsts: list[tuple[float, int, tuple[str, int], Template]] = []
    for service, indices in by_service.items():
        _mine_service(service, [records[i] for i in indices], indices, masker, firsts)
    firsts.sort(key=_FIRST)
    return {key: template for _, _, key, template in firsts}


def _mine_service(service: str, records: list[LogRecord], indices: list[int], masker: Masker,
                  firsts: list[tuple[float, int, tuple[str, int], Template]]) -> None:
    """One service's templates, each with its first record's time and place in the run's records."""
    miner = TemplateMiner(config=_config())
    seen: dict[str, Template] = {}
    templates: dict[int, Template] = {}
    by_shape: dict[tuple[str, str], Template] = {}  # lines whose masking keeps none of their digits
    order = sorted(range(len(records)), key=[r.ts for r in records].__getitem__)
    for position in order:
        record = records[position]
        shape = zeroed(record.message)
        template = by_shape.get((record.level, shape))
        if template is not None:
            template.records.append(record)
            template.shapes.append(shape)
            continue
        line, same = masker(record.message, shape)
        text = f"{record.level} {line}"
        template = seen.get(text)
        if template is None:
            cluster_id = int(miner.add_log_message(text)["cluster_id"])
            template = templates.get(cluster_id)
            if template is None:
                template = templates[cluster_id] = Template(service, record.level, "")
                firsts.append((record.ts, indices[position], (service, cluster_id), template))
            seen[text] = template
        if same:
            by_shape[(record.level, shape)] = template
        template.records.append(record)
        template.shapes.append(shape)
    clusters = {c.cluster_id: c for c in miner.drain.clusters}
    for cluster_id, template in templates.items():
        template.text = clusters[cluster_id].get_template().split(" ", 1)[-1]
        template.level = max({r.level for r in template.records}, key=_SEVERITY.index)


_FIRST = operator.itemgetter(0, 1)
_TS = operator.attrgetter("ts")
_SEVERITY = ("DEBUG", "INFO", "WARN", "ERROR", "FATAL")
