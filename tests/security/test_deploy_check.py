"""`manage.py check --deploy --fail-level WARNING` with the full production configuration: MySQL,
Redis, an OpenAI-compatible model and Prometheus + Loki backends. It is clean, and it does fail
when a production safeguard is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "r8Vw2-production-only-4kq9Lm7nB3xZ0pT6yH1sD5fG8jK2cV9bN4mQ7wE3rT6y",
    "ALLOWED_HOSTS": "aiops.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://aiops.example.com",
    "DATABASE_URL": "mysql://aiops:db-password@db.internal:3306/aiops",
    "REDIS_URL": "redis://redis.internal:6379/0",
    "LLM_PROVIDER": "openai",
    "OPENAI_API_KEY": "sk-prod-0123456789abcdefghijklmnopqrstuv",
    "OPENAI_BASE_URL": "https://llm.internal/v1",
    "OPENAI_MODEL": "gpt-4o-mini",
    "METRICS_BACKEND": "prometheus",
    "PROMETHEUS_URL": "http://prometheus.internal:9090",
    "LOGS_BACKEND": "loki",
    "LOKI_URL": "http://loki.internal:3100",
    "LOKI_TENANT": "payments",
}
PREFIXES = ("DJANGO_", "DATABASE_", "REDIS_", "OPENAI_", "LLM_", "CELERY_", "CHAT_", "DIAGNOSIS_", "METRICS_", "LOGS_",
            "PROMETHEUS_", "LOKI_", "SECURE_", "BEHIND_")


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(PREFIXES) and k not in ("ALLOWED_HOSTS",
                                                                                              "CSRF_TRUSTED_ORIGINS")}
    environ.update(env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=120)


def test_the_deploy_check_is_clean_with_the_full_production_configuration():
    result = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "System check identified no issues" in result.stdout
    print(f"\ndeploy check: {result.stdout.strip()}")


def test_production_settings_hold_the_hardening_the_check_looks_for():
    code = ("from django.conf import settings as s; print(s.DEBUG, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, "
            "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.LLM_PROVIDER, s.METRICS_BACKEND, s.LOGS_BACKEND, "
            "s.CELERY_TASK_ALWAYS_EAGER, s.DATABASES['default']['ENGINE'])")
    result = manage("shell", "-c", code, **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].split() == ["False", "True", "31536000", "True", "True", "openai", "prometheus", "loki",
                                     "False", "django.db.backends.mysql"]


@pytest.mark.parametrize("override, warning", [
    ({"DJANGO_DEBUG": "true"}, "security.W018"),
    ({"SECURE_SSL_REDIRECT": "False"}, "security.W008"),
    ({"SECURE_HSTS_SECONDS": "0"}, "security.W004"),
    ({"DJANGO_SECRET_KEY": "short"}, "security.W009"),
])
def test_the_deploy_check_fails_when_a_safeguard_is_missing(override, warning):
    result = manage("check", "--deploy", "--fail-level", "WARNING", **{**PRODUCTION, **override})
    assert result.returncode != 0
    assert warning in result.stderr + result.stdout


def test_the_production_process_does_not_leak_the_model_key_in_its_error_output():
    result = manage("check", "--deploy", "--fail-level", "WARNING", **{**PRODUCTION, "LOKI_URL": "not a url"})
    assert result.returncode != 0
    assert "LOKI_URL" in result.stderr
    assert PRODUCTION["OPENAI_API_KEY"] not in result.stderr + result.stdout
    assert "db-password" not in result.stderr + result.stdout
