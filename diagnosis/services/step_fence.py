"""A group's step rows written by the statement that is also the run's fence (services/observer.py).

`steps_insert_fenced` inserts a run's step rows, the ended steps' end columns upserted on
(run, step_index) with the new step, by an INSERT … SELECT that reads the run row: the rows come out of
the SELECT only while the run is RUNNING under the worker's claim token. On MySQL/MariaDB the SELECT
locks that row (FOR UPDATE; a plain INSERT … SELECT under READ COMMITTED would read it without a lock),
as the heartbeat UPDATE it replaces did, and before any step row: the reaper's order (run row, then its
steps). SQLite runs one write transaction at a time (BEGIN IMMEDIATE): the row read is the latest.

The rows are the run row joined to a counter 1..n, each column a CASE on the counter. A derived table of
the rows (`(SELECT … UNION ALL SELECT …)`, `VALUES …`) would be materialised by MariaDB, on disk once a
value is long enough to be a TEXT (a real prompt): 2-7 ms more per group, measured; the CASE costs what
the plain multi-row VALUES did. Used on MariaDB and SQLite, where it is tested; elsewhere (MySQL 8, not
run here) the observer keeps the separate fence.
"""

from __future__ import annotations

from django.db.models.constants import OnConflict

from diagnosis.models import AgentStep, DiagnosisRun
from diagnosis.services.row_insert import insert_fields, row_values, this_connection


def fence_folds() -> bool:
    """Whether this database's step INSERT is the fence (see the module docstring)."""
    connection = this_connection()
    return connection.vendor == "sqlite" or (connection.vendor == "mysql" and connection.mysql_is_mariadb)


def _select(rows: list[AgentStep], fields: tuple, connection) -> tuple[str, list]:
    """The SELECT list of the rows and its parameters: one value per column, or a CASE on the counter."""
    values = row_values(rows, fields, connection)
    if len(rows) == 1:
        return ", ".join(["%s"] * len(fields)), values[0]
    counter = connection.ops.quote_name("counter")
    params: list = []
    whens = " ".join(f"WHEN {n} THEN %s" for n in range(1, len(rows)))
    column = f"CASE {counter}.{connection.ops.quote_name('n')} {whens} ELSE %s END"
    for i in range(len(fields)):
        params += [row_values[i] for row_values in values]
    return ", ".join([column] * len(fields)), params


def steps_insert_fenced(rows: list[AgentStep], *, run_pk: int, token: str,
                        update_fields: list[str] | None = None) -> list[int] | None:
    """Insert `rows` (on (run, step_index) only `update_fields` change, when given) if the run is RUNNING
    under `token`, in one statement that locks the run row. Their ids in order, or None when the fence
    did not match and nothing was written. Without RETURNING (MariaDB before 10.5), one row and no upsert."""
    connection = this_connection()
    returning = connection.features.can_return_rows_from_bulk_insert
    if not rows or (not returning and (len(rows) > 1 or update_fields)):
        raise ValueError("one row, no upsert, where the database does not return a multi-row INSERT's ids")
    q = connection.ops.quote_name
    meta, run = AgentStep._meta, DiagnosisRun._meta
    fields = insert_fields(AgentStep)
    select, params = _select(rows, fields, connection)
    counter, n = q("counter"), q("n")
    numbers = " UNION ALL ".join(f"SELECT {i} AS {n}" for i in range(1, len(rows) + 1))
    joined = f" CROSS JOIN ({numbers}) {counter}" if len(rows) > 1 else ""
    fenced = q("fenced_run")
    status, token_column = (q(run.get_field(name).column) for name in ("status", "claim_token"))
    sql = (f"INSERT INTO {q(meta.db_table)} ({', '.join(q(field.column) for field in fields)})"
           f" SELECT {select} FROM {q(run.db_table)} {fenced}{joined}"
           f" WHERE {fenced}.{q(run.pk.column)} = %s AND {fenced}.{status} = %s AND {fenced}.{token_column} = %s")
    params += [run_pk, DiagnosisRun.Status.RUNNING, token]
    if len(rows) > 1:
        sql += f" ORDER BY {counter}.{n}"  # the rows are inserted, and their ids returned, in this order
    if connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    if update_fields:
        sql += " " + connection.ops.on_conflict_suffix_sql(
            fields, OnConflict.UPDATE, [meta.get_field(name).column for name in update_fields],
            [meta.get_field("run").column, meta.get_field("step_index").column])
    with connection.cursor() as cursor:
        if returning:
            suffix, extra = connection.ops.return_insert_columns([meta.pk])
            cursor.execute(f"{sql} {suffix}", [*params, *extra])
            ids = [row[0] for row in cursor.fetchall()]
        else:
            cursor.execute(sql, params)
            ids = [cursor.lastrowid] if cursor.rowcount == 1 else []
    if not ids:
        return None
    if len(ids) != len(rows):
        raise RuntimeError(f"run {run_pk}: {len(rows)} step rows written, {len(ids)} ids returned")
    for row, pk in zip(rows, ids):
        row.pk = pk
        row._state.adding, row._state.db = False, connection.alias
    return ids
