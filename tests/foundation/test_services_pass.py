"""Real MySQL and a real Celery worker on Redis (the services pass of .ci/run)."""

from __future__ import annotations

import time
import uuid

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction

from diagnosis.models import DiagnosisRun, MaintenanceLock
from tests.factories import DiagnosisRunFactory
from tests.support.probe import PROBE_QUEUE, ping
from tests.support.worker import celery_worker

pytestmark = pytest.mark.services


@pytest.mark.django_db
def test_the_connection_speaks_utf8mb4_in_strict_mode():
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@character_set_connection, @@sql_mode")
        charset, sql_mode = cursor.fetchone()
    assert charset == "utf8mb4"
    assert "STRICT_TRANS_TABLES" in sql_mode


@pytest.mark.django_db
def test_a_four_byte_question_and_nested_json_round_trip_on_mysql():
    question = "为什么 payment-service 一直报错？🔥🚨 𠜎 (4-byte CJK ext-B)"
    evaluation = {"rule_evaluation": {"claims": [{"id": "c1", "nested": {"deep": [1, 2.5, None, True, "连接池"]}}]}, "emoji": "✅🧯"}
    run = DiagnosisRunFactory(question=question, self_evaluation=evaluation)
    fresh = DiagnosisRun.objects.get(pk=run.pk)
    assert fresh.question == question
    assert fresh.self_evaluation == evaluation
    with connection.cursor() as cursor:
        cursor.execute("SELECT question FROM diagnosis_run WHERE id = %s", [run.pk])
        assert cursor.fetchone()[0] == question


@pytest.mark.django_db
def test_strict_mode_rejects_an_oversized_value_instead_of_truncating():
    from django.db import DataError

    run = DiagnosisRunFactory()
    with pytest.raises(DataError), transaction.atomic():
        DiagnosisRun.objects.filter(pk=run.pk).update(error_code="x" * 200)


def _queue_length(name: str) -> int:
    return redis.Redis.from_url(settings.REDIS_URL).llen(name)


@pytest.mark.django_db(transaction=True)
def test_a_task_enqueued_on_commit_is_executed_by_a_real_worker_and_writes_to_mysql():
    committed, rolled_back = f"commit-{uuid.uuid4().hex}", f"rollback-{uuid.uuid4().hex}"
    with celery_worker(name="foundation", include="tests.support.probe", queues=PROBE_QUEUE):
        with transaction.atomic():
            ping.delay_on_commit(committed)
            assert _queue_length(PROBE_QUEUE) == 0, "nothing may be sent before the commit"
        try:
            with transaction.atomic():
                ping.delay_on_commit(rolled_back)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        deadline = time.monotonic() + 30
        while not MaintenanceLock.objects.filter(name=committed).exists():
            assert time.monotonic() < deadline, "the worker never wrote the probe row"
            time.sleep(0.2)
        time.sleep(1)
    probe = MaintenanceLock.objects.get(name=committed)
    assert probe.holder
    assert not MaintenanceLock.objects.filter(name=rolled_back).exists()
