"""Replaying a recorded run on its recorded evidence: determinism, misses, and the copies' pointers."""

from __future__ import annotations

import pytest

from diagnosis.demo.loader import shipped_scenarios
from diagnosis.models import DiagnosisRun, ToolInvocation
from diagnosis.services.replay import ReplayNotFound, ReplayOptions, replay_submit
from diagnosis.tools.recorded import NOT_IN_RECORDING, RECORDED

pytestmark = pytest.mark.django_db(transaction=True)
SCENARIOS = [d.name for d in shipped_scenarios()]


def claims(run: DiagnosisRun) -> tuple[list, list]:
    audit = (((run.self_evaluation or {}).get("verifier_evaluation") or {}).get("gatekeeper_audit") or {}).get("audit") or []
    verified = [c["statement"] for c in audit if c.get("verified") is True]
    rejected = [c["statement"] for c in audit if c.get("verified") is not True]
    return verified, rejected


def replay(user, run, options=None, *, capture) -> DiagnosisRun:
    with capture(execute=True):
        new = replay_submit(user=user, run_id=run.run_id, options=options)
    new.refresh_from_db()
    return new


@pytest.mark.parametrize("name", SCENARIOS)
def test_replaying_with_the_same_offline_model_reproduces_claims_verdict_and_answer(
        name, alice, recorded, eager_tasks, django_capture_on_commit_callbacks):
    original = recorded(name)
    assert original.status == "SUCCESS" and original.tool_count > 0
    again = replay(alice, original, ReplayOptions(model="offline"), capture=django_capture_on_commit_callbacks)

    assert again.status == "SUCCESS", again.error_message
    assert again.replay_of_id == original.pk
    assert claims(again) == claims(original) and claims(again)[0]
    assert again.effective_verdict == original.effective_verdict
    assert again.answer == original.answer
    assert again.prompt_version == original.prompt_version
    copies = list(again.tool_invocations.order_by("id"))
    sources = list(original.tool_invocations.order_by("id"))
    assert [(c.tool_name, c.arguments, c.result, c.invocation_id) for c in copies] == \
           [(s.tool_name, s.arguments, s.result, s.invocation_id) for s in sources]
    assert all(c.replay_mode == RECORDED for c in copies)
    assert [c.source_invocation_id for c in copies] == [s.pk for s in sources]


def test_a_call_the_original_never_made_is_not_served_live(alice, recorded):
    from diagnosis.services.replay import InvocationsRecording
    from diagnosis.tools.backends.base import BackendError
    from diagnosis.tools.recorded import RecordedBackend

    original = recorded("payment-db-pool-exhaustion")
    backend = RecordedBackend(InvocationsRecording(original).recorded_calls())
    first = original.tool_invocations.filter(tool_name="query_logs", status="SUCCESS").first()
    assert backend.query_logs(**first.arguments) == first.result
    assert backend.take_served().source.pk == first.pk
    with pytest.raises(BackendError, match="not_in_recording"):
        backend.query_logs(service="no-such-service-anywhere")
    assert backend.take_served().mode == NOT_IN_RECORDING


def test_another_users_run_cannot_be_replayed(alice, bob, recorded):
    original = recorded("inventory-disk-full")
    with pytest.raises(ReplayNotFound):
        replay_submit(user=bob, run_id=original.run_id)
    assert not DiagnosisRun.objects.filter(replay_of=original).exists()
    assert not ToolInvocation.objects.exclude(run=original).exists()


def test_a_replay_whose_recorded_run_was_purged_fails_instead_of_running_live(alice, recorded):
    from diagnosis.services.execution import run_execute

    original = recorded("inventory-disk-full")
    replay = DiagnosisRun.objects.create(session=original.session, question=original.question, replay_of=original,
                                         replay_options=ReplayOptions(model="offline").to_dict())
    original.delete()
    replay = run_execute(run_id=replay.run_id)
    assert replay.status == "FAILED" and replay.error_code == "replay_source_missing"
    assert not replay.tool_invocations.exists()
