"""The Celery app: configured from Django settings (CELERY_*), tasks autodiscovered from apps."""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("diagnosis"), Queue("maintenance"))
app.autodiscover_tasks()
