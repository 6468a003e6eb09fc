"""Session memory with its cache (Redis) away: a miss served from the database, never an error that fails
the run (a Redis restart under load must not FAIL the runs executing at that moment)."""

from __future__ import annotations

import pytest

from diagnosis.models import DiagnosisRun
from diagnosis.services import memory
from tests.factories import DiagnosisRunFactory
from tests.reliability.conftest import closed_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def cache_away(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{closed_port()}/0",
                                   "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}}


def test_with_the_cache_away_memory_is_read_from_the_database(make_run, cache_away):
    earlier = make_run("What failed yesterday?", status=DiagnosisRun.Status.SUCCESS, answer="The payment pool.")
    later = DiagnosisRunFactory(session=earlier.session, question="And today?")
    turns = memory.memory_turns(session=earlier.session)
    assert [t["question"] for t in turns] == ["What failed yesterday?"]  # the SUCCESS turns, from the database
    memory.memory_append(session=earlier.session, run=later)  # writes the database, skips the cache
    messages = memory.memory_messages(session=earlier.session, before=later)
    assert {"role": "assistant", "content": "The payment pool."} in messages
