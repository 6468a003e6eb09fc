"""Console search columns: the root-cause service and the token total (computed by the database, indexed),
the question's CJK bigram terms, and an index for the degraded filter."""

import django.db.models.expressions
import django.db.models.fields.json
import django.db.models.functions.text
from django.db import migrations, models


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
            field=models.GeneratedField(db_persist=False, expression=django.db.models.functions.text.Left(django.db.models.fields.json.KeyTextTransform('service', django.db.models.fields.json.KeyTextTransform('rootCause', 'diagnosis')), 128), output_field=models.CharField(max_length=128, null=True)),
        ),
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
