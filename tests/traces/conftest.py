"""Fixtures of the traces API tests: role members, clients and finished runs with a trace."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from diagnosis.models import AgentStep, DiagnosisRun, ToolInvocation
from tests.factories import ChatSessionFactory, DiagnosisRunFactory, UserFactory

ORCHESTRATION_TRACE = {
    "version": "stategraph-v1",
    "transitions": [{"from": "planner", "to": "executor", "reason_code": "plan_ready", "attempt": 1}],
    "final_node": "composer",
    "termination_reason": "completed",
    "degraded": False,
    "evidence_retry_count": 0,
}


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def support_staff(support_user):
    """Charlie, in the support_staff group the roles migration created."""
    support_user.groups.add(Group.objects.get(name="support_staff"))
    return support_user


@pytest.fixture
def auditor(db):
    user = UserFactory(username="dana")
    user.groups.add(Group.objects.get(name="auditor"))
    return user


# One claim that passed the Gatekeeper: what a case keeps of a useful run.
VERIFIED_CLAIM = {"claim_id": "c1", "statement": "payment-service exhausts its DB connection pool.",
                  "evidence": [{"source_invocation_id": "inv-00000000", "tool_name": "query_logs",
                                "raw_path": "$.records[0].message",
                                "evidence_excerpt": "HikariPool-1 - Connection is not available"}]}
VERIFIED_EVALUATION = {"verifier_evaluation": {"verified_executor_output": {"claims": [VERIFIED_CLAIM]}}}


def make_run(*, owner, session=None, status=DiagnosisRun.Status.SUCCESS, steps=0, **fields) -> DiagnosisRun:
    """A run of `owner` with `steps` steps, each step calling one tool."""
    session = session or ChatSessionFactory(owner=owner)
    defaults = {"answer": "payment-service exhausts its DB pool.", "orchestration_trace": ORCHESTRATION_TRACE,
                "self_evaluation": VERIFIED_EVALUATION}
    run = DiagnosisRunFactory(session=session, status=status, **{**defaults, **fields})
    AgentStep.objects.bulk_create(
        AgentStep(run=run, session_id=session.session_id, step_index=i, node="executor", agent="executor",
                  model_input=[{"role": "user", "content": f"step {i}"}], model_output={"n": i},
                  status=AgentStep.Status.COMPLETED)
        for i in range(steps)
    )
    # Re-read: MySQL does not return primary keys from bulk_create.
    created = AgentStep.objects.filter(run=run).order_by("step_index")
    ToolInvocation.objects.bulk_create(
        ToolInvocation(run=run, session_id=session.session_id, step=step, invocation_id=f"inv-{i:08x}",
                       tool_name="query_logs", arguments={"service": "payment-service"},
                       status=ToolInvocation.Status.SUCCESS, result={"records": [i]})
        for i, step in enumerate(created)
    )
    return run


@pytest.fixture
def alice_run(alice):
    return make_run(owner=alice, steps=2)
