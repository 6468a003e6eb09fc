"""Migrations are committed, complete and applied on whichever database the pass uses."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def test_makemigrations_check_is_clean(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)  # exits 1 when a migration is missing
    assert out.getvalue().strip() == "No changes detected"


@pytest.mark.django_db
def test_every_migration_is_applied_and_the_tables_exist():
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    tables = set(connection.introspection.table_names())
    assert {"chat_session", "diagnosis_run", "agent_step", "tool_invocation", "case_library",
            "knowledge_document", "knowledge_chunk"} <= tables


@pytest.mark.django_db
def test_the_trace_and_admin_indexes_exist():
    with connection.cursor() as cursor:
        run_constraints = connection.introspection.get_constraints(cursor, "diagnosis_run")
        step_constraints = connection.introspection.get_constraints(cursor, "agent_step")
    index_columns = {tuple(c["columns"]) for c in run_constraints.values() if c["index"] or c["unique"]}
    assert ("session_id", "created_at") in index_columns
    assert ("status", "created_at") in index_columns
    assert ("run_id",) in index_columns
    assert any(c["unique"] and c["columns"] == ["run_id", "step_index"] for c in step_constraints.values())
