"""One user's rating never puts her words or her run into another user's run.

A useful rating makes a candidate case holding only verified claims; nobody retrieves it until
support staff publish it, and even then the case carries no question text. Checked on what the
other user can read: his run, his trace (every step, invocation and evaluation), and the case row.
"""

from __future__ import annotations

import json

import pytest

from diagnosis.models import CaseLibraryEntry, ToolInvocation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.production_server]

CANARY = "ticket QX7-CANARY-9182 from alice"


def chat(api, question: str, session: str) -> dict:
    response = api.post("/api/chat", {"question": question, "sessionId": session, "mode": "diagnosis"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "SUCCESS", body
    return body


def what_bob_sees(bob_api, run: dict, session: str) -> str:
    trace = bob_api.get(f"/api/diagnosis/{session}/trace?runId={run['runId']}")
    assert trace.status_code == 200, trace.content
    detail = bob_api.get(f"/api/runs/{run['runId']}")
    assert detail.status_code == 200, detail.content
    return json.dumps([trace.json(), detail.json()], ensure_ascii=False)


def test_a_rated_run_reaches_no_other_user_before_publishing_and_never_with_its_question(
        alice_api, bob_api, support_api, demo_knowledge):
    alice_run = chat(alice_api, f"Why is payment-service failing? {CANARY}", "privacy-a")
    rated = alice_api.post("/api/feedback", {"sessionId": "privacy-a", "runId": alice_run["runId"], "feedback": "useful",
                                             "comment": f"great answer {CANARY}"}, format="json")
    assert rated.status_code == 200, rated.content
    case = CaseLibraryEntry.objects.get(run__run_id=alice_run["runId"])
    assert CANARY not in json.dumps([case.question, case.answer, case.root_cause_summary, case.claims], ensure_ascii=False, default=str)

    # A candidate: bob's run retrieves nothing of it.
    before = chat(bob_api, "payment-service is failing again, why?", "privacy-b")
    seen = what_bob_sees(bob_api, before, "privacy-b")
    assert CANARY not in seen and alice_run["runId"] not in seen

    # Published by support staff: the verified claims are knowledge now, the question still is not.
    published = support_api.post(f"/api/cases/{alice_run['runId']}/publish", {}, format="json")
    assert published.status_code == 200, published.content
    after = chat(bob_api, "payment-service is failing again, why?", "privacy-b")
    lookups = ToolInvocation.objects.filter(run__run_id=after["runId"], tool_name="lookup_knowledge", status="SUCCESS")
    retrieved = [r for inv in lookups for r in inv.result["results"]]
    assert any(r["source_type"] == "case" and r["source_id"] == case.case_id for r in retrieved)  # the control
    # The case is known to bob by its own id only: the run it came from (alice's) is nowhere in what he sees.
    seen = what_bob_sees(bob_api, after, "privacy-b")
    assert CANARY not in seen and alice_run["runId"] not in seen and alice_run["runId"][4:] not in seen
