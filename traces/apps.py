from django.apps import AppConfig
from django.db.models.signals import post_migrate, pre_save


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Audit traces"

    def ready(self):
        from traces.fulltext import fulltext_ensure, question_terms_set

        post_migrate.connect(fulltext_ensure, sender=self, dispatch_uid="traces.fulltext_ensure")
        pre_save.connect(question_terms_set, sender="diagnosis.DiagnosisRun", dispatch_uid="traces.question_terms")
