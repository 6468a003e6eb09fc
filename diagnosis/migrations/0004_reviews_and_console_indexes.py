# Review queue rows and the indexes behind the console filters.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

REVIEW_MODELS = ("runreview", "runreviewentry")


def grant_review_roles(apps, schema_editor):
    """Auditors and support staff read reviews; only the console's service writes them."""
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ContentType = apps.get_model("contenttypes", "ContentType")
    view = []
    for model_name in REVIEW_MODELS:
        content_type, _ = ContentType.objects.get_or_create(app_label="diagnosis", model=model_name)
        verbose_name = apps.get_model("diagnosis", model_name)._meta.verbose_name_raw
        permission, _ = Permission.objects.get_or_create(
            content_type=content_type, codename=f"view_{model_name}", defaults={"name": f"Can view {verbose_name}"})
        view.append(permission)
    for name in ("support_staff", "auditor"):
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*view)


class Migration(migrations.Migration):

    dependencies = [
        ('diagnosis', '0003_published_cases'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='RunReview',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('trigger', models.CharField(choices=[('degraded', 'degraded run'), ('low_confidence', 'low-confidence verdict'), ('not_useful', 'rated not useful'), ('sampled', 'random sample'), ('manual', 'opened by hand')], max_length=16)),
                ('status', models.CharField(choices=[('open', 'Open'), ('resolved', 'Resolved')], default='open', max_length=16)),
                ('reasons', models.JSONField(blank=True, default=list)),
                ('resolution', models.CharField(blank=True, choices=[('answer_ok', 'answer is fine'), ('answer_wrong', 'answer is wrong'), ('follow_up', 'needs a product fix'), ('not_actionable', 'not actionable')], max_length=16)),
                ('note', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('resolved_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'db_table': 'run_review',
            },
        ),
        migrations.CreateModel(
            name='RunReviewEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('action', models.CharField(max_length=16)),
                ('changes', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'verbose_name_plural': 'run review entries',
                'db_table': 'run_review_entry',
                'ordering': ['review_id', 'id'],
            },
        ),
        migrations.AddIndex(
            model_name='diagnosisrun',
            index=models.Index(fields=['created_at', 'id'], name='diagnosis_run_created_id'),
        ),
        migrations.AddIndex(
            model_name='diagnosisrun',
            index=models.Index(fields=['error_code', 'created_at'], name='diagnosis_run_error_created'),
        ),
        migrations.AddIndex(
            model_name='diagnosisrun',
            index=models.Index(fields=['feedback', 'created_at'], name='diagnosis_run_feedback_created'),
        ),
        migrations.AddIndex(
            model_name='diagnosisrun',
            index=models.Index(fields=['duration_ms'], name='diagnosis_run_duration'),
        ),
        migrations.AddIndex(
            model_name='diagnosisrun',
            index=models.Index(fields=['model_name', 'created_at'], name='diagnosis_run_model_created'),
        ),
        migrations.AddIndex(
            model_name='toolinvocation',
            index=models.Index(fields=['tool_name', 'run'], name='tool_invocation_tool_run'),
        ),
        migrations.AddField(
            model_name='runreview',
            name='assignee',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='runreview',
            name='created_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='runreview',
            name='resolved_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='runreview',
            name='run',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='review', to='diagnosis.diagnosisrun'),
        ),
        migrations.AddField(
            model_name='runreview',
            name='updated_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='runreviewentry',
            name='actor',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='runreviewentry',
            name='review',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='entries', to='diagnosis.runreview'),
        ),
        migrations.AddIndex(
            model_name='runreview',
            index=models.Index(fields=['status', 'created_at'], name='run_review_status_created'),
        ),
        migrations.RunPython(grant_review_roles, migrations.RunPython.noop),
    ]
