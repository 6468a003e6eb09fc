"""The ASGI application (gunicorn with uvicorn workers, `config/gunicorn.py`).

Marks the process as an ASGI web process before the settings load: under ASGI persistent database
connections are disabled (CONN_MAX_AGE=0, as the Django documentation asks), whatever the workers use."""

import os

os.environ["AIOPS_ASGI_PROCESS"] = "1"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()
