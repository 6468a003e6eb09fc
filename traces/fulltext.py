"""The full-text index of diagnosis_run.question, per database (no model imports: migrations use it).

MySQL: ``FULLTEXT … WITH PARSER ngram`` (MariaDB has no ngram parser: a plain FULLTEXT index).
SQLite: an FTS5 external-content table with the trigram tokenizer, kept current by triggers.
"""

from __future__ import annotations

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
            cursor.execute("SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() "
                           "AND table_name = 'diagnosis_run' AND index_name = %s", [MYSQL_FT_INDEX])
            if cursor.fetchone()[0]:
                return
            parser = " WITH PARSER ngram" if mysql_has_ngram(conn) else ""
            cursor.execute(f"ALTER TABLE diagnosis_run ADD FULLTEXT INDEX {MYSQL_FT_INDEX} (question){parser}")


def fulltext_drop(conn) -> None:
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            for sql in SQLITE_FTS_DROP:
                cursor.execute(sql)
        elif conn.vendor == "mysql":
            cursor.execute("SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() "
                           "AND table_name = 'diagnosis_run' AND index_name = %s", [MYSQL_FT_INDEX])
            if cursor.fetchone()[0]:
                cursor.execute(f"ALTER TABLE diagnosis_run DROP INDEX {MYSQL_FT_INDEX}")


def fulltext_ensure(sender=None, using="default", **kwargs) -> None:
    """post_migrate: put the SQLite triggers back when a migration rebuilt diagnosis_run."""
    from django.db import connections

    conn = connections[using]
    if conn.vendor == "sqlite" and "diagnosis_run" in conn.introspection.table_names():
        fulltext_create(conn)
