"""Full-text search over diagnosis_run.question: MySQL FULLTEXT (ngram parser where the server has it),
SQLite FTS5 with the trigram tokenizer kept current by triggers. Nothing on other databases."""

from django.db import migrations

from traces.fulltext import fulltext_create, fulltext_drop


def create(apps, schema_editor):
    fulltext_create(schema_editor.connection)


def drop(apps, schema_editor):
    fulltext_drop(schema_editor.connection)


class Migration(migrations.Migration):
    # ALTER TABLE … ADD FULLTEXT cannot run inside a transaction on MySQL; SQLite's DDL can.
    atomic = False

    dependencies = [("diagnosis", "0004_reviews_and_console_indexes")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
