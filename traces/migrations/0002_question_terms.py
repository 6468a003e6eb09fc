"""The question's CJK bigram terms for the runs already stored, then the full-text index over them
(MariaDB only: MySQL's ngram parser and SQLite's trigram tokenizer split Chinese themselves)."""

from django.db import migrations

from traces.fulltext import cjk_terms, fulltext_create

CHUNK = 5_000


def backfill(apps, schema_editor):
    runs = apps.get_model("diagnosis", "DiagnosisRun").objects.using(schema_editor.connection.alias)
    last = 0
    while True:
        rows = list(runs.filter(pk__gt=last).order_by("pk").values_list("pk", "question")[:CHUNK])
        if not rows:
            break
        last = rows[-1][0]
        changed = [run for run in (runs.model(pk=pk, question_terms=cjk_terms(q)) for pk, q in rows)
                   if run.question_terms]
        runs.bulk_update(changed, ["question_terms"], batch_size=500)
    fulltext_create(schema_editor.connection)


class Migration(migrations.Migration):
    atomic = False  # ALTER TABLE … ADD FULLTEXT cannot run inside a transaction on MySQL

    dependencies = [("traces", "0001_question_search"), ("diagnosis", "0009_console_search")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False)]
