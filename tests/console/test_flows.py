"""Every flow audited on the run page: an alert analysis (AI_OPS) shows its supervisor decisions, each
task's Gatekeeper result and the report check; SIMPLE runs say their answer is unverified; degraded
and failed runs lead with their first error; only verified answers can be rated useful."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from diagnosis.models import AgentStep, DiagnosisRun
from tests.aiops.conftest import scenario_alerts, sse_events
from tests.api.conftest import token_client
from tests.console.conftest import roles_create
from tests.console.scenarios import fallback_run, happy_run
from tests.factories import AgentStepFactory, DiagnosisRunFactory
from tests.diagnosis.conftest import demo_knowledge  # noqa: F401  (fixture)


def detail(client, run) -> str:
    response = client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def section(page: str, section_id: str) -> str:
    start = page.index(f'id="{section_id}"')
    end = page.find('<section class="rc-section"', start)
    return page[start:end if end > 0 else None]


@pytest.fixture
def aiops_run(alice, demo_knowledge, eager_tasks):  # noqa: F811
    response = token_client(alice).post("/api/ai_ops", {"alerts": scenario_alerts("payment-db-pool-exhaustion")},
                                        format="json")
    assert response.status_code == 200
    run = DiagnosisRun.objects.get(run_id=sse_events(response)[0]["data"]["runId"])
    assert run.status == "SUCCESS" and run.agent_flow == "AI_OPS"
    return run


@pytest.mark.django_db(transaction=True)
def test_an_alert_analysis_shows_decisions_task_audits_and_the_report_check(client, aiops_run):
    roles_create()
    from tests.console.conftest import support_staff_create

    client.force_login(support_staff_create())
    page = detail(client, aiops_run)
    audit = aiops_run.self_evaluation["aiops_audit"]
    assert "did not reach the Gatekeeper" not in page
    gatekeeper = section(page, "gatekeeper")
    for decision in audit["decisions"]:
        assert f">{decision['decision']}</span>" in gatekeeper
    for task in audit["tasks"]:
        task_id = task["task"]["task_id"]
        gk = task["gatekeeper"]
        assert f'id="task-{task_id}"' in gatekeeper
        assert f"{gk['verified_claim_count']} of {gk['total_claim_count']} claims" in gatekeeper
    report = audit["report_check"]
    assert 'id="report-check"' in gatekeeper
    assert f"{report['statements_verified']} of {report['statements_total']} statements kept" in gatekeeper
    reported = report["gatekeeper"]
    assert f"{reported['verified_binding_count']} of {reported['total_binding_count']} citations verified" in page
    # the verified excerpts are highlighted in the audit and in the cited tool results
    assert gatekeeper.count('<mark class="evidence"') >= reported["verified_binding_count"]
    cited = report["cited_invocation_ids"][0]
    tool = page[page.index(f'id="{cited}"'):]
    assert '<mark class="evidence"' in tool[:tool.index("</details>")]
    # the route is drawn over the alert-analysis topology, every transition of the stored trace numbered
    route = section(page, "route")
    trace = aiops_run.orchestration_trace
    assert 'class="route-svg"' in route and 'id="aiops-route"' not in route
    assert "Alert-analysis topology, route ending at aiops_report_check" in route
    for node in ("aiops_intake", "aiops_planner", "aiops_executor", "aiops_gatekeeper", "aiops_reporter",
                 "aiops_report_check"):
        assert re.search(rf'class="node [^"]*visited[^"]*" data-node="{node}"', route), node
    assert re.search(r'class="node idle" data-node="aiops_fallback"', route)
    assert route.count('<tr class="') == len(trace["transitions"])
    assert f'href="#aiops-decisions">{len(audit["decisions"])}</a>' in route
    figures = section(page, "self-evaluation")
    assert "Report check" in figures and "Supervisor rounds" in figures


@pytest.mark.django_db
def test_a_degraded_run_leads_with_its_first_error_and_node(staff_client, alice):
    run = fallback_run(owner=alice)  # the planner's first attempt returned malformed JSON
    banner = detail(staff_client, run).split('id="triage-banner"', 1)[1].split("</div>", 1)[0]
    assert "Degraded" in banner
    assert re.search(r'id="first-error-code">InvalidOutput<', banner)
    assert re.search(r'href="#step-\d+" id="first-error-node">planner<', banner)


@pytest.mark.django_db
def test_a_model_connection_error_is_named_with_its_node(staff_client, alice):
    run = DiagnosisRunFactory(session__owner=alice, status="SUCCESS", degraded=True, answer="Fallback answer")
    AgentStepFactory(run=run, step_index=0, node="planner", status=AgentStep.Status.COMPLETED)
    AgentStepFactory(run=run, step_index=1, node="executor", status=AgentStep.Status.FAILED,
                     error="model_connection_error: the model endpoint refused the connection after 3 attempt(s)")
    banner = detail(staff_client, run).split('id="triage-banner"', 1)[1].split("</div>", 1)[0]
    assert 'id="first-error-code">model_connection_error<' in banner
    assert 'href="#step-1" id="first-error-node">executor<' in banner
    failed = DiagnosisRunFactory(session__owner=alice, status="FAILED", error_code="broker_unavailable",
                                 error_message="the broker refused the task")
    page = detail(staff_client, failed)
    assert 'id="first-error-code">broker_unavailable<' in page and "Failed:" in page


@pytest.mark.django_db
def test_a_healthy_run_has_no_banner(staff_client, alice):
    assert 'id="triage-banner"' not in detail(staff_client, happy_run(owner=alice))


@pytest.mark.django_db
@pytest.mark.parametrize("kind, useful_offered", [
    ("pass", True), ("degraded", False), ("failed", False), ("simple", False),
])
def test_the_feedback_form_offers_useful_only_for_a_verified_answer(staff_client, alice, kind, useful_offered):
    if kind == "pass":
        run = happy_run(owner=alice)
    elif kind == "degraded":
        run = fallback_run(owner=alice)
    elif kind == "failed":
        run = DiagnosisRunFactory(session__owner=alice, status="FAILED", error_code="missing_answer")
    else:
        run = DiagnosisRunFactory(session__owner=alice, status="SUCCESS", strategy="SIMPLE", answer="Hi")
    form = section(detail(staff_client, run), "feedback")
    assert ('value="useful"' in form) is useful_offered
    assert 'value="not_useful"' in form
    assert ('id="no-useful"' in form) is not useful_offered
    url = reverse("admin:diagnosis_diagnosisrun_feedback", args=[run.pk])
    response = staff_client.post(url, {"feedback": "useful"}, follow=True)
    stored = DiagnosisRun.objects.get(pk=run.pk)
    if useful_offered:
        assert stored.feedback == "useful"
    else:
        assert stored.feedback is None and "Feedback not saved" in response.content.decode()
        staff_client.post(url, {"feedback": "not_useful"})
        assert DiagnosisRun.objects.get(pk=run.pk).feedback == "not_useful"


@pytest.mark.django_db(transaction=True)
def test_a_real_six_step_run_page_stays_under_150_kb(client, alice, demo_knowledge, eager_tasks):  # noqa: F811
    roles_create()
    from tests.console.conftest import support_staff_create

    client.force_login(support_staff_create())
    response = token_client(alice).post("/api/chat", {"question": "Why is payment-service failing?",
                                                      "mode": "diagnosis", "sessionId": "weight-1"}, format="json")
    assert response.status_code == 200
    run = DiagnosisRun.objects.get(run_id=response.json()["runId"])
    assert run.step_count == 6 and run.status == "SUCCESS"
    page = detail(client, run)
    assert len(page.encode()) < 150_000, len(page.encode())
    # the heavy parts are one request away
    for step in run.steps.all():
        assert f'data-part="/admin/diagnosis/diagnosisrun/{run.pk}/part/step/{step.step_index}/"' in page
    raw = client.get(reverse("admin:diagnosis_diagnosisrun_part", args=[run.pk, "self-evaluation", "json"]))
    assert raw.status_code == 200 and "rule_evaluation" in raw.content.decode()


@pytest.mark.django_db
def test_labels_are_words_not_database_ids(alice):
    from diagnosis.models import CaseLibraryEntry

    run = happy_run(owner=alice)
    step = run.steps.order_by("-step_index").first()
    assert str(step) == f"step {step.step_index} · {step.node}"  # not "<run pk>#<index> <node>"
    case = CaseLibraryEntry.objects.create(run=run, session_id=run.session.session_id, question=run.question,
                                           answer=run.answer)
    assert str(case) == f"case: {run.question[:60]}"
