"""Settings parsing: every variable, good and bad values, and the deploy check."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import env

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = str(ROOT / "config" / "settings.py")
PROD = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "x7Kq9-production-secret-key-that-is-long-enough-3fj29dk2ls0vn4bq",
    "ALLOWED_HOSTS": "aiops.example.com",
}


def load(monkeypatch, bare: bool = False, **values) -> dict:
    """Execute config/settings.py afresh with exactly these variables set (and DJANGO_DEBUG=true, as the
    suite and `make run` set it, unless `bare` or given)."""
    if not bare:
        values.setdefault("DJANGO_DEBUG", "true")
    for name in list(__import__("os").environ):
        if name.startswith(("DJANGO_", "DATABASE_", "REDIS_", "OPENAI_", "LLM_", "CELERY_", "CHAT_", "DIAGNOSIS_")) or name in (
            "ALLOWED_HOSTS", "METRICS_BACKEND", "LOGS_BACKEND", "PROMETHEUS_URL", "LOKI_URL", "RUN_LEASE_SECONDS",
        ):
            monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(SETTINGS)


def test_debug_is_off_by_default_and_start_up_then_refuses_without_a_secret_key(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY is required when DJANGO_DEBUG is false"):
        load(monkeypatch, bare=True)
    s = load(monkeypatch, bare=True, DJANGO_SECRET_KEY=PROD["DJANGO_SECRET_KEY"], ALLOWED_HOSTS="aiops.example.com")
    assert s["DEBUG"] is False and s["SECRET_KEY"] == PROD["DJANGO_SECRET_KEY"]


def test_the_embedded_default_needs_nothing_but_debug(monkeypatch):
    s = load(monkeypatch, DJANGO_DEBUG="true")
    assert s["DEBUG"] is True
    assert s["DATABASES"]["default"]["ENGINE"] == "django.db.backends.sqlite3"
    assert s["DATABASES"]["default"]["NAME"].endswith("var/db.sqlite3")
    assert s["CELERY_TASK_ALWAYS_EAGER"] is True
    assert s["CACHES"]["default"]["BACKEND"].endswith("LocMemCache")
    assert s["LLM_PROVIDER"] == "offline"
    assert s["METRICS_BACKEND"] == "demo" and s["LOGS_BACKEND"] == "demo"


def test_the_sqlite_folder_is_git_ignored():
    assert "var/" in (ROOT / ".gitignore").read_text().splitlines()


def test_mysql_url_sets_utf8mb4_and_strict_mode(monkeypatch):
    s = load(monkeypatch, DATABASE_URL="mysql://app:p%40ss@db.internal:3307/aiops")
    db = s["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.mysql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == ("app", "p@ss", "db.internal", "3307", "aiops")
    assert db["OPTIONS"]["charset"] == "utf8mb4"
    assert "STRICT_TRANS_TABLES" in db["OPTIONS"]["init_command"]
    assert db["TEST"]["CHARSET"] == "utf8mb4"


def test_sqlite_url_accepts_relative_and_absolute_paths(monkeypatch):
    assert load(monkeypatch, DATABASE_URL="sqlite:////tmp/aiops-x.sqlite3")["DATABASES"]["default"]["NAME"] == "/tmp/aiops-x.sqlite3"
    assert load(monkeypatch, DATABASE_URL="sqlite:///var/other.sqlite3")["DATABASES"]["default"]["NAME"] == str(ROOT / "var/other.sqlite3")


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("postgres://u@h/db", "supported schemes: mysql://"),
        ("mysql://localhost", "must name a host and a database"),
        ("mysql://h:notaport/db", "invalid port"),
        ("mysql://h/db?foo=1", "query parameter 'foo'"),
        ("sqlite://", "not a valid SQLite URL"),
        ("just-a-path.db", "supported schemes"),
    ],
)
def test_a_bad_database_url_names_the_variable_and_what_it_accepts(monkeypatch, value, fragment):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL") as info:
        load(monkeypatch, DATABASE_URL=value)
    assert fragment in str(info.value)


def test_redis_url_switches_celery_and_cache_to_redis(monkeypatch):
    s = load(monkeypatch, REDIS_URL="redis://127.0.0.1:6379/3")
    assert s["CELERY_TASK_ALWAYS_EAGER"] is False
    assert s["CELERY_BROKER_URL"] == s["CELERY_RESULT_BACKEND"] == "redis://127.0.0.1:6379/3"
    assert s["CACHES"]["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"


@pytest.mark.parametrize("value", ["amqp://guest@localhost//", "redis://", "redis://h:6379/zero", "redis://h:port/0"])
def test_a_bad_redis_url_is_rejected(monkeypatch, value):
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        load(monkeypatch, REDIS_URL=value)


def test_secret_key_is_required_when_debug_is_off(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY is required"):
        load(monkeypatch, DJANGO_DEBUG="false", ALLOWED_HOSTS="x.example.com")


def test_allowed_hosts_is_required_when_debug_is_off(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="ALLOWED_HOSTS"):
        load(monkeypatch, DJANGO_DEBUG="false", DJANGO_SECRET_KEY=PROD["DJANGO_SECRET_KEY"])


def test_allowed_hosts_is_a_comma_separated_list(monkeypatch):
    assert load(monkeypatch, ALLOWED_HOSTS="a.example.com, b.example.com")["ALLOWED_HOSTS"] == ["a.example.com", "b.example.com"]
    with pytest.raises(ImproperlyConfigured, match="ALLOWED_HOSTS"):
        load(monkeypatch, ALLOWED_HOSTS="a.example.com,,b")


@pytest.mark.parametrize("value, expected", [("true", True), ("False", False), ("1", True), ("0", False)])
def test_debug_accepts_booleans(monkeypatch, value, expected):
    assert load(monkeypatch, DJANGO_DEBUG=value, **{k: v for k, v in PROD.items() if k != "DJANGO_DEBUG"})["DEBUG"] is expected


def test_debug_rejects_anything_else(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="DJANGO_DEBUG='maybe' is not a boolean"):
        load(monkeypatch, DJANGO_DEBUG="maybe")


def test_model_settings_select_openai_with_per_role_models(monkeypatch):
    s = load(
        monkeypatch, LLM_PROVIDER="openai", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL="http://127.0.0.1:8001/v1/",
        OPENAI_MODEL="qwen-plus", OPENAI_MODEL_VERIFIER="qwen-max", LLM_READ_TIMEOUT="12.5", LLM_CONNECT_TIMEOUT="2",
    )
    assert s["LLM_PROVIDER"] == "openai"
    assert s["OPENAI_BASE_URL"] == "http://127.0.0.1:8001/v1"
    assert s["OPENAI_MODELS"]["planner"] == "qwen-plus" and s["OPENAI_MODELS"]["verifier"] == "qwen-max"
    assert (s["LLM_READ_TIMEOUT"], s["LLM_CONNECT_TIMEOUT"]) == (12.5, 2.0)


@pytest.mark.parametrize(
    "values, fragment",
    [
        ({"LLM_PROVIDER": "anthropic"}, "LLM_PROVIDER='anthropic' is not supported; use one of: offline, openai"),
        ({"LLM_PROVIDER": "openai"}, "OPENAI_API_KEY is required"),
        ({"OPENAI_BASE_URL": "ftp://x"}, "OPENAI_BASE_URL='ftp://x' is not a valid URL"),
        ({"LLM_READ_TIMEOUT": "soon"}, "LLM_READ_TIMEOUT='soon' is not a number"),
        ({"LLM_READ_TIMEOUT": "0"}, "LLM_READ_TIMEOUT=0.0 is below the minimum"),
        ({"LLM_CONNECT_TIMEOUT": "nan"}, "LLM_CONNECT_TIMEOUT='nan' must be a finite number"),
        ({"LLM_MAX_RETRIES": "9"}, "LLM_MAX_RETRIES=9 is above the maximum 5"),
        ({"METRICS_BACKEND": "prometheus"}, "PROMETHEUS_URL is required"),
        ({"LOGS_BACKEND": "loki"}, "LOKI_URL is required"),
        ({"LOGS_BACKEND": "elastic"}, "LOGS_BACKEND='elastic' is not supported"),
        ({"CHAT_MAX_QUESTION_CHARS": "many"}, "CHAT_MAX_QUESTION_CHARS='many' is not an integer"),
    ],
)
def test_bad_model_and_tool_settings_name_the_variable(monkeypatch, values, fragment):
    with pytest.raises(ImproperlyConfigured) as info:
        load(monkeypatch, **values)
    assert fragment in str(info.value)


def test_celery_time_limits_sit_below_the_broker_visibility_timeout(monkeypatch):
    s = load(monkeypatch, REDIS_URL="redis://127.0.0.1:6379/0")
    visibility = s["CELERY_BROKER_TRANSPORT_OPTIONS"]["visibility_timeout"]
    assert s["CELERY_TASK_SOFT_TIME_LIMIT"] < s["CELERY_TASK_TIME_LIMIT"] < visibility
    assert s["CELERY_WORKER_PREFETCH_MULTIPLIER"] == 1
    assert s["CELERY_TASK_SERIALIZER"] == "json" and s["CELERY_ACCEPT_CONTENT"] == ["json"]


def test_misordered_celery_time_limits_fail_at_start(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="must be ordered"):
        load(monkeypatch, CELERY_TASK_TIME_LIMIT="4000", CELERY_BROKER_VISIBILITY_TIMEOUT="3600")


def test_the_celery_app_declares_both_queues_and_routes_tasks():
    from config.celery import app

    app.loader.import_default_modules()  # what a worker does at start: autodiscovery
    assert {q.name for q in app.conf.task_queues} == {"diagnosis", "maintenance"}
    assert app.conf.task_routes["diagnosis.tasks.execute_run"] == {"queue": "diagnosis"}
    assert app.conf.task_routes["diagnosis.tasks.reap_stale_runs"] == {"queue": "maintenance"}
    assert {"diagnosis.tasks.execute_run", "diagnosis.tasks.reap_stale_runs"} <= set(app.tasks)
    assert "diagnosis.tasks.ping" not in app.tasks  # the worker probe is test support (tests/support/probe.py)


def test_env_helpers_reject_bad_values_with_the_variable_name():
    with pytest.raises(ImproperlyConfigured, match="X_INT"):
        env.env_int("X_INT", 1, environ={"X_INT": "1.5"})
    with pytest.raises(ImproperlyConfigured, match="X_CHOICE"):
        env.env_choice("X_CHOICE", "a", ("a", "b"), environ={"X_CHOICE": "c"})
    assert env.env_int("X_INT", 7, environ={"X_INT": "  "}) == 7


def _manage(args, extra_env):
    environ = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("DATABASE_", "REDIS_", "DJANGO_"))}
    environ.update(extra_env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


def test_a_malformed_value_stops_start_up_with_a_clear_message():
    result = _manage(["check"], {"DATABASE_URL": "postgres://u@h/db", "DJANGO_DEBUG": "true"})
    assert result.returncode != 0
    assert "ImproperlyConfigured: DATABASE_URL scheme postgres:// is not supported" in result.stderr


def test_the_deploy_check_passes_with_production_variables():
    result = _manage(
        ["check", "--deploy", "--fail-level", "WARNING"],
        {**PROD, "DATABASE_URL": "mysql://root@127.0.0.1:3306/aiops", "REDIS_URL": "redis://127.0.0.1:6379/0"},
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_the_lease_default_outlasts_one_model_calls_worst_case(monkeypatch):
    s = load(monkeypatch)
    assert s["LLM_CALL_WORST_SECONDS"] == 3 * (5 + 60) + 2 * 2  # 3 attempts x (connect + read) + 2 capped backoffs
    assert s["RUN_LEASE_SECONDS"] >= s["LLM_CALL_WORST_SECONDS"]
    slow = load(monkeypatch, LLM_READ_TIMEOUT="300")
    assert slow["RUN_LEASE_SECONDS"] >= slow["LLM_CALL_WORST_SECONDS"] == 3 * 305 + 4
    assert s["RUN_REAPER_INTERVAL_SECONDS"] <= s["RUN_LEASE_SECONDS"] / 3


def test_a_lease_shorter_than_one_model_call_is_refused_at_start_up(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match=r"RUN_LEASE_SECONDS=120 is shorter than one model call's worst case, 199s"):
        load(monkeypatch, RUN_LEASE_SECONDS="120")
    assert load(monkeypatch, RUN_LEASE_SECONDS="10", LLM_CONNECT_TIMEOUT="1", LLM_READ_TIMEOUT="8",
                LLM_MAX_RETRIES="0")["RUN_LEASE_SECONDS"] == 10
