"""Settings, driven by the environment. With no environment at all this is the embedded default:
SQLite in var/, eager Celery, locmem cache, DEBUG on, the offline model and the demo telemetry."""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.env import (
    env_bool, env_choice, env_float, env_int, env_list, env_str, env_url,
    parse_database_url, parse_redis_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DJANGO_DEBUG", True)

SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if SECRET_KEY is None:
    if not DEBUG:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY is required when DJANGO_DEBUG is false.")
    SECRET_KEY = "embedded-default-only-not-for-production-6f1c9a2b7d3e4f5a8b9c0d1e2f3a4b5c"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"] if DEBUG else [])
if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS is required when DJANGO_DEBUG is false (comma-separated host names).")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "diagnosis",
    "traces",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", "sqlite:///var/db.sqlite3")
DATABASES = {"default": parse_database_url(DATABASE_URL, base_dir=BASE_DIR)}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: Celery broker + result backend, Django cache -------------------------------------
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL is not None:
    parse_redis_url(REDIS_URL)
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "aiops",
            "TIMEOUT": 3600,
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "aiops"}}

# --- Celery ------------------------------------------------------------------------------------
CELERY_TASK_ALWAYS_EAGER = REDIS_URL is None
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_DEFAULT_QUEUE = "diagnosis"
CELERY_TASK_ROUTES = {
    "diagnosis.tasks.execute_run": {"queue": "diagnosis"},
    "diagnosis.tasks.ping": {"queue": "maintenance"},
    "diagnosis.tasks.reap_stale_runs": {"queue": "maintenance"},
}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A broker that is down must fail a chat request within seconds (503), not hang it.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
# A run must be finished or killed well before Redis hands its unacked message to another worker.
CELERY_BROKER_VISIBILITY_TIMEOUT = env_int("CELERY_BROKER_VISIBILITY_TIMEOUT", 3600, minimum=60)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540, minimum=5)
if not CELERY_TASK_SOFT_TIME_LIMIT < CELERY_TASK_TIME_LIMIT < CELERY_BROKER_VISIBILITY_TIMEOUT:
    raise ImproperlyConfigured(
        "Celery time limits must be ordered CELERY_TASK_SOFT_TIME_LIMIT < CELERY_TASK_TIME_LIMIT "
        f"< CELERY_BROKER_VISIBILITY_TIMEOUT (got {CELERY_TASK_SOFT_TIME_LIMIT} < {CELERY_TASK_TIME_LIMIT} "
        f"< {CELERY_BROKER_VISIBILITY_TIMEOUT})."
    )
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_BROKER_VISIBILITY_TIMEOUT,
    "socket_connect_timeout": 2,
    "socket_timeout": 5,
}
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"socket_connect_timeout": 2, "socket_timeout": 5}

# --- Model --------------------------------------------------------------------------------------
LLM_PROVIDER = env_choice("LLM_PROVIDER", "offline", ("offline", "openai"))
OPENAI_BASE_URL = env_url("OPENAI_BASE_URL", "https://api.openai.com/v1")
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
if LLM_PROVIDER == "openai" and not OPENAI_API_KEY:
    raise ImproperlyConfigured("OPENAI_API_KEY is required when LLM_PROVIDER=openai.")
OPENAI_MODEL = env_str("OPENAI_MODEL", "gpt-4o-mini")
OPENAI_MODELS = {
    role: env_str(f"OPENAI_MODEL_{role.upper()}", OPENAI_MODEL)
    for role in ("planner", "executor", "verifier", "composer", "simple", "aiops")
}
LLM_CONNECT_TIMEOUT = env_float("LLM_CONNECT_TIMEOUT", 5.0, minimum=0.1, maximum=60)
LLM_READ_TIMEOUT = env_float("LLM_READ_TIMEOUT", 60.0, minimum=0.1, maximum=600)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 2, minimum=0, maximum=5)

# --- Evidence tools -------------------------------------------------------------------------------
METRICS_BACKEND = env_choice("METRICS_BACKEND", "demo", ("demo", "prometheus"))
LOGS_BACKEND = env_choice("LOGS_BACKEND", "demo", ("demo", "loki"))
KUBERNETES_BACKEND = env_choice("KUBERNETES_BACKEND", "demo", ("demo", "kubernetes"))
KUBERNETES_NAMESPACE = env_str("KUBERNETES_NAMESPACE", "default")
PROMETHEUS_URL = env_url("PROMETHEUS_URL", None)
LOKI_URL = env_url("LOKI_URL", None)
LOKI_TENANT = env_str("LOKI_TENANT")
if METRICS_BACKEND == "prometheus" and not PROMETHEUS_URL:
    raise ImproperlyConfigured("PROMETHEUS_URL is required when METRICS_BACKEND=prometheus.")
if LOGS_BACKEND == "loki" and not LOKI_URL:
    raise ImproperlyConfigured("LOKI_URL is required when LOGS_BACKEND=loki.")
BACKEND_TIMEOUT_SECONDS = env_float("BACKEND_TIMEOUT_SECONDS", 5.0, minimum=0.1, maximum=120)
DEMO_SCENARIOS_DIR = Path(env_str("DEMO_SCENARIOS_DIR", str(BASE_DIR / "diagnosis" / "demo" / "scenarios")))

# --- Run limits and budgets --------------------------------------------------------------------------
DIAGNOSIS_MAX_TOOL_CALLS = env_int("DIAGNOSIS_MAX_TOOL_CALLS", 12, minimum=1, maximum=100)
DIAGNOSIS_MAX_MODEL_CALLS = env_int("DIAGNOSIS_MAX_MODEL_CALLS", 24, minimum=1, maximum=200)
DIAGNOSIS_MAX_TOKENS = env_int("DIAGNOSIS_MAX_TOKENS", 200_000, minimum=1000)
DIAGNOSIS_MAX_SECONDS = env_int("DIAGNOSIS_MAX_SECONDS", 300, minimum=5)
TOOL_RESULT_MAX_BYTES = env_int("TOOL_RESULT_MAX_BYTES", 1_000_000, minimum=1000)
CHAT_MAX_QUESTION_CHARS = env_int("CHAT_MAX_QUESTION_CHARS", 4000, minimum=10, maximum=100_000)
CHAT_WAIT_SECONDS = env_float("CHAT_WAIT_SECONDS", 60.0, minimum=0, maximum=600)
RUN_LEASE_SECONDS = env_int("RUN_LEASE_SECONDS", 120, minimum=10)
CHAT_MAX_ACTIVE_RUNS = env_int("CHAT_MAX_ACTIVE_RUNS", 5, minimum=1, maximum=1000)
CHAT_THROTTLE_RATE = env_str("CHAT_THROTTLE_RATE", "60/min")

# --- Auth, i18n, static --------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "diagnosis.api.errors.api_exception_handler",
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_THROTTLE_RATES": {"chat": CHAT_THROTTLE_RATE},
    # Content type is chosen by the Accept header only: no `?format=` override to validate or document.
    "URL_FORMAT_OVERRIDE": None,
}
DATA_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024  # request bodies; a question is capped far below this
SPECTACULAR_SETTINGS = {
    "TITLE": "Evidence-gated AIOps diagnosis API",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",  # vendored assets: the docs page needs no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))},
}

# --- Production hardening (checked by `manage.py check --deploy`) -----------------------------------
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    if env_bool("BEHIND_TLS_PROXY", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# --- The reaper (celery beat) -------------------------------------------------------------------------
# Every half lease, RUNNING runs whose heartbeat is older than RUN_LEASE_SECONDS become FAILED (worker_lost).
# A message not consumed within one period expires, so a stopped maintenance worker leaves no backlog.
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {
        "task": "diagnosis.tasks.reap_stale_runs",
        "schedule": RUN_LEASE_SECONDS / 2,
        "options": {"expires": RUN_LEASE_SECONDS / 2},
    },
}
