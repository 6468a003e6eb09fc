"""The full-text index of diagnosis_run.question, per database (no model imports: migrations use it).

MySQL: ``FULLTEXT … WITH PARSER ngram`` (MariaDB has no ngram parser: a plain FULLTEXT index, which
splits words at spaces and punctuation and so never splits Chinese; there a second FULLTEXT index on
``question_terms`` holds the question's CJK bigrams, see `cjk_terms`).
SQLite: an FTS5 external-content table with the trigram tokenizer, kept current by triggers.
"""

from __future__ import annotations

import re

SQLITE_FTS_TABLE = "diagnosis_run_fts"
SQLITE_FTS_SQL = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {SQLITE_FTS_TABLE} USING fts5("
    "question, content='diagnosis_run', content_rowid='id', tokenize='trigram')",
    f"CREATE TRIGGER IF NOT EXISTS {SQLITE_FTS_TABLE}_ai AFTER INSERT ON diagnosis_run BEGIN "
    f"INSERT INTO {SQLITE_FTS_TABLE}(rowid, question) VALUES (new.id, new.question); END",
    f"CREATE TRIGGER IF NOT EXISTS {SQLITE_FTS_TABLE}_ad AFTER DELETE ON diagnosis_run BEGIN "
    f"INSERT INTO {SQLITE_FTS_TABLE}({SQLITE_FTS_TABLE}, rowid, question) VALUES ('delete', old.id, old.question); END",
    f"CREATE TRIGGER IF NOT EXISTS {SQLITE_FTS_TABLE}_au AFTER UPDATE OF question ON diagnosis_run BEGIN "
    f"INSERT INTO {SQLITE_FTS_TABLE}({SQLITE_FTS_TABLE}, rowid, question) VALUES ('delete', old.id, old.question); "
    f"INSERT INTO {SQLITE_FTS_TABLE}(rowid, question) VALUES (new.id, new.question); END",
]
SQLITE_FTS_DROP = [
    f"DROP TRIGGER IF EXISTS {SQLITE_FTS_TABLE}_ai", f"DROP TRIGGER IF EXISTS {SQLITE_FTS_TABLE}_ad",
    f"DROP TRIGGER IF EXISTS {SQLITE_FTS_TABLE}_au", f"DROP TABLE IF EXISTS {SQLITE_FTS_TABLE}",
]
MYSQL_FT_INDEX = "diagnosis_run_question_ft"
MARIADB_TERMS_INDEX = "diagnosis_run_terms_ft"  # FULLTEXT (question_terms), MariaDB only

CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]{2,}")


def cjk_bigrams(text: str) -> list[str]:
    """Every pair of adjacent CJK characters of `text`, each as one ASCII token: the two code points in
    hex (``数据`` → ``6570636e``), 8 characters, so any full-text parser indexes it as a word."""
    tokens: list[str] = []
    for run in CJK_RUN.findall(text or ""):
        tokens.extend(f"{ord(a):04x}{ord(b):04x}" for a, b in zip(run, run[1:]))
    return tokens


def cjk_terms(text: str) -> str | None:
    """The value of diagnosis_run.question_terms: the distinct bigram tokens of `text`, or None."""
    return " ".join(dict.fromkeys(cjk_bigrams(text))) or None


def question_terms_set(sender, instance, **kwargs) -> None:
    """pre_save of DiagnosisRun: keep question_terms in step with the question."""
    instance.question_terms = cjk_terms(instance.question)



def mysql_has_ngram(conn) -> bool:
    return not getattr(conn, "mysql_is_mariadb", False)


def fulltext_create(conn) -> None:
    """Create the full-text index of diagnosis_run.question for `conn`'s database (idempotent)."""
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            cursor.execute(f"SELECT 1 FROM sqlite_master WHERE name = '{SQLITE_FTS_TABLE}_ai'")
            had_triggers = cursor.fetchone() is not None
            for sql in SQLITE_FTS_SQL:
                cursor.execute(sql)
            if not had_triggers:  # new, or the table was rebuilt: index what is there
                cursor.execute(f"INSERT INTO {SQLITE_FTS_TABLE}({SQLITE_FTS_TABLE}) VALUES ('rebuild')")
        elif conn.vendor == "mysql":
            if not _mysql_index_exists(cursor, MYSQL_FT_INDEX):
                parser = " WITH PARSER ngram" if mysql_has_ngram(conn) else ""
                cursor.execute(f"ALTER TABLE diagnosis_run ADD FULLTEXT INDEX {MYSQL_FT_INDEX} (question){parser}")
            if not mysql_has_ngram(conn) and _has_terms_column(cursor) and not _mysql_index_exists(
                    cursor, MARIADB_TERMS_INDEX):
                cursor.execute(f"ALTER TABLE diagnosis_run ADD FULLTEXT INDEX {MARIADB_TERMS_INDEX} (question_terms)")


def _mysql_index_exists(cursor, name: str) -> bool:
    cursor.execute("SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() "
                   "AND table_name = 'diagnosis_run' AND index_name = %s", [name])
    return bool(cursor.fetchone()[0])


def _has_terms_column(cursor) -> bool:
    cursor.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() "
                   "AND table_name = 'diagnosis_run' AND column_name = 'question_terms'")
    return bool(cursor.fetchone()[0])


def fulltext_drop(conn) -> None:
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            for sql in SQLITE_FTS_DROP:
                cursor.execute(sql)
        elif conn.vendor == "mysql":
            for index in (MYSQL_FT_INDEX, MARIADB_TERMS_INDEX):
                if _mysql_index_exists(cursor, index):
                    cursor.execute(f"ALTER TABLE diagnosis_run DROP INDEX {index}")


def fulltext_ensure(sender=None, using="default", **kwargs) -> None:
    """post_migrate: put the SQLite triggers back when a migration rebuilt diagnosis_run."""
    from django.db import connections

    conn = connections[using]
    if conn.vendor == "sqlite" and "diagnosis_run" in conn.introspection.table_names():
        fulltext_create(conn)
