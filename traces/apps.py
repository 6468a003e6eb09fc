from django.apps import AppConfig
from django.db.models.signals import post_migrate


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Audit traces"

    def ready(self):
        from traces.fulltext import fulltext_ensure

        post_migrate.connect(fulltext_ensure, sender=self, dispatch_uid="traces.fulltext_ensure")
