"""Settings of the worker processes in the lease tests: the crash tests' settings (own queues, unacked
messages swept every second), with time limits long enough for a model call three leases long."""

from tests.reliability.crash_worker_settings import *  # noqa: F401,F403
from tests.reliability.crash_worker_settings import CELERY_BROKER_TRANSPORT_OPTIONS

CELERY_TASK_SOFT_TIME_LIMIT = 90
CELERY_TASK_TIME_LIMIT = 100
CELERY_BROKER_VISIBILITY_TIMEOUT = 120
CELERY_BROKER_TRANSPORT_OPTIONS = {**CELERY_BROKER_TRANSPORT_OPTIONS, "visibility_timeout": CELERY_BROKER_VISIBILITY_TIMEOUT}
