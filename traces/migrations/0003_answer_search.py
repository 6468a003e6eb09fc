"""The full-text indexes over the question, the answer and the root cause (service and summary), in
place of the question-only ones: SQLite's FTS5 table is made again over the four columns, MySQL and
MariaDB get a FULLTEXT index over them (and MariaDB one over both CJK term columns)."""

from django.db import migrations

from traces.fulltext import fulltext_create


def create(apps, schema_editor):
    fulltext_create(schema_editor.connection)


class Migration(migrations.Migration):
    atomic = False  # ALTER TABLE … ADD FULLTEXT cannot run inside a transaction on MySQL

    dependencies = [("traces", "0002_question_terms"), ("diagnosis", "0014_run_text_search")]

    operations = [migrations.RunPython(create, migrations.RunPython.noop, elidable=False)]
