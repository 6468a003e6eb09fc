from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("diagnosis", "0003_i11_published_cases"),
    ]

    operations = [
        migrations.AddField(
            model_name="diagnosisrun",
            name="diagnosis",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
