"""Columns of existing rows written by one plain UPDATE, without the ORM's query compiler.

The run's status moves (services/lifecycle.py), the last step's end (services/observer.py) and the
session's memory columns (services/memory.py) are written this way. `rows_update(Model, where, values)`
writes what `Model.objects.filter(**where).update(**values)` writes: each value is prepared by its field
as the ORM's UPDATE prepares it (`get_db_prep_save`: JSON encoded, datetimes adapted, `None` as NULL),
each condition is an equality (a list, tuple or set of values: `IN`), and the count returned is the
rows matched (Django's MySQL connections count found rows, as the ORM's `update` does). What is skipped
is building a QuerySet, an UpdateQuery and its WHERE tree per statement; the SQL text is cached per shape.
Only plain values: an expression (`F`, `Value`), a model instance or a column that needs a placeholder of
its own (binary) is refused, as is a field that is not a concrete column of the model itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Field, Model

from diagnosis.services.row_insert import this_connection


@lru_cache(maxsize=512)
def _column(model: type[Model], name: str) -> Field:
    field = model._meta.pk if name == "pk" else model._meta.get_field(name)
    if not getattr(field, "concrete", False) or field.many_to_many or field.model is not model:
        raise ValueError(f"{model.__name__}.{name} is not a concrete column of its own table")
    if hasattr(field, "get_placeholder"):
        raise ValueError(f"{model.__name__}.{name} needs a placeholder of its own: use the ORM")
    return field


@lru_cache(maxsize=256)
def _update_sql(model: type[Model], vendor: str, names: tuple[str, ...], conditions: tuple[tuple[str, int], ...]) -> str:
    """`conditions`: (name, 0) for an equality, (name, n) for `IN` over n values."""
    q = connection.ops.quote_name
    table = q(model._meta.db_table)
    sets = ", ".join(f"{q(_column(model, name).column)} = %s" for name in names)
    wheres = " AND ".join(
        f"{table}.{q(_column(model, name).column)} = %s" if n == 0
        else f"{table}.{q(_column(model, name).column)} IN ({', '.join(['%s'] * n)})"
        for name, n in conditions)
    return f"UPDATE {table} SET {sets} WHERE {wheres}"


def _prepared(model: type[Model], name: str, value: Any, connection) -> Any:
    if hasattr(value, "resolve_expression") or isinstance(value, Model):
        raise TypeError(f"{model.__name__}.{name}: only plain values, not {type(value).__name__}")
    return _column(model, name).get_db_prep_save(value, connection)


def _condition(model: type[Model], name: str, value: Any, connection) -> Any:
    field = _column(model, name)
    return field.get_db_prep_value(field.get_prep_value(value), connection, prepared=True)


def rows_update(model: type[Model], where: Mapping[str, Any], values: Mapping[str, Any]) -> int:
    """UPDATE the rows of `model` matching every condition of `where` with `values`; the rows matched."""
    if not where or not values:
        raise ValueError("an UPDATE here needs at least one condition and one column")
    db = this_connection()
    params = [_prepared(model, name, value, db) for name, value in values.items()]
    conditions = []
    for name, value in where.items():
        if isinstance(value, (list, tuple, set, frozenset)):
            if not value:
                return 0  # `IN ()` matches nothing, as the ORM's empty `__in` does, without a statement
            items = sorted(value) if isinstance(value, (set, frozenset)) else list(value)
            conditions.append((name, len(items)))
            params += [_condition(model, name, item, db) for item in items]
        else:
            conditions.append((name, 0))
            params.append(_condition(model, name, value, db))
    sql = _update_sql(model, db.vendor, tuple(values), tuple(conditions))
    with transaction.mark_for_rollback_on_error(), db.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
