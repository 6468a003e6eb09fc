from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("diagnosis", "0006_replay"),
    ]

    operations = [
        migrations.AddField(
            model_name="diagnosisrun",
            name="diagnosis",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
