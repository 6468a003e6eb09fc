"""The fake OpenAI server's own scripting rules, checked with the bare `openai` client."""
from __future__ import annotations

import openai
import pytest

from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.fixtures import FAKE_API_KEY


def client_for(server: FakeOpenAI) -> openai.OpenAI:
    return openai.OpenAI(api_key=FAKE_API_KEY, base_url=server.base_url, max_retries=0,
                         timeout=openai.Timeout(5.0, connect=1.0))


def chat(client: openai.OpenAI, role: str | None, text: str = "hi", model: str = "m"):
    messages = [{"role": "user", "content": text}]
    if role:
        messages.insert(0, {"role": "system", "content": f"<!-- prompt: {role} v2 -->\nYou are the {role}."})
    return client.chat.completions.create(model=model, messages=messages)


def test_role_queues_win_over_the_shared_queue(fake_openai):
    fake_openai.enqueue(Reply.text("shared"))
    fake_openai.enqueue(Reply.text("for the verifier"), role="verifier")
    client = client_for(fake_openai)

    assert chat(client, "verifier").choices[0].message.content == "for the verifier"
    assert chat(client, "verifier").choices[0].message.content == "shared"
    assert [request.role for request in fake_openai.requests] == ["verifier", "verifier"]
    fake_openai.assert_all_consumed()


def test_a_request_without_a_marker_gets_its_role_from_the_model_name():
    with FakeOpenAI(model_roles={"planner-model": "planner"}) as server:
        server.enqueue(Reply.text("planned"), role="planner")

        reply = chat(client_for(server), None, model="planner-model")

        assert reply.choices[0].message.content == "planned"
        assert server.requests[0].role == "planner"


def test_always_answers_every_request_and_can_read_it(fake_openai):
    fake_openai.always(lambda request: Reply.text(f"echo: {request.last_user_message}"))
    client = client_for(fake_openai)

    assert chat(client, "simple", "one").choices[0].message.content == "echo: one"
    assert chat(client, "planner", "two").choices[0].message.content == "echo: two"


def test_an_unscripted_request_fails_loudly_without_inviting_a_retry(fake_openai):
    with pytest.raises(openai.APIStatusError, match="nothing scripted") as caught:
        chat(client_for(fake_openai), "composer")

    assert caught.value.status_code == 418


def test_a_broken_responder_is_reported_not_retried(fake_openai):
    fake_openai.always(lambda request: 1 / 0)

    with pytest.raises(openai.APIStatusError, match="ZeroDivisionError"):
        chat(client_for(fake_openai), "simple")

    assert isinstance(fake_openai.responder_errors[0], ZeroDivisionError)


def test_error_replies_carry_the_openai_error_body(fake_openai):
    fake_openai.enqueue(Reply.error(429, "slow down", retry_after=1))

    with pytest.raises(openai.RateLimitError) as caught:
        chat(client_for(fake_openai), None)

    assert caught.value.body == {"message": "slow down", "type": "rate_limit_error", "param": None,
                                 "code": "rate_limit_exceeded"}
    assert caught.value.response.headers["retry-after"] == "1"


def test_pending_counts_unused_replies(fake_openai):
    fake_openai.enqueue(Reply.text("a"), Reply.text("b"))
    fake_openai.enqueue(Reply.text("c"), role="planner")

    chat(client_for(fake_openai), None)

    assert (fake_openai.pending(), fake_openai.pending("planner")) == (1, 1)
    with pytest.raises(AssertionError, match="never requested"):
        fake_openai.assert_all_consumed()


@pytest.mark.timeout(20)
def test_closing_the_server_cuts_a_stall_short():
    server = FakeOpenAI().start()
    server.always(Reply.stall(30))
    client = openai.OpenAI(api_key=FAKE_API_KEY, base_url=server.base_url, max_retries=0,
                           timeout=openai.Timeout(0.3, connect=1.0))

    with pytest.raises(openai.APITimeoutError):
        chat(client, None)
    server.close()

    assert server.requests and server.requests[0].body["model"] == "m"
