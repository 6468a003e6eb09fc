"""The full-text index of diagnosis_run's searched text (question, answer, root-cause service and
summary), per database (no model imports: migrations use it).

MySQL: ``FULLTEXT (…) WITH PARSER ngram`` (MariaDB has no ngram parser: a plain FULLTEXT index, which
splits words at spaces and punctuation and so never splits Chinese; there a second FULLTEXT index on
``question_terms, answer_terms`` holds the text's CJK bigrams, see `cjk_terms`).
SQLite: an FTS5 external-content table with the trigram tokenizer, kept current by triggers.
"""

from __future__ import annotations

from diagnosis.search_text import cjk_bigrams, cjk_terms  # noqa: F401 (re-exported)

SQLITE_FTS_TABLE = "diagnosis_run_fts"
# The searched columns of diagnosis_run, in every index over them (MATCH must name them in this order).
TEXT_COLUMNS = ("question", "answer", "root_service", "root_summary")
_COLS = ", ".join(TEXT_COLUMNS)


def sqlite_fts_sql(columns: tuple[str, ...] = TEXT_COLUMNS) -> list[str]:
    """The FTS5 table over `columns` of diagnosis_run and the triggers that keep it current."""
    cols, new, old = ", ".join(columns), ", ".join(f"new.{c}" for c in columns), ", ".join(f"old.{c}" for c in columns)
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {SQLITE_FTS_TABLE} USING fts5("
        f"{cols}, content='diagnosis_run', content_rowid='id', tokenize='trigram')",
        f"CREATE TRIGGER IF NOT EXISTS {SQLITE_FTS_TABLE}_ai AFTER INSERT ON diagnosis_run BEGIN "
        f"INSERT INTO {SQLITE_FTS_TABLE}(rowid, {cols}) VALUES (new.id, {new}); END",
        f"CREATE TRIGGER IF NOT EXISTS {SQLITE_FTS_TABLE}_ad AFTER DELETE ON diagnosis_run BEGIN "
        f"INSERT INTO {SQLITE_FTS_TABLE}({SQLITE_FTS_TABLE}, rowid, {cols}) VALUES ('delete', old.id, {old}); END",
        f"CREATE TRIGGER IF NOT EXISTS {SQLITE_FTS_TABLE}_au AFTER UPDATE OF {cols} ON diagnosis_run BEGIN "
        f"INSERT INTO {SQLITE_FTS_TABLE}({SQLITE_FTS_TABLE}, rowid, {cols}) VALUES ('delete', old.id, {old}); "
        f"INSERT INTO {SQLITE_FTS_TABLE}(rowid, {cols}) VALUES (new.id, {new}); END",
    ]


SQLITE_FTS_DROP = [
    f"DROP TRIGGER IF EXISTS {SQLITE_FTS_TABLE}_ai", f"DROP TRIGGER IF EXISTS {SQLITE_FTS_TABLE}_ad",
    f"DROP TRIGGER IF EXISTS {SQLITE_FTS_TABLE}_au", f"DROP TABLE IF EXISTS {SQLITE_FTS_TABLE}",
]
MYSQL_QUESTION_INDEX = "diagnosis_run_question_ft"  # the question alone (before the answer was searched)
MYSQL_FT_INDEX = "diagnosis_run_text_ft"  # FULLTEXT (question, answer, root_service, root_summary)
MARIADB_QUESTION_TERMS_INDEX = "diagnosis_run_terms_ft"  # FULLTEXT (question_terms), before answer_terms
MARIADB_TERMS_INDEX = "diagnosis_run_all_terms_ft"  # FULLTEXT (question_terms, answer_terms), MariaDB only
TERMS_COLUMNS = ("question_terms", "answer_terms")


def question_terms_set(sender, instance, **kwargs) -> None:
    """pre_save of DiagnosisRun: keep question_terms in step with the question."""
    instance.question_terms = cjk_terms(instance.question)



def mysql_has_ngram(conn) -> bool:
    return not getattr(conn, "mysql_is_mariadb", False)


def fulltext_create(conn) -> None:
    """Create the full-text index of diagnosis_run's searched text for `conn`'s database (idempotent); before
    diagnosis 0014 added the answer's columns, of the question alone."""
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            cursor.execute("SELECT name FROM pragma_table_info('diagnosis_run')")
            present = {row[0] for row in cursor.fetchall()}
            columns = TEXT_COLUMNS if set(TEXT_COLUMNS) <= present else ("question",)  # before diagnosis 0014
            cursor.execute(f"SELECT name FROM pragma_table_info('{SQLITE_FTS_TABLE}')")
            indexed = tuple(row[0] for row in cursor.fetchall())
            if indexed and indexed != columns:  # an index over other columns: made again over these
                for sql in SQLITE_FTS_DROP:
                    cursor.execute(sql)
            cursor.execute(f"SELECT 1 FROM sqlite_master WHERE name = '{SQLITE_FTS_TABLE}_ai'")
            had_triggers = cursor.fetchone() is not None
            for sql in sqlite_fts_sql(columns):
                cursor.execute(sql)
            if not had_triggers:  # new, or the table was rebuilt: index what is there
                cursor.execute(f"INSERT INTO {SQLITE_FTS_TABLE}({SQLITE_FTS_TABLE}) VALUES ('rebuild')")
        elif conn.vendor == "mysql":
            if not _has_columns(cursor, ("root_summary", "answer_terms")):  # before diagnosis 0014: the question only
                parser = " WITH PARSER ngram" if mysql_has_ngram(conn) else ""
                if not _mysql_index_exists(cursor, MYSQL_QUESTION_INDEX):
                    cursor.execute(f"ALTER TABLE diagnosis_run ADD FULLTEXT INDEX {MYSQL_QUESTION_INDEX} (question){parser}")
                if not mysql_has_ngram(conn) and _has_columns(cursor, ("question_terms",)) and not _mysql_index_exists(
                        cursor, MARIADB_QUESTION_TERMS_INDEX):
                    cursor.execute(f"ALTER TABLE diagnosis_run ADD FULLTEXT INDEX {MARIADB_QUESTION_TERMS_INDEX} "
                                   "(question_terms)")
                return
            for old in (MYSQL_QUESTION_INDEX, MARIADB_QUESTION_TERMS_INDEX):
                if _mysql_index_exists(cursor, old):
                    cursor.execute(f"ALTER TABLE diagnosis_run DROP INDEX {old}")
            if not _mysql_index_exists(cursor, MYSQL_FT_INDEX):
                parser = " WITH PARSER ngram" if mysql_has_ngram(conn) else ""
                cursor.execute(f"ALTER TABLE diagnosis_run ADD FULLTEXT INDEX {MYSQL_FT_INDEX} ({_COLS}){parser}")
            if not mysql_has_ngram(conn) and not _mysql_index_exists(cursor, MARIADB_TERMS_INDEX):
                cursor.execute(f"ALTER TABLE diagnosis_run ADD FULLTEXT INDEX {MARIADB_TERMS_INDEX} "
                               f"({', '.join(TERMS_COLUMNS)})")


def _mysql_index_exists(cursor, name: str) -> bool:
    cursor.execute("SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() "
                   "AND table_name = 'diagnosis_run' AND index_name = %s", [name])
    return bool(cursor.fetchone()[0])


def _has_columns(cursor, names: tuple[str, ...]) -> bool:
    cursor.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() "
                   f"AND table_name = 'diagnosis_run' AND column_name IN ({', '.join(['%s'] * len(names))})", list(names))
    return cursor.fetchone()[0] == len(names)


def fulltext_drop(conn) -> None:
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            for sql in SQLITE_FTS_DROP:
                cursor.execute(sql)
        elif conn.vendor == "mysql":
            for index in (MYSQL_FT_INDEX, MARIADB_TERMS_INDEX, MYSQL_QUESTION_INDEX, MARIADB_QUESTION_TERMS_INDEX):
                if _mysql_index_exists(cursor, index):
                    cursor.execute(f"ALTER TABLE diagnosis_run DROP INDEX {index}")


def fulltext_ensure(sender=None, using="default", **kwargs) -> None:
    """post_migrate: put the SQLite triggers back when a migration rebuilt diagnosis_run."""
    from django.db import connections

    conn = connections[using]
    if conn.vendor == "sqlite" and "diagnosis_run" in conn.introspection.table_names():
        fulltext_create(conn)
