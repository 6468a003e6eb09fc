"""The ASGI application (gunicorn with uvicorn workers, `config/gunicorn.py`).

Marks the process as an ASGI web process before the settings load: under ASGI persistent database
connections are disabled (CONN_MAX_AGE=0, as the Django documentation asks), whatever the workers use.
Request bodies pass diagnosis.api.body_limit first."""

import os

os.environ["AIOPS_ASGI_PROCESS"] = "1"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_application = get_asgi_application()  # sets Django up: the guard below reads its settings

from diagnosis.api.body_limit import BodyLimitMiddleware  # noqa: E402

# Request bodies are guarded before Django reads them (size, then credentials for the API).
application = BodyLimitMiddleware(django_application)
