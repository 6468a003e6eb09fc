"""Settings, driven by the environment. DEBUG is off unless DJANGO_DEBUG=true says otherwise (`make run`
and the test suite do); with DEBUG off, DJANGO_SECRET_KEY and ALLOWED_HOSTS are required. The rest
defaults to the embedded setup: SQLite in var/, eager Celery, locmem cache, the offline model and the
demo telemetry."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.env import (
    env_bool, env_choice, env_float, env_int, env_list, env_prices, env_str, env_subset, env_url,
    parse_database_url, parse_redis_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DJANGO_DEBUG", False)  # fail closed: a forgotten variable never serves debug pages

SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if SECRET_KEY is None:
    if not DEBUG:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY is required when DJANGO_DEBUG is false (the default); "
                                   "set it, or DJANGO_DEBUG=true for local development only.")
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
    "axes",
    "diagnosis",
    "traces",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files (the admin's CSS) in production
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, so it sees the views' exceptions first: /api/ answers JSON even for an outage or a bug.
    "diagnosis.api.errors.ApiErrorMiddleware",
    "axes.middleware.AxesMiddleware",  # answers a locked-out console login
]

# Console logins are throttled per user name and per client address (django-axes, diagnosis/login_throttle.py).
AUTHENTICATION_BACKENDS = [
    "diagnosis.login_throttle.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1, maximum=1000)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_MINUTES", 15.0, minimum=0.1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each one on its own: a user from anywhere, an address for anyone
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

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
# Connections (docs/RELIABILITY.md, "Database connections"): a connection lives for at most
# DATABASE_CONN_MAX_AGE seconds and is reused by the thread that opened it, after a health check when a
# request or task starts, so a database restart costs one failed request, not a stale pool. The number
# open is bounded by the threads that use the database: web worker threads + per worker process one for
# the run and one for its lease ticker + one reaper timer per worker. The development server starts a
# thread per request, which would leave persistent connections behind: with DEBUG the default is 0
# (closed at the end of each request and task).
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 0 if DEBUG else 60, minimum=0, maximum=3600)
# An ASGI web process (config/asgi.py marks it) keeps no connection between requests: "When using ASGI,
# persistent connections should be disabled" (Django 5.2, ref/databases, "Persistent connections"). Each
# request runs its sync code in a thread of its own and every stream read runs on a pool thread, so a
# persistent connection would outlive its request in a thread nobody reuses. Django's connection pool is for
# PostgreSQL only. Workers keep DATABASE_CONN_MAX_AGE. The bound on connections: docs/DEPLOY.md.
ASGI_PROCESS = os.environ.get("AIOPS_ASGI_PROCESS") == "1"
if ASGI_PROCESS:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
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
# Sampling temperature sent with every model call (0-2); unset: the field is not sent (the server's default).
LLM_TEMPERATURE = env_float("LLM_TEMPERATURE", None, minimum=0.0, maximum=2.0)
# How a JSON answer is asked for: the role's JSON Schema (OpenAI form, or llama-cpp-python's
# json_object + schema), any JSON object, or the prompt alone; a server that rejects one level gets
# the next. See docs/MODELS.md.
LLM_STRUCTURED_OUTPUT = env_choice("LLM_STRUCTURED_OUTPUT", "json_schema",
                                   ("json_schema", "json_object_schema", "json_object", "prompt"))
# `content` of an assistant message that carries tool_calls: "" (works everywhere tested) or null.
LLM_TOOL_CALL_CONTENT = env_choice("LLM_TOOL_CALL_CONTENT", "empty", ("empty", "null"))
# The request field that carries it: "max_tokens" (most servers) or "max_completion_tokens" (OpenAI o-series).
LLM_MAX_TOKENS_PARAM = env_choice("LLM_MAX_TOKENS_PARAM", "max_tokens", ("max_tokens", "max_completion_tokens"))
# Offer OpenAI-compatible models the `rank_root_causes` tool: the localiser's ranking of this run's
# results so far, a hint of where to look that is never evidence (docs/TOOLS.md, docs/MODELS.md).
LLM_RANKING_HINT = env_bool("LLM_RANKING_HINT", True)
# Tokens one call may generate (max_tokens), per role.
LLM_MAX_TOKENS = {
    role: env_int(f"LLM_MAX_TOKENS_{role.upper()}", default, minimum=16, maximum=32_768)
    for role, default in (("planner", 1024), ("executor", 2048), ("verifier", 1536), ("composer", 2048),
                          ("simple", 1024), ("aiops", 2048))
}

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

# --- Traces and changes (query_traces, query_changes; docs/TOOLS.md) -----------------------------------
TRACES_BACKEND = env_choice("TRACES_BACKEND", "demo", ("demo", "tempo", "jaeger"))
TEMPO_URL = env_url("TEMPO_URL", None)
TEMPO_TENANT = env_str("TEMPO_TENANT")
JAEGER_URL = env_url("JAEGER_URL", None)
JAEGER_API = env_choice("JAEGER_API", "internal", ("internal", "v3"))  # v3: Jaeger releases without /api/traces
if TRACES_BACKEND == "tempo" and not TEMPO_URL:
    raise ImproperlyConfigured("TEMPO_URL is required when TRACES_BACKEND=tempo.")
if TRACES_BACKEND == "jaeger" and not JAEGER_URL:
    raise ImproperlyConfigured("JAEGER_URL is required when TRACES_BACKEND=jaeger.")
CHANGES_BACKEND = env_choice("CHANGES_BACKEND", "demo", ("demo", "kubernetes"))
ARGOCD_URL = env_url("ARGOCD_URL", None)
ARGOCD_TOKEN = env_str("ARGOCD_TOKEN")
ARGOCD_APP_NAMESPACE = env_str("ARGOCD_APP_NAMESPACE")
CHANGES_SOURCES = env_subset("CHANGES_SOURCES", ["rollout", "config", "secret", "helm"] + (["argocd"] if ARGOCD_URL else []),
                             ("rollout", "config", "secret", "helm", "argocd"))
# Helm's own variable and spellings: where the release history is stored (one Secret or ConfigMap per revision).
HELM_DRIVER = env_choice("HELM_DRIVER", "secret", ("secret", "secrets", "configmap", "configmaps")).removesuffix("s")
if "argocd" in CHANGES_SOURCES and CHANGES_BACKEND == "kubernetes" and not (ARGOCD_URL and ARGOCD_TOKEN):
    raise ImproperlyConfigured("ARGOCD_URL and ARGOCD_TOKEN are required when CHANGES_SOURCES lists argocd.")

# --- Run limits and budgets --------------------------------------------------------------------------
DIAGNOSIS_MAX_TOOL_CALLS = env_int("DIAGNOSIS_MAX_TOOL_CALLS", 12, minimum=1, maximum=100)
DIAGNOSIS_MAX_MODEL_CALLS = env_int("DIAGNOSIS_MAX_MODEL_CALLS", 24, minimum=1, maximum=200)
DIAGNOSIS_MAX_TOKENS = env_int("DIAGNOSIS_MAX_TOKENS", 200_000, minimum=1000)
DIAGNOSIS_MAX_SECONDS = env_int("DIAGNOSIS_MAX_SECONDS", 300, minimum=5)
TOOL_RESULT_MAX_BYTES = env_int("TOOL_RESULT_MAX_BYTES", 1_000_000, minimum=1000)
CHAT_MAX_QUESTION_CHARS = env_int("CHAT_MAX_QUESTION_CHARS", 4000, minimum=10, maximum=100_000)
CHAT_WAIT_SECONDS = env_float("CHAT_WAIT_SECONDS", 60.0, minimum=0, maximum=600)
# The lease of an executing run (docs/RELIABILITY.md, "Leases, fencing and reaping"). A ticker renews it every
# lease/4 while the run executes; a run whose heartbeat is older than the lease is reaped. It must outlast one
# model call's worst case (every attempt's connect + read timeout, plus the capped backoff between them),
# so that even a worker whose ticker stalled is never reaped in the middle of a call.
LLM_BACKOFF_CAP_SECONDS = 2.0  # diagnosis.llm.openai_model.OpenAIChatModel.backoff_cap
LLM_CALL_WORST_SECONDS = (LLM_MAX_RETRIES + 1) * (LLM_CONNECT_TIMEOUT + LLM_READ_TIMEOUT) + LLM_MAX_RETRIES * LLM_BACKOFF_CAP_SECONDS
RUN_LEASE_SECONDS = env_int("RUN_LEASE_SECONDS", max(60, int(LLM_CALL_WORST_SECONDS * 1.25) + 10), minimum=10)
if RUN_LEASE_SECONDS < LLM_CALL_WORST_SECONDS:
    raise ImproperlyConfigured(
        f"RUN_LEASE_SECONDS={RUN_LEASE_SECONDS} is shorter than one model call's worst case, "
        f"{LLM_CALL_WORST_SECONDS:g}s = (LLM_MAX_RETRIES {LLM_MAX_RETRIES} + 1) x (LLM_CONNECT_TIMEOUT {LLM_CONNECT_TIMEOUT:g} "
        f"+ LLM_READ_TIMEOUT {LLM_READ_TIMEOUT:g}) + {LLM_MAX_RETRIES} x {LLM_BACKOFF_CAP_SECONDS:g}s backoff: "
        "raise RUN_LEASE_SECONDS or lower the model timeouts."
    )
# Every worker runs the reaper on this timer (one at a time, under a database lock); beat is optional.
RUN_REAPER_INTERVAL_SECONDS = env_float("RUN_REAPER_INTERVAL_SECONDS", max(5.0, RUN_LEASE_SECONDS / 4), minimum=1, maximum=3600)
# A PENDING run older than this is published again once; still PENDING one deadline later, it is FAILED queue_lost.
RUN_QUEUE_DEADLINE_SECONDS = env_int("RUN_QUEUE_DEADLINE_SECONDS", 900, minimum=10)
# A run whose claim failed on a database or broker error is retried with exponential backoff (1, 2, 4 s ...,
# full jitter) capped at this, until its queue deadline (diagnosis.tasks.execute_run).
RUN_CLAIM_RETRY_BACKOFF_MAX_SECONDS = env_int("RUN_CLAIM_RETRY_BACKOFF_MAX_SECONDS", 10, minimum=1, maximum=600)
CHAT_MAX_ACTIVE_RUNS = env_int("CHAT_MAX_ACTIVE_RUNS", 5, minimum=1, maximum=1000)
CHAT_THROTTLE_RATE = env_str("CHAT_THROTTLE_RATE", "60/min")

# Hosts a link or image in an answer or report may point at in the console (https/http only); every
# other target is shown as text (traces/rendering.py). Empty: no link is ever active.
MARKDOWN_LINK_HOSTS = env_list("MARKDOWN_LINK_HOSTS", [])

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
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "diagnosis.api.auth.BearerTokenAuthentication",  # the same tokens, as Alertmanager sends them
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
# Request bodies: at most this many bytes, on every endpoint. Under ASGI diagnosis/api/body_limit.py refuses a
# larger one with 413 as it streams in, before Django reads it; Django's own limits are the same number, so a
# body within it is parsed in memory and never spooled to a temporary file.
REQUEST_BODY_MAX_BYTES = env_int("REQUEST_BODY_MAX_BYTES", 256 * 1024, minimum=1024, maximum=64 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BODY_MAX_BYTES  # a question is capped far below this
FILE_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BODY_MAX_BYTES
SPECTACULAR_SETTINGS = {
    "TITLE": "Evidence-gated AIOps diagnosis API",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",  # vendored assets: the docs page needs no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # One name for the closed fault-kind set, which rootCause.cause and candidates[].kind both use.
    "ENUM_NAME_OVERRIDES": {"CauseKindEnum": "diagnosis.structured_diagnosis.CAUSE_KIND_IDS"},
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

# --- The reaper ------------------------------------------------------------------------------------------
# Every worker runs it on a timer (RUN_REAPER_INTERVAL_SECONDS, diagnosis/worker.py). Beat is optional: it
# sends the same task every half lease, and the reaper's database lock makes one pass at a time, so beat
# may run on every node. A message not consumed within one period expires, leaving no backlog.
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {
        "task": "diagnosis.tasks.reap_stale_runs",
        "schedule": RUN_LEASE_SECONDS / 2,
        "options": {"expires": RUN_LEASE_SECONDS / 2},
    },
}

# --- Production server, live progress and observability ---------------------------------------------
# Static files: `manage.py collectstatic` (the release step) writes hashed, compressed copies to
# STATIC_ROOT; whitenoise serves them from the web process. DEBUG keeps the finder-based serving.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise scans it at start-up
WHITENOISE_USE_FINDERS = DEBUG  # DEBUG: app static files without collectstatic, as the development server does
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage" if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage",
    },
}
# Server-Sent Events: a heartbeat comment every SSE_HEARTBEAT_SECONDS, a stream closes after
# SSE_MAX_SECONDS (clients resume with Last-Event-ID), SSE_MAX_STREAMS_PER_USER open at once (429).
SSE_HEARTBEAT_SECONDS = env_float("SSE_HEARTBEAT_SECONDS", 15.0, minimum=0.1, maximum=300)
SSE_MAX_SECONDS = env_int("SSE_MAX_SECONDS", 600, minimum=1, maximum=86_400)
SSE_MAX_STREAMS_PER_USER = env_int("SSE_MAX_STREAMS_PER_USER", 10, minimum=1, maximum=10_000)
# Without Redis (the embedded default) live progress is read from the database at this interval.
SSE_POLL_SECONDS = env_float("SSE_POLL_SECONDS", 0.25, minimum=0.05, maximum=10)
# /metrics: open to a bearer token (METRICS_TOKEN) and/or client addresses (METRICS_ALLOWED_NETWORKS,
# comma-separated CIDRs). With neither set it answers 404: metrics are never public by default.
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", [])
for _network in METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"METRICS_ALLOWED_NETWORKS entry {_network!r} is not an address or network (e.g. 10.0.0.0/8)."
        ) from None
# LOG_FORMAT=json: one JSON object per line, with run_id and session_id while a run executes.
LOG_FORMAT = env_choice("LOG_FORMAT", "plain", ("plain", "json"))
LOGGING["formatters"]["json"] = {"()": "diagnosis.observability.logs.JsonFormatter"}
LOGGING["filters"] = {"run_context": {"()": "diagnosis.observability.logs.RunContextFilter"}}
LOGGING["handlers"]["console"]["formatter"] = LOG_FORMAT
LOGGING["handlers"]["console"]["filters"] = ["run_context"]
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"  # JSON: workers keep this LOGGING configuration
# OTEL_EXPORTER_OTLP_ENDPOINT set: every run is exported as an OpenTelemetry trace (OTLP over HTTP).
OTEL_EXPORTER_OTLP_ENDPOINT = env_url("OTEL_EXPORTER_OTLP_ENDPOINT", None)
OTEL_SERVICE_NAME = env_str("OTEL_SERVICE_NAME", "aiops-diagnosis")

# --- Console: tokens and cost ----------------------------------------------------------------------
# USD per million tokens, prompt and completion, per model name as stored on runs. MODEL_PRICES
# overrides the defaults: "model=prompt:completion,model=prompt:completion" (e.g. "gpt-4o-mini=0.15:0.6").
# A model with no price is shown as "no price", never as zero cost (docs/CONSOLE.md, "Tokens and cost").
MODEL_PRICES = env_prices("MODEL_PRICES", {"gpt-4o-mini": (0.15, 0.60), "offline-analyser": (0.0, 0.0)})
