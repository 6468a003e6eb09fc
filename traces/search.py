"""Run lookup for the console: ids by one indexed lookup, question text by full-text search.

- A run id (``run-…``), an invocation id (``inv-…``) or a session id, whole or as a prefix of at
  least 8 characters, is a range scan on that column's index: ``LIKE 'prefix%'`` under MySQL's
  case-insensitive collation, ``>= prefix AND < next(prefix)`` under SQLite's binary one. It is
  never OR-ed with a substring search.
- Words of the question use the database's full-text index: MySQL ``FULLTEXT … WITH PARSER
  ngram`` (MariaDB has no ngram parser: a plain FULLTEXT index, words only), SQLite FTS5 with the
  trigram tokenizer (substrings of 3+ characters, any script). What the index cannot answer (a
  word shorter than 3 characters, Chinese on MariaDB, another database) falls back to a substring
  scan bounded to the newest `SCAN_ROWS` runs.

The full-text objects are created by ``traces/migrations/0001_question_search.py`` and kept in
place by `traces.fulltext.fulltext_ensure` (SQLite drops a table's triggers when a migration rebuilds the table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import Max, Q, QuerySet
from django.db.models.expressions import RawSQL

from diagnosis.ids import SESSION_ID_RE
from diagnosis.models import ChatSession, DiagnosisRun, ToolInvocation
from traces.fulltext import SQLITE_FTS_TABLE, mysql_has_ngram

ID_PREFIX_MIN = 8
RUN_ID_PREFIX = re.compile(r"^run-[0-9a-f]{4,32}$")
INVOCATION_ID_PREFIX = re.compile(r"^inv-[0-9a-f]{4,8}$")
SCAN_ROWS = 20_000  # a substring scan reads at most this many of the newest runs
TEXT_MATCHES = 2_001  # a full-text search keeps the newest 2,000 matches (the list says "more than 2000")
FTS_MIN_CHARS = 3
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
WORD = re.compile(r"[^\s\"'()*+\-<>@~]+")

# --------------------------------------------------------------------------- lookups


def prefix_q(field: str, prefix: str) -> Q:
    """`field` starts with `prefix`, written so the column's index answers it as a range."""
    if connection.vendor == "mysql":
        return Q(**{f"{field}__istartswith": prefix})  # LIKE 'prefix%' in the column's collation
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    return Q(**{f"{field}__gte": prefix, f"{field}__lt": upper})


@dataclass(frozen=True)
class Lookup:
    queryset: QuerySet[DiagnosisRun]
    kind: str  # run | invocation | session | text | scan | none
    term: str = ""

    @property
    def by_id(self) -> bool:
        return self.kind in ("run", "invocation", "session")


def id_kind(term: str) -> str | None:
    if len(term) < ID_PREFIX_MIN:
        return None
    if RUN_ID_PREFIX.match(term):
        return "run"
    if INVOCATION_ID_PREFIX.match(term):
        return "invocation"
    if SESSION_ID_RE.match(term):
        return "session?"
    return None


def runs_lookup(queryset: QuerySet[DiagnosisRun], term: str) -> Lookup:
    """`queryset` narrowed to what `term` names: an id (indexed prefix) or words of the question."""
    term = (term or "").strip()
    if not term:
        return Lookup(queryset, "none")
    kind = id_kind(term)
    if kind == "run":
        return Lookup(queryset.filter(prefix_q("run_id", term.lower())), "run", term)
    if kind == "invocation":
        runs = ToolInvocation.objects.filter(prefix_q("invocation_id", term.lower())).values("run_id")
        return Lookup(queryset.filter(pk__in=runs), "invocation", term)
    if kind == "session?":
        sessions = list(ChatSession.objects.filter(prefix_q("session_id", term)).values_list("pk", flat=True)[:101])
        if sessions:
            return Lookup(queryset.filter(session_id__in=sessions), "session", term)
    return text_lookup(queryset, term)


def _words(term: str) -> list[str]:
    return WORD.findall(term)


def text_lookup(queryset: QuerySet[DiagnosisRun], term: str) -> Lookup:
    words = _words(term)
    if not words:
        return Lookup(queryset.none(), "text", term)
    vendor = connection.vendor
    if vendor == "sqlite" and all(len(w) >= FTS_MIN_CHARS for w in words):
        match = " AND ".join('"' + w.replace('"', '""') + '"' for w in words)
        # Newest matches first, bounded: FTS5 walks its doclist backwards by rowid (= insertion order).
        return Lookup(queryset.filter(pk__in=RawSQL(
            f"SELECT rowid FROM {SQLITE_FTS_TABLE} WHERE {SQLITE_FTS_TABLE} MATCH %s ORDER BY rowid DESC LIMIT %s",
            [match, TEXT_MATCHES])), "text", term)
    if vendor == "mysql":
        ngram = mysql_has_ngram(connection)
        usable = all(len(w) >= FTS_MIN_CHARS or (ngram and CJK.search(w)) for w in words) and (
            ngram or not CJK.search(term))
        if usable:
            # Boolean mode: every word required; a phrase for ngram, a word prefix for the default parser.
            against = " ".join(f'+"{w}"' if ngram else f"+{w}*" for w in words)
            # A bare MATCH (not "= TRUE") so the optimiser reads the full-text index; the newest matches
            # only, through a derived table (MySQL and MariaDB take no LIMIT directly inside IN).
            return Lookup(queryset.extra(
                where=["diagnosis_run.id IN (SELECT id FROM (SELECT ft.id FROM diagnosis_run ft WHERE MATCH (ft.question) "
                       "AGAINST (%s IN BOOLEAN MODE) ORDER BY ft.id DESC LIMIT %s) AS newest_matches)"],
                params=[against, TEXT_MATCHES],
            ), "text", term)
    return scan_lookup(queryset, words, term)


def scan_lookup(queryset: QuerySet[DiagnosisRun], words: list[str], term: str) -> Lookup:
    """Substring match over the newest SCAN_ROWS runs only: bounded whatever the table size."""
    newest = DiagnosisRun.objects.aggregate(top=Max("id"))["top"] or 0
    narrowed = queryset.filter(pk__gt=newest - SCAN_ROWS)
    for word in words:
        narrowed = narrowed.filter(question__icontains=word)
    return Lookup(narrowed, "scan", term)
