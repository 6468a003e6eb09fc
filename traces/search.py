"""Run lookup for the console: ids by one indexed lookup, question text by full-text search.

- A run id (``run-…``), an invocation id (``inv-…``) or a session id, whole or as a prefix of at
  least 8 characters, is a range scan on that column's index: ``LIKE 'prefix%'`` under MySQL's
  case-insensitive collation, ``>= prefix AND < next(prefix)`` under SQLite's binary one. It is
  never OR-ed with a substring search.
- Words: every run (of those the list's filters select) in which each word is a case-insensitive
  substring of the question, the answer, the root-cause service or the root-cause summary. One
  query in the database over all matching rows, so filters, counts and sorting see every match. The
  substring test is always applied; for words rarer than `INDEX_SHARE` of the newest `SAMPLE_ROWS`
  runs the database's full-text index narrows the rows first (``path`` "index"), for common words
  the list walks the newest runs and stops when the page is full (``path`` "scan"). The indexes:
  MySQL ``FULLTEXT … WITH PARSER ngram``; on MariaDB (no ngram parser) a plain FULLTEXT index for
  words and one over ``question_terms, answer_terms`` (CJK bigrams) for Chinese; SQLite FTS5 with the
  trigram tokenizer. Words no index can answer (shorter than 3 characters, a single Chinese character
  on MariaDB) are the substring test's alone.

The full-text objects are created by ``traces/migrations/0001``-``0003`` and kept in place by
`traces.fulltext.fulltext_ensure` (SQLite drops a table's triggers when a migration rebuilds the table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, Max, Q, QuerySet

from diagnosis.ids import SESSION_ID_RE
from diagnosis.models import ChatSession, DiagnosisRun, ToolInvocation
from traces.fulltext import SQLITE_FTS_TABLE, TERMS_COLUMNS, TEXT_COLUMNS, cjk_bigrams, mysql_has_ngram

ID_PREFIX_MIN = 8
RUN_ID_PREFIX = re.compile(r"^run-[0-9a-f]{4,32}$")
INVOCATION_ID_PREFIX = re.compile(r"^inv-[0-9a-f]{4,8}$")
SAMPLE_ROWS = 2_000  # the share of matches among this many of the newest runs picks the path
# Below this share the full-text index narrows the rows first: an index hands back all its matches
# before the newest can be picked, so it pays for rare words only (docs/PERFORMANCE.md section 8).
INDEX_SHARE = 0.05
# MariaDB answers several required CJK bigram tokens slowly (3-5 s for a term in 3 % of a million runs):
# there only rarer Chinese terms go to the index, the rest walk the newest runs.
CJK_TERMS_INDEX_SHARE = 0.005
TEXT_COUNT_CAP = 1_000  # a text search counts at most this many matches ("more than 1000")
MAX_TERM_CHARS = 200
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
    kind: str  # run | invocation | session | text | none
    term: str = ""
    path: str = ""  # for text: "index" (full-text index, then the substring test) or "scan"

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


class SearchTermError(ValueError):
    """A search term that cannot be searched; the message says why, for the box it was typed in."""


def term_check(term: str) -> None:
    """Raise SearchTermError for a term with nothing to search for, or too long to be a search."""
    term = (term or "").strip()
    if not term:
        return
    if len(term) > MAX_TERM_CHARS:
        raise SearchTermError(f"A search is at most {MAX_TERM_CHARS} characters ({len(term)} given).")
    if not id_kind(term) and not _words(term):
        raise SearchTermError("Nothing to search for: type a run, session or invocation id, or words.")


def text_q(word: str) -> Q:
    """`word` is a case-insensitive substring of one of the searched columns."""
    q = Q()
    for column in TEXT_COLUMNS:
        q |= Q(**{f"{column}__icontains": word})
    return q


def text_lookup(queryset: QuerySet[DiagnosisRun], term: str) -> Lookup:
    """`queryset` narrowed to the runs in which every word of `term` is a substring of the question, the
    answer or the root cause (service, summary), in the database over all rows.

    The share of matches among the newest SAMPLE_ROWS runs picks the plan: below INDEX_SHARE the
    full-text index narrows the rows first (each still confirmed by the substring test), otherwise the
    list walks the (created_at, id) index newest first and stops when the page is full.
    """
    words = _words(term)
    if not words:
        return Lookup(queryset.none(), "text", term, "scan")
    matching = queryset
    for word in words:
        matching = matching.filter(text_q(word))
    where = index_where(words)
    if where is None:
        return Lookup(matching, "text", term, "scan")
    newest = DiagnosisRun.objects.aggregate(top=Max("id"))["top"] or 0
    # Ids are not row counts (MySQL never reuses an auto-increment value): count the window's rows and
    # its matches in one query.
    hit = Q()
    for word in words:
        hit &= text_q(word)
    if newest < SAMPLE_ROWS:  # fewer ids than the sample, so fewer rows: the walk is short
        return Lookup(matching, "text", term, "scan")
    window = DiagnosisRun.objects.filter(pk__gt=newest - SAMPLE_ROWS).aggregate(
        rows=Count("id"), hits=Count("id", filter=hit))
    sampled = window["rows"]
    share = CJK_TERMS_INDEX_SHARE if connection.vendor == "mysql" and not mysql_has_ngram(connection) and any(
        CJK.search(w) for w in words) else INDEX_SHARE
    if sampled < SAMPLE_ROWS or window["hits"] >= share * sampled:
        return Lookup(matching, "text", term, "scan")
    sql, params = where
    return Lookup(matching.extra(where=[sql], params=params), "text", term, "index")


def _like(word: str) -> str:
    return "%" + connection.ops.prep_for_like_query(word) + "%"


def index_where(words: list[str]) -> tuple[str, list] | None:
    """A WHERE clause on diagnosis_run that the full-text index answers, true for every row in which each
    word occurs in a searched column (and for some others: the substring test confirms); None when
    the index cannot answer these words."""
    if connection.vendor == "sqlite":
        indexed = [w for w in words if len(w) >= FTS_MIN_CHARS]
        if not indexed:
            return None
        match = " AND ".join('"' + w.replace('"', '""') + '"' for w in indexed)
        return (f"diagnosis_run.id IN (SELECT rowid FROM {SQLITE_FTS_TABLE} WHERE {SQLITE_FTS_TABLE} MATCH %s)",
                [match])
    if connection.vendor == "mysql":
        columns, against = _mysql_against(words)
        if not against:
            return None
        # A bare MATCH (not "= TRUE") so the optimiser reads the full-text index.
        return f"MATCH ({', '.join('diagnosis_run.' + c for c in columns)}) AGAINST (%s IN BOOLEAN MODE)", [against]
    return None


def _mysql_against(words: list[str]) -> tuple[tuple[str, ...], str]:
    """The full-text columns and boolean query for `words` ("" when the index cannot answer them)."""
    if mysql_has_ngram(connection):  # MySQL: the ngram parser splits any script into 2-grams
        return TEXT_COLUMNS, " ".join(f'+"{w}"' for w in words if len(w) >= FTS_MIN_CHARS or CJK.search(w))
    if any(CJK.search(w) for w in words):  # MariaDB: Chinese through the bigram terms columns
        return TERMS_COLUMNS, " ".join(f"+{token}" for w in words for token in dict.fromkeys(cjk_bigrams(w)))
    # MariaDB's own parser: whole words, each a required word prefix (stopwords and short words, which
    # the index leaves out, are checked by the substring test only).
    indexed = [w for w in words if len(w) >= FTS_MIN_CHARS and w.lower() not in INNODB_STOPWORDS]
    return TEXT_COLUMNS, " ".join(f"+{w}*" for w in indexed)
