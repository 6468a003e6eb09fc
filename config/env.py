"""Strict parsers for environment variables: a bad value fails start-up naming the variable."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off"})
DATABASE_SCHEMES = ("mysql", "sqlite")
REDIS_SCHEMES = ("redis", "rediss")


def _raw(name: str, environ: dict | None) -> str | None:
    value = (os.environ if environ is None else environ).get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str | None = None, *, environ: dict | None = None) -> str | None:
    value = _raw(name, environ)
    return default if value is None else value


def env_bool(name: str, default: bool, *, environ: dict | None = None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    word = value.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean; use one of: true, false (also 1/0, yes/no, on/off)."
    )


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None,
    environ: dict | None = None,
) -> int:
    return _env_number(name, default, int, "an integer", minimum, maximum, environ)


def env_float(
    name: str, default: float, *, minimum: float | None = None, maximum: float | None = None,
    environ: dict | None = None,
) -> float:
    return _env_number(name, default, float, "a number", minimum, maximum, environ)


def _env_number(name, default, kind: type, what: str, minimum, maximum, environ):
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        number = kind(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not {what}.") from None
    if number != number or number in (float("inf"), float("-inf")):  # NaN or infinite (a float only)
        raise ImproperlyConfigured(f"{name}={value!r} must be a finite number.")
    _check_range(name, number, minimum, maximum)
    return number


def _check_range(name, number, minimum, maximum) -> None:
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum {minimum}.")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above the maximum {maximum}.")


def env_choice(name: str, default: str, choices: tuple[str, ...], *, environ: dict | None = None) -> str:
    value = _raw(name, environ)
    if value is None:
        return default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not supported; use one of: {', '.join(choices)}.")
    return value


def env_list(name: str, default: list[str], *, environ: dict | None = None) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(f"{name}={value!r} has an empty entry; use a comma-separated list.")
    return items


def env_prices(name: str, default: dict[str, tuple[float, float]], *,
               environ: dict | None = None) -> dict[str, tuple[float, float]]:
    """'model=prompt:completion,…' (USD per million tokens) → {model: (prompt, completion)}."""
    value = _raw(name, environ)
    if value is None:
        return dict(default)
    prices = {}
    for item in value.split(","):
        model, sep, pair = item.strip().partition("=")
        prompt, colon, completion = pair.partition(":")
        try:
            parsed = (float(prompt), float(completion))
        except ValueError:
            parsed = None
        if not model.strip() or not sep or not colon or parsed is None or min(parsed) < 0:
            raise ImproperlyConfigured(f"{name} entry {item.strip()!r} is not model=prompt:completion "
                                       "(USD per million tokens, e.g. gpt-4o-mini=0.15:0.6).")
        prices[model.strip()] = parsed
    return prices


def env_subset(name: str, default: list[str], choices: tuple[str, ...], *, environ: dict | None = None) -> list[str]:
    """A comma-separated list whose every entry is one of ``choices`` (no repeats)."""
    items = env_list(name, default, environ=environ)
    unknown = [item for item in items if item not in choices]
    if unknown:
        raise ImproperlyConfigured(
            f"{name} has {', '.join(repr(u) for u in unknown)}, which is not supported; use any of: {', '.join(choices)}."
        )
    if len(set(items)) != len(items):
        raise ImproperlyConfigured(f"{name}={','.join(items)!r} names an entry twice.")
    return items


def env_url(name: str, default: str | None, *, schemes: tuple[str, ...] = ("http", "https"),
            environ: dict | None = None) -> str | None:
    value = _raw(name, environ)
    if value is None:
        return default
    parts = urlsplit(value)
    if parts.scheme not in schemes or not parts.netloc:
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a valid URL; it must start with {' or '.join(s + '://' for s in schemes)} "
            "and name a host."
        )
    return value.rstrip("/")


def parse_database_url(value: str, *, name: str = "DATABASE_URL", base_dir=None) -> dict:
    """Turn `mysql://user:pass@host:port/name` or `sqlite:///path` into a Django DATABASES entry."""
    parts = urlsplit(value)
    if parts.scheme not in DATABASE_SCHEMES:
        raise ImproperlyConfigured(
            f"{name} scheme {parts.scheme + '://' if parts.scheme else '(none)'} is not supported; "
            f"supported schemes: mysql://user:pass@host:port/name, sqlite:///path/to/file.sqlite3."
        )
    if parts.scheme == "sqlite":
        path = unquote(parts.path)
        if parts.netloc or not path or path == "/":
            raise ImproperlyConfigured(
                f"{name}={value!r} is not a valid SQLite URL; use sqlite:///relative/path or sqlite:////absolute/path."
            )
        path = path[1:]  # sqlite:///var/db.sqlite3 -> var/db.sqlite3 ; sqlite:////tmp/x -> /tmp/x
        if base_dir is not None and not path.startswith("/") and path != ":memory:":
            path = str(base_dir / path)
        return {
            "ENGINE": "django.db.backends.sqlite3", "NAME": path,
            # WAL lets readers run beside the writer; IMMEDIATE takes the write lock up front so
            # concurrent requests queue on `timeout` instead of failing with "database is locked".
            "OPTIONS": {
                "timeout": 20, "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
            },
        }

    database = unquote(parts.path.lstrip("/"))
    if not parts.hostname or not database or "/" in database:
        raise ImproperlyConfigured(
            f"{name} must name a host and a database: mysql://user:pass@host:port/name."
        )
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"{name} has an invalid port; use a number such as 3306.") from None
    options = {
        "charset": "utf8mb4",
        # Strict mode: MySQL rejects truncation and bad values instead of silently mangling them.
        "init_command": "SET sql_mode='STRICT_TRANS_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO'",
        "isolation_level": "read committed",
    }
    for key, item in parse_qsl(parts.query):
        if key not in ("ssl_mode", "connect_timeout"):
            raise ImproperlyConfigured(f"{name} query parameter {key!r} is not supported; use ssl_mode or connect_timeout.")
        options[key] = int(item) if key == "connect_timeout" and item.isdigit() else item
    return {
        "ENGINE": "django.db.backends.mysql",
        "NAME": database,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname,
        "PORT": str(port or 3306),
        "OPTIONS": options,
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"},
    }


def parse_redis_url(value: str, *, name: str = "REDIS_URL") -> str:
    parts = urlsplit(value)
    if parts.scheme not in REDIS_SCHEMES or not parts.hostname:
        raise ImproperlyConfigured(
            f"{name}={value!r} is not supported; use redis://host:port/db or rediss://host:port/db."
        )
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ImproperlyConfigured(f"{name} database {db!r} must be a number, e.g. redis://127.0.0.1:6379/0.")
    try:
        parts.port
    except ValueError:
        raise ImproperlyConfigured(f"{name} has an invalid port; use a number such as 6379.") from None
    return value
