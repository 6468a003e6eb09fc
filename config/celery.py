"""The Celery app: configured from Django settings (CELERY_*), tasks autodiscovered from apps.

Every worker also runs the reaper on a timer (diagnosis.services.reaper.ReaperTimer), so runs end
without beat; a database lock makes one reaper pass at a time across workers and beat."""

import os

from celery import Celery
from celery.signals import worker_ready, worker_shutdown
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("diagnosis"), Queue("maintenance"))
app.autodiscover_tasks()

_reaper_timer = None


@worker_ready.connect
def _start_reaper_timer(sender=None, **kwargs):
    global _reaper_timer
    from diagnosis.services.reaper import ReaperTimer

    _reaper_timer = ReaperTimer(holder=getattr(sender, "hostname", "") or f"worker-{os.getpid()}").start()


@worker_shutdown.connect
def _stop_reaper_timer(**kwargs):
    if _reaper_timer is not None:
        _reaper_timer.stop()
