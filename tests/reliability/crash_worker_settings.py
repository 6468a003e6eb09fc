"""Settings of the worker processes in the crash tests: the product settings with a short Redis
visibility timeout and an unacked-message sweep every second, so a message held by a killed worker
is handed out again within seconds instead of the production hour.

The product refuses CELERY_BROKER_VISIBILITY_TIMEOUT below 60 s from the environment; the ordering
it guards (soft limit < hard limit < visibility timeout) is kept here.
"""

from config.settings import *  # noqa: F401,F403
from config.settings import CELERY_BROKER_TRANSPORT_OPTIONS

CELERY_TASK_SOFT_TIME_LIMIT = 20
CELERY_TASK_TIME_LIMIT = 25
CELERY_BROKER_VISIBILITY_TIMEOUT = 30
assert CELERY_TASK_SOFT_TIME_LIMIT < CELERY_TASK_TIME_LIMIT < CELERY_BROKER_VISIBILITY_TIMEOUT
CELERY_BROKER_TRANSPORT_OPTIONS = {
    **CELERY_BROKER_TRANSPORT_OPTIONS,
    "visibility_timeout": CELERY_BROKER_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}

# Own queues: a worker of another test (the session's `live_worker`) must not take these messages,
# nor the reaper's, which must run with this lease.
RUNS_QUEUE, MAINTENANCE_QUEUE = "reliability-runs", "reliability-maintenance"
CELERY_TASK_ROUTES = {
    "diagnosis.tasks.execute_run": {"queue": RUNS_QUEUE},
    "diagnosis.tasks.reap_stale_runs": {"queue": MAINTENANCE_QUEUE},
}
