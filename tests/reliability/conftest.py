"""Fixtures of the reliability suite: demo knowledge, runs on database rows, a scripted model, and a
Celery app whose broker can be pointed at a closed port for a while."""

from __future__ import annotations

import socket
from contextlib import contextmanager

import pytest

from tests.diagnosis.conftest import demo_knowledge, fake_openai, make_run, openai_llm  # noqa: F401


def closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released): connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def broker_at(url: str):
    """Publish tasks for real (not eagerly) to `url` until the block ends, then restore the app."""
    from kombu import pools

    from tests.support.celery_conf import celery_conf

    with celery_conf(broker_url=url, task_always_eager=False) as app:
        app._pool = app.amqp._producer_pool = None  # the pools were built for the previous URL
        try:
            yield app
        finally:
            # Pools built for the dead URL must not outlive the block: even eager tasks acquire a producer.
            if app._pool is not None:
                app._pool.force_close_all()
            app._pool = app.amqp._producer_pool = None
            pools.reset()


@pytest.fixture
def dead_broker(settings):
    """The task queue is a closed port: publishing fails within the publish retry policy."""
    url = f"redis://127.0.0.1:{closed_port()}/0"
    settings.CELERY_TASK_ALWAYS_EAGER = False
    with broker_at(url):
        yield url


@pytest.fixture(autouse=True)
def _tasks_go_to_the_broker(request):
    """Services tests publish for real, whatever an earlier test of the session left in the app's
    eager flag (tests/api/test_chat.py::test_wait_false_answers_202_with_links sets it back to True)."""
    if "services" not in request.keywords:
        yield
        return
    from tests.support.celery_conf import celery_conf

    with celery_conf(task_always_eager=False):
        yield
