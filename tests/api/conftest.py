from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.diagnosis.conftest import demo_knowledge, fake_openai, make_run, openai_llm  # noqa: F401


@pytest.fixture(autouse=True)
def run_executor(request):
    """Embedded pass: tasks run eagerly. Services pass: a real worker process executes them."""
    from tests.conftest import services_available

    if services_available() and "eager_tasks" not in request.fixturenames:
        request.getfixturevalue("live_worker")


def token_client(user) -> APIClient:
    from rest_framework.authtoken.models import Token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def alice_api(alice, live_api_for):
    return live_api_for(alice)  # the production server in the services pass for tests marked production_server


@pytest.fixture
def bob_api(bob, live_api_for):
    return live_api_for(bob)


@pytest.fixture
def support_api(support_user, live_api_for):
    from django.contrib.auth.models import Group

    # Transactional tests flush the groups the roles migration created: recreate the membership.
    support_user.groups.add(Group.objects.get_or_create(name="support_staff")[0])
    return live_api_for(support_user)


def sse_events(response) -> list[dict]:
    """Parse a text/event-stream response into [{id, event, data}]."""
    import json

    text = b"".join(response.streaming_content).decode()
    events = []
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line.startswith(":") or ": " not in line:
                continue
            key, value = line.split(": ", 1)
            fields[key] = value
        if "event" in fields:
            events.append({"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])})
    return events
