"""gunicorn settings for production: `gunicorn -c config/gunicorn.py config.asgi:application`.

uvicorn workers serve the ASGI application, so a Server-Sent Events stream or a waiting chat call
holds no thread. Every value comes from the environment (a bad one stops start-up naming it).
"""

import os

from config.env import env_int, env_str

bind = env_str("WEB_BIND", f"{env_str('HOST', '0.0.0.0')}:{env_int('PORT', 8000, minimum=1, maximum=65535)}")
workers = env_int("WEB_CONCURRENCY", 2, minimum=1, maximum=64)
worker_class = "uvicorn_worker.UvicornWorker"
# A worker silent for this long is killed and replaced (async workers tick even while streams are open).
timeout = env_int("WEB_TIMEOUT", 60, minimum=5)
# On SIGTERM a worker stops accepting and finishes in-flight requests for up to this long; open event
# streams are then closed and clients resume with Last-Event-ID on another process.
graceful_timeout = env_int("WEB_GRACEFUL_TIMEOUT", 30, minimum=1)
keepalive = env_int("WEB_KEEPALIVE", 5, minimum=1)
max_requests = env_int("WEB_MAX_REQUESTS", 0, minimum=0)  # 0: never recycle
max_requests_jitter = env_int("WEB_MAX_REQUESTS_JITTER", 0, minimum=0)
accesslog = env_str("WEB_ACCESS_LOG", "-")
errorlog = "-"
loglevel = env_str("LOG_LEVEL", "INFO").lower()
forwarded_allow_ips = env_str("FORWARDED_ALLOW_IPS", "127.0.0.1")
proc_name = "aiops-web"
control_socket_disable = True  # one shared path per user would collide between several instances on a host


def on_starting(server):
    """Multi-process metrics: the directory must exist and start empty (stale files are old processes)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        os.makedirs(directory, exist_ok=True)


def child_exit(server, worker):
    """A dead worker's live gauges (open streams) must leave the aggregate."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
