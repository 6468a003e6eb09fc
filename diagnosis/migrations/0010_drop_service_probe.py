# The worker probe of the services pass is test support now (tests/support/probe.py): its table goes.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("diagnosis", "0009_console_search"),
    ]

    operations = [
        migrations.DeleteModel(name="ServiceProbe"),
    ]
