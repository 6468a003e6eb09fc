"""New rows of one model written by one multi-row INSERT, without the ORM's query compiler.

The run observer writes a group's progress events and tool invocations this way (services/observer.py).
Each value is prepared by its field exactly as `bulk_create` prepares it (`pre_save`, then
`get_db_prep_save`: JSON encoded, datetimes adapted), so the stored rows are the same; what is skipped
is building and compiling an InsertQuery per statement, about half of the Python time of a small
`bulk_create`. The rows' ids are not read back: nothing uses them once the group is written.
"""

from __future__ import annotations

from functools import lru_cache

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import AutoField, Field, Model


@lru_cache(maxsize=None)
def insert_fields(model: type[Model]) -> tuple[Field, ...]:
    """The columns a new row of `model` is inserted with: every concrete column but a generated id."""
    return tuple(field for field in model._meta.concrete_fields
                 if not field.generated and not (field.primary_key and isinstance(field, AutoField)))


def this_connection():
    """The default database's connection itself: each attribute read through `django.db.connection` (a
    proxy) looks the connection up again in a per-thread store, and the fields read it per value."""
    return connections[DEFAULT_DB_ALIAS]


def row_values(rows: list[Model], fields: tuple[Field, ...] | list[Field], db=None) -> list[list]:
    """Each row's values for `fields`, prepared for this database as an INSERT of the ORM prepares them."""
    db = db or this_connection()
    return [[field.get_db_prep_save(field.pre_save(row, True), db) for field in fields] for row in rows]


@lru_cache(maxsize=256)
def _insert_sql(model: type[Model], vendor: str, count: int) -> str:
    fields = insert_fields(model)
    q = connection.ops.quote_name
    values = connection.ops.bulk_insert_sql(fields, [["%s"] * len(fields)] * count)
    return f"INSERT INTO {q(model._meta.db_table)} ({', '.join(q(field.column) for field in fields)}) {values}"


def rows_insert(rows: list[Model]) -> None:
    """Insert the new `rows` (all of one model), in as few statements as the database's limit on
    parameters allows (one for a run's group)."""
    if not rows:
        return
    model, db = type(rows[0]), this_connection()
    fields = insert_fields(model)
    batch = max(db.ops.bulk_batch_size(list(fields), rows), 1)
    with db.cursor() as cursor:
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            params = [value for values in row_values(chunk, fields, db) for value in values]
            cursor.execute(_insert_sql(model, db.vendor, len(chunk)), params)
