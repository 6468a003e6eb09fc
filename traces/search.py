"""Run lookup for the console: ids by one indexed lookup, question text by full-text search.

- A run id (``run-…``), an invocation id (``inv-…``) or a session id, whole or as a prefix of at
  least 8 characters, is a range scan on that column's index: ``LIKE 'prefix%'`` under MySQL's
  case-insensitive collation, ``>= prefix AND < next(prefix)`` under SQLite's binary one. It is
  never OR-ed with a substring search.
- Words of the question: the newest runs whose question contains every word (case-insensitive
  substring), at most `TEXT_MATCHES`. A newest-first scan answers common words (it stops as soon as
  the list is full, after at most `PROBE_ROWS` runs); rarer words go to the database's full-text
  index for the older runs: MySQL ``FULLTEXT … WITH PARSER ngram``; on MariaDB (no ngram parser) a plain FULLTEXT
  index for words and one over ``question_terms`` (the question's CJK bigrams) for Chinese; SQLite
  FTS5 with the trigram tokenizer. What no index can answer (only words shorter than 3 characters, a
  single Chinese character on MariaDB, another database) is the scan's answer alone (kind "scan").

The full-text objects are created by ``traces/migrations/0001_question_search.py`` and kept in
place by `traces.fulltext.fulltext_ensure` (SQLite drops a table's triggers when a migration rebuilds the table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import Max, Q, QuerySet

from diagnosis.ids import SESSION_ID_RE
from diagnosis.models import ChatSession, DiagnosisRun, ToolInvocation
from traces.fulltext import SQLITE_FTS_TABLE, cjk_bigrams, mysql_has_ngram

ID_PREFIX_MIN = 8
RUN_ID_PREFIX = re.compile(r"^run-[0-9a-f]{4,32}$")
INVOCATION_ID_PREFIX = re.compile(r"^inv-[0-9a-f]{4,8}$")
SAMPLE_ROWS = 2_000  # a text search first scans this many of the newest runs
PROBE_ROWS = 100_000  # and, when that is cheaper than the index, at most this many in all
# A full-text match costs about as much as scanning this many rows (measured at 1M runs, docs/PERFORMANCE.md
# section 8); MariaDB's boolean search over several CJK bigram tokens is far slower per match.
INDEX_MATCH_COST = 3
CJK_INDEX_MATCH_COST = 30
TEXT_MATCHES = 501  # a text search keeps the newest 500 matches (the list says "more than 500"): 10 pages
FTS_MIN_CHARS = 3
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
WORD = re.compile(r"[^\s\"'()*+\-<>@~]+")
# InnoDB's default full-text stopwords: a required stopword would make a boolean search find nothing.
INNODB_STOPWORDS = frozenset(
    "a about an are as at be by com de en for from how i in is it la of on or that the this to was what when "
    "where who will with und www".split())

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
    """The newest TEXT_MATCHES runs whose question contains every word of `term` (case-insensitively).

    1. A newest-first substring scan of the newest SAMPLE_ROWS runs. Words that common (a tenth of
       the runs or more) end here.
    2. From the share of matches in that sample: either the scan goes on (at most PROBE_ROWS runs in
       all, stopping as soon as the list is full), or, when the index would be cheaper (it hands back
       all its matches before the newest are picked: about INDEX_MATCH_COST scanned rows each), or
       when the scan ran out of rows, the full-text index finds the older matches, each confirmed by
       the same substring test. Where no index can answer the words, the scan's matches are the
       answer (kind "scan").
    Either way the result is a list of at most TEXT_MATCHES run ids.
    """
    words = _words(term)
    if not words:
        return Lookup(queryset.none(), "text", term)
    newest = DiagnosisRun.objects.aggregate(top=Max("id"))["top"] or 0
    floor = max(newest - min(SAMPLE_ROWS, PROBE_ROWS), 0)
    found = _scan(words, above=floor, below=newest + 1, limit=TEXT_MATCHES)
    indexed = index_query(words, below=1, limit=1) is not None
    if len(found) < TEXT_MATCHES and floor > 0:
        missing = TEXT_MATCHES - len(found)
        share = len(found) / (newest - floor)
        rows_to_fill = missing / share if share else float("inf")
        cost = CJK_INDEX_MATCH_COST if connection.vendor == "mysql" and not mysql_has_ngram(connection) and any(
            CJK.search(w) for w in words) else INDEX_MATCH_COST
        if not indexed or rows_to_fill < share * floor * cost:
            deeper = max(newest - PROBE_ROWS, 0)
            found += _scan(words, above=deeper, below=floor + 1, limit=missing)
            floor = deeper
        if len(found) < TEXT_MATCHES and floor > 0 and indexed:
            sql, params = index_query(words, below=floor + 1, limit=TEXT_MATCHES - len(found))
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                found += [row[0] for row in cursor.fetchall()]
    kind = "scan" if floor > 0 and not indexed else "text"
    return Lookup(queryset.filter(pk__in=found), kind, term)


def _scan(words: list[str], *, above: int, below: int, limit: int) -> list[int]:
    """Ids in (above, below) whose question contains every word, newest first, at most `limit`."""
    rows = DiagnosisRun.objects.filter(pk__gt=above, pk__lt=below)
    for word in words:
        rows = rows.filter(question__icontains=word)
    return list(rows.order_by("-pk").values_list("pk", flat=True)[:limit])


def _like(word: str) -> str:
    return "%" + connection.ops.prep_for_like_query(word) + "%"


def index_query(words: list[str], *, below: int, limit: int) -> tuple[str, list] | None:
    """SQL for the ids below `below` whose question contains every word, newest first, at most
    `limit`, through the database's full-text index; None when the index cannot answer these words."""
    if connection.vendor == "sqlite":
        indexed = [w for w in words if len(w) >= FTS_MIN_CHARS]
        if not indexed:
            return None
        match = " AND ".join('"' + w.replace('"', '""') + '"' for w in indexed)
        confirm = "".join(" AND r.question LIKE %s ESCAPE '\\'" for w in words if w not in indexed)
        sql = (f"SELECT f.rowid FROM {SQLITE_FTS_TABLE} f JOIN diagnosis_run r ON r.id = f.rowid "
               f"WHERE {SQLITE_FTS_TABLE} MATCH %s AND f.rowid < %s{confirm} ORDER BY f.rowid DESC LIMIT %s")
        params = [match, below, *[_like(w) for w in words if w not in indexed], limit]
    elif connection.vendor == "mysql":
        column, against = _mysql_against(words)
        if not against:
            return None
        # A bare MATCH (not "= TRUE") so the optimiser reads the full-text index; every word is
        # confirmed as a substring (the index matches word prefixes, or CJK bigrams in any order).
        confirm = "".join(" AND question LIKE %s" for _ in words)
        sql = (f"SELECT id FROM diagnosis_run WHERE MATCH ({column}) AGAINST (%s IN BOOLEAN MODE) "
               f"AND id < %s{confirm} ORDER BY id DESC LIMIT %s")
        params = [against, below, *[_like(w) for w in words], limit]
    else:
        return None
    return sql, params


def _mysql_against(words: list[str]) -> tuple[str, str]:
    """The full-text column and boolean query for `words` ("" when the index cannot answer them)."""
    if mysql_has_ngram(connection):  # MySQL: the ngram parser splits any script into 2-grams
        return "question", " ".join(f'+"{w}"' for w in words if len(w) >= FTS_MIN_CHARS or CJK.search(w))
    if any(CJK.search(w) for w in words):  # MariaDB: Chinese through the bigram terms column
        return "question_terms", " ".join(f"+{token}" for w in words for token in dict.fromkeys(cjk_bigrams(w)))
    # MariaDB's own parser: whole words, each a required word prefix (stopwords and short words, which
    # the index leaves out, are checked by the substring test only).
    indexed = [w for w in words if len(w) >= FTS_MIN_CHARS and w.lower() not in INNODB_STOPWORDS]
    return "question", " ".join(f"+{w}*" for w in indexed)
