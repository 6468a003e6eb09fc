"""Console search columns: the root-cause service (kept beside the structured diagnosis, filled here for
stored runs) and the token total (computed by the database), both indexed; the question's CJK bigram
terms; and an index for the degraded filter."""

import django.db.models.expressions
from django.db import migrations, models

BATCH = 1000


def root_service_fill(apps, schema_editor):
    runs = apps.get_model("diagnosis", "DiagnosisRun")
    pending = []
    for run in runs.objects.filter(diagnosis__isnull=False).only("pk", "diagnosis").iterator(chunk_size=BATCH):
        root = run.diagnosis.get("rootCause") if isinstance(run.diagnosis, dict) else None
        service = root.get("service") if isinstance(root, dict) else None
        if service:
            run.root_service = str(service)[:128]
            pending.append(run)
        if len(pending) >= BATCH:
            runs.objects.bulk_update(pending, ["root_service"])
            pending = []
    if pending:
        runs.objects.bulk_update(pending, ["root_service"])


class Migration(migrations.Migration):

    dependencies = [
        ('diagnosis', '0008_run_input'),
    ]

    operations = [
        migrations.AddField(
            model_name='diagnosisrun',
            name='question_terms',
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='diagnosisrun',
            name='root_service',
            field=models.CharField(blank=True, editable=False, max_length=128, null=True),
        ),
        migrations.RunPython(root_service_fill, migrations.RunPython.noop, elidable=False),
        migrations.AddField(
            model_name='diagnosisrun',
            name='tokens_total',
            field=models.GeneratedField(db_persist=False, expression=django.db.models.expressions.CombinedExpression(models.F('prompt_tokens'), '+', models.F('completion_tokens')), output_field=models.PositiveIntegerField()),
        ),
        migrations.AddIndex(
            model_name='diagnosisrun',
            index=models.Index(fields=['root_service', 'created_at'], name='diagnosis_run_service_created'),
        ),
        migrations.AddIndex(
            model_name='diagnosisrun',
            index=models.Index(fields=['tokens_total'], name='diagnosis_run_tokens_total'),
        ),
        migrations.AddIndex(
            model_name='diagnosisrun',
            index=models.Index(fields=['degraded', 'created_at'], name='diagnosis_run_degraded_created'),
        ),
    ]
