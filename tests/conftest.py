"""Shared fixtures: the three users of every permission test, and the services-pass guard."""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from hypothesis import settings as hypothesis_settings

# Hypothesis: the suite (and CI) is reproducible: derandomised, no example database, no deadline.
# `HYPOTHESIS_PROFILE=explore` (`make test-explore`) is the longer randomised search for developers;
# per-test example counts are multiplied by `tests.support.hypo.examples`.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
hypothesis_settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


REQUIRE_SERVICES = os.environ.get("AIOPS_REQUIRE_SERVICES") == "1"


def services_available() -> bool:
    if not settings.configured:
        return False
    return settings.DATABASES["default"]["ENGINE"].endswith("mysql") and bool(settings.REDIS_URL)


def services_missing(*, database: dict | None = None, redis_url: str | None = None) -> str | None:
    """What keeps the services pass from running here (each service not configured or not answering,
    joined by "; "), or None. Reads the settings unless given a DATABASES entry and a Redis URL.

    Probed without Django's connection (pytest-django blocks it outside tests) and with short timeouts,
    so a dead MariaDB or Redis reads as one clear failure, not a hang or a traceback per test."""
    if not settings.configured:
        return "Django settings are not configured"
    import MySQLdb
    import redis

    missing = []
    if database is None:
        database, redis_url = settings.DATABASES["default"], settings.REDIS_URL
    host, port = database.get("HOST") or "127.0.0.1", int(database.get("PORT") or 3306)
    if not database["ENGINE"].endswith("mysql"):
        missing.append(f"DATABASE_URL must be mysql://… (the services pass runs on MariaDB), got {database['ENGINE']}")
    else:
        try:
            MySQLdb.connect(host=host, port=port, user=database.get("USER") or "",
                            password=database.get("PASSWORD") or "", connect_timeout=5).close()
        except MySQLdb.Error as error:
            missing.append(f"MariaDB at {host}:{port} does not answer: {error}")
    if not redis_url:
        missing.append("REDIS_URL is not set (the services pass runs Celery and the cache on Redis)")
    else:
        try:
            redis.Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=5).ping()
        except redis.RedisError as error:
            missing.append(f"Redis at {redis_url} does not answer: {error}")
    return "; ".join(missing) or None


_MISSING: list[str | None] = []


def _services_missing_once() -> str | None:
    if not _MISSING:
        _MISSING.append(services_missing())
    return _MISSING[0]


def pytest_collection_modifyitems(config, items):
    """Outside the services pass, tests that need MariaDB and Redis are skipped when those are not
    configured. In the services pass they never are: see `pytest_runtest_setup`."""
    if REQUIRE_SERVICES or services_available():
        return
    reason = "needs DATABASE_URL=mysql://… and REDIS_URL (the services pass of .ci/run)"
    for item in items:
        if "services" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The services pass (AIOPS_REQUIRE_SERVICES=1) never turns a missing service into a skip or an
    xfail: each test fails before its fixtures run, naming the service that is missing, so a broken
    MariaDB or Redis cannot read as green."""
    if REQUIRE_SERVICES:
        missing = _services_missing_once()
        if missing:
            pytest.fail(f"the services pass needs MariaDB and Redis: {missing}", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _fresh_redis_db():
    """The services pass owns its Redis database: start it empty so no stale task is consumed."""
    if settings.configured and settings.REDIS_URL:
        import redis

        redis.Redis.from_url(settings.REDIS_URL).flushdb()
    yield


@pytest.fixture
def alice(db):
    from tests.factories import UserFactory

    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    from tests.factories import UserFactory

    return UserFactory(username="bob")


@pytest.fixture
def support_user(db):
    from tests.factories import UserFactory

    return UserFactory(username="charlie", is_staff=True)


@pytest.fixture(scope="session")
def metrics_multiproc_dir(tmp_path_factory):
    """The session worker and the production server share it: /metrics aggregates both."""
    return tmp_path_factory.mktemp("prometheus-multiproc")


@pytest.fixture(scope="session")
def live_worker(django_db_setup, django_db_blocker, metrics_multiproc_dir):
    """One real Celery worker process for the session, against the test database and Redis."""
    from tests.support.worker import celery_worker

    with django_db_blocker.unblock(), celery_worker(
            name="session", concurrency=2, extra_env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_multiproc_dir)}) as proc:
        yield proc


STACK_METRICS_TOKEN = "stack-metrics-token-0123456789"
STACK_MAX_STREAMS = 3


@pytest.fixture(scope="session")
def production_stack(live_worker, metrics_multiproc_dir, tmp_path_factory):
    """Services pass: the production processes on the test database and Redis — gunicorn with uvicorn
    workers (config/gunicorn.py), the session's Celery worker and celery beat. Yields the web process
    (`.base_url`)."""
    from tests.support.server import beat_process, production_server
    from tests.support.worker import worker_env

    workdir = tmp_path_factory.mktemp("stack")
    env = worker_env(PROMETHEUS_MULTIPROC_DIR=str(metrics_multiproc_dir), METRICS_TOKEN=STACK_METRICS_TOKEN,
                     SSE_MAX_STREAMS_PER_USER=str(STACK_MAX_STREAMS), SSE_HEARTBEAT_SECONDS="0.5",
                     STATIC_ROOT=str(workdir / "static"))
    with production_server(env=env, workers=2, log_path=workdir / "web.log") as web, \
            beat_process(env=env, workdir=workdir):
        yield web


@pytest.fixture
def live_api_for(request):
    """`live_api_for(user)`: in the services pass, for tests marked `production_server`, a client of the
    production server (gunicorn + worker + beat); otherwise the in-process DRF test client."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    def make(user):
        token = Token.objects.get_or_create(user=user)[0].key if user is not None else None
        if services_available() and request.node.get_closest_marker("production_server"):
            from tests.support.server import LiveApiClient

            return LiveApiClient(request.getfixturevalue("production_stack").base_url, token)
        client = APIClient()
        if token:
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return client

    return make


@pytest.fixture
def eager_tasks(settings):
    """Run tasks in-process for this test: needed when a test changes settings a worker cannot see."""
    from tests.support.celery_conf import celery_conf

    settings.CELERY_TASK_ALWAYS_EAGER = True
    with celery_conf(task_always_eager=True):
        yield


@pytest.fixture(autouse=True)
def _clear_cache():
    """Throttle counters and session memory live in the cache: each test starts with none."""
    from django.core.cache import cache

    if not settings.configured:
        yield
        return
    if settings.REDIS_URL:
        # Never FLUSHDB here: the same Redis database holds the Celery queues and their bindings.
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL)
        for key in client.scan_iter(f"{settings.CACHES['default']['KEY_PREFIX']}:*"):
            client.delete(key)
    else:
        cache.clear()
    yield
