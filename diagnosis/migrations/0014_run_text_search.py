"""The root cause's summary and the CJK terms of the answer, so the console searches the answer and the
root cause as well as the question (traces/migrations/0003 builds the full-text indexes over them); the
sessions' (created_at, id) index, so the console's session list reads the newest without a sort."""

from django.db import migrations, models

from diagnosis.search_text import answer_terms_of, root_summary_of

CHUNK = 2_000


def text_columns_fill(apps, schema_editor):
    runs = apps.get_model("diagnosis", "DiagnosisRun").objects.using(schema_editor.connection.alias)
    last = 0
    while True:
        rows = list(runs.filter(pk__gt=last).order_by("pk").values_list("pk", "answer", "diagnosis")[:CHUNK])
        if not rows:
            break
        last = rows[-1][0]
        changed = [
            runs.model(pk=pk, root_summary=root_summary_of(diagnosis), answer_terms=answer_terms_of(answer, diagnosis))
            for pk, answer, diagnosis in rows
        ]
        changed = [run for run in changed if run.root_summary or run.answer_terms]
        runs.bulk_update(changed, ["root_summary", "answer_terms"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("diagnosis", "0013_case_versions")]

    operations = [
        migrations.AddField(
            model_name="diagnosisrun", name="root_summary",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="diagnosisrun", name="answer_terms",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.AddIndex(
            model_name="chatsession",
            index=models.Index(fields=["created_at", "id"], name="chat_session_created_id"),
        ),
        migrations.RunPython(text_columns_fill, migrations.RunPython.noop, elidable=False),
    ]
