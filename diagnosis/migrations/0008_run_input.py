from django.db import migrations, models


def copy_input_events(apps, schema_editor):
    """Runs submitted before the column keep their alerts: each first "input" event is copied to it."""
    DiagnosisRun = apps.get_model("diagnosis", "DiagnosisRun")
    RunEvent = apps.get_model("diagnosis", "RunEvent")
    events = RunEvent.objects.filter(kind="input").order_by("run_id", "id").values_list("run_id", "data")
    seen = set()
    for run_pk, data in events.iterator(chunk_size=500):
        if run_pk in seen or not isinstance(data, dict):
            continue
        seen.add(run_pk)
        DiagnosisRun.objects.filter(pk=run_pk, input__isnull=True).update(input=data)


class Migration(migrations.Migration):
    """An alert analysis's normalised alerts move from its first run event to a column of the run."""

    dependencies = [("diagnosis", "0007_run_diagnosis")]

    operations = [
        migrations.AddField(
            model_name="diagnosisrun",
            name="input",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(copy_input_events, migrations.RunPython.noop),
    ]
