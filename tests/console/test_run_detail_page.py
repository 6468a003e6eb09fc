"""The run-detail page: summary, sanitised answer, route, timeline, Gatekeeper audit with the verified
excerpts marked in their tool results, self-evaluation, feedback form and the JSON trace link."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from tests.support.html_checks import active_markup
from tests.console.scenarios import LOGS, POOL_EXCERPT, evidence_retry_run, fallback_run, happy_run
from tests.factories import DiagnosisRunFactory

pytestmark = pytest.mark.django_db


def detail(client, run) -> str:
    response = client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def part(client, run, kind: str, key) -> str:
    response = client.get(reverse("admin:diagnosis_diagnosisrun_part", args=[run.pk, kind, str(key)]))
    assert response.status_code == 200
    return response.content.decode()


def section(page: str, name: str) -> str:
    start = page.index(f'<section class="rc-section" id="{name}">')
    return page[start:page.index("</section>", start)]


@pytest.fixture
def retried(alice):
    return evidence_retry_run(owner=alice)


def test_the_summary_shows_status_verdict_timings_tokens_and_versions(staff_client, alice):
    run = happy_run(owner=alice)
    page = detail(staff_client, run)
    assert f'<h1 class="rc-title rc-mono">{run.run_id}</h1>' in page
    assert "Why is payment-service failing?" in page
    assert ">SUCCESS<" in page and "verdict PASS" in page and "degraded</span>" not in page
    assert "5.3 s" in page  # duration
    assert f"{run.total_tokens:,}" in page and f"{run.prompt_tokens:,} prompt" in page
    assert "gpt-4o-mini" in page and "catalog-79a2614cc9" in page
    assert "Started" in page and "Finished" in page and "queued 180 ms" in page


def test_the_answer_is_markdown_with_raw_html_and_foreign_links_shown_as_text(staff_client, alice, settings):
    settings.MARKDOWN_LINK_HOSTS = ["runbooks.example"]
    run = happy_run(owner=alice)
    invocation = run.tool_invocations.get()
    DiagnosisRun.objects.filter(pk=run.pk).update(answer=(
        "**Pool exhausted** [%s] and [inv-deadbeef]\n\n<script>alert('x')</script>\n\n"
        "[click](javascript:alert(1)) <img src=x onerror=alert(1)> <a href=\"https://runbooks.example/db\" onclick=\"x()\">runbook</a> "
        "[db runbook](https://runbooks.example/db) [elsewhere](https://evil.example/x) ![pic](https://runbooks.example/p.png)"
        % invocation.invocation_id))
    answer = section(detail(staff_client, run), "answer")
    assert "<strong>Pool exhausted</strong>" in answer
    assert f'<a class="citation" href="#{invocation.invocation_id}">' in answer  # a citation of this run links
    assert "[inv-deadbeef]" in answer and 'href="#inv-deadbeef"' not in answer  # an unknown one does not
    # Raw HTML is shown as text; only a link to an allowed host is a link, and an image is never embedded.
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in answer and "&lt;img src=x onerror=alert(1)&gt;" in answer
    allowed = {f"#{invocation.invocation_id}", "https://runbooks.example/db", "https://runbooks.example/p.png"}
    assert active_markup(answer, allowed_href=lambda href: href in allowed) == []
    assert '<a href="https://runbooks.example/db" rel="noopener noreferrer nofollow">db runbook</a>' in answer
    assert "elsewhere (<code>https://evil.example/x</code>)" in answer and 'href="https://evil.example' not in answer
    assert 'href="javascript' not in answer and "<img" not in answer


def test_the_route_is_drawn_with_the_termination_reason_and_each_transition(staff_client, retried):
    route = section(detail(staff_client, retried), "route")
    assert '<svg class="route-svg"' in route
    assert 'data-node="evidence_retry"' in route
    assert re.search(r'class="node visited" data-node="evidence_retry" data-visits="1"', route)
    assert 'id="termination-reason">fallback_completed<' in route
    assert route.count("<tr class=") == 13  # every transition of the stored trace, in order
    assert "verifier &rarr; evidence_retry" in route and "<code>retry_exhausted</code>" in route


def test_the_timeline_lists_steps_and_tool_calls_with_durations(staff_client, retried):
    timeline = section(detail(staff_client, retried), "timeline")
    assert timeline.count('class="rc-tl-item rc-step"') == retried.step_count
    assert timeline.count('class="rc-tl-item rc-tool"') == retried.tool_count
    assert "Evidence retry: the planner runs again in EVIDENCE_GAP_ONLY mode" in timeline
    assert "840 ms" in timeline and "180 ms" in timeline  # a step and a tool call duration
    assert "attempt 2</span>" in timeline and ">FAILED<" in timeline
    # model input and output collapsible and pretty-printed, loaded when the step opens
    assert '<details class="rc-msg rc-msg-system">' not in timeline and 'data-part="' in timeline
    step = part(staff_client, retried, "step", 0)
    assert '<details class="rc-msg rc-msg-system">' in step
    assert '<span class="j-key">&quot;goal&quot;</span>: <span class="j-str">"explain payment-service errors"</span>' in step
    # each tool call with its arguments, status and result
    logs = retried.tool_invocations.get(tool_name="query_logs")
    assert f'id="{logs.invocation_id}" data-tool="query_logs" open' in timeline
    assert '<span class="j-key">&quot;service&quot;</span>: <span class="j-str">"payment-service"</span>' in timeline
    assert "HikariPool-1 - Thread starvation" in timeline  # an unmarked record of the result


def test_a_verified_excerpt_is_marked_inside_the_tool_result_it_came_from(staff_client, retried):
    page = detail(staff_client, retried)
    logs = retried.tool_invocations.get(tool_name="query_logs")
    start = page.index(f'id="{logs.invocation_id}"')
    opening = page.index('<pre class="rc-json rc-result"', start)
    result = page[opening:page.index("</pre>", opening)]
    marked = re.findall(r'<mark class="evidence"[^>]*>(.*?)</mark>', result)
    assert marked == [POOL_EXCERPT]  # only at $.records[1].message, not everywhere the words appear
    assert result.index("HikariPool-1 - <mark") > result.index(LOGS["records"][0]["message"][:20])


def test_the_gatekeeper_audit_shows_each_claim_and_binding_with_its_reason_code(staff_client, retried):
    audit = section(detail(staff_client, retried), "gatekeeper")
    assert ">LOW_CONFID<" in audit and "some_claims_verified" in audit
    assert "2 of 3 claims, 2 of 3 citations verified" in audit
    assert audit.count('class="rc-card rc-claim rc-claim-ok"') == 2 and audit.count("rc-claim-ko") == 1
    assert "excerpt_mismatch" in audit and "the excerpt is not in the value at raw_path" in audit
    assert "ledger-db is unreachable" in audit
    assert "Circuit breaker &#x27;ledger-db&#x27; OPEN" in audit  # what the failed citation's path really holds
    evidence = re.findall(r'<blockquote class="rc-evidence-text">(.*?)</blockquote>', audit, re.S)
    assert len(evidence) == 2
    assert f'<mark class="evidence">{POOL_EXCERPT}</mark>' in evidence[0]
    assert '<mark class="evidence">max 20 at 10:02</mark>' in evidence[1]


def test_the_self_evaluation_figures_are_shown(staff_client, retried):
    figures = section(detail(staff_client, retried), "self-evaluation")
    assert "Citation validity" in figures and "67%" in figures and "2 / 3 bindings" in figures
    assert "Claims verified" in figures and "2 / 3" in figures
    assert "Tool success" in figures and "100%" in figures
    assert "Evidence retry" in figures and "Fallback" in figures
    assert "Model calls" in figures and "9 / 24" in figures
    assert "no metric shows the pool saturation over time" in figures
    assert "stored self_evaluation (JSON)" in figures


def test_the_page_links_to_the_json_trace_of_the_api(staff_client, retried):
    page = detail(staff_client, retried)
    url = f"/api/diagnosis/{retried.session.session_id}/trace?runId={retried.run_id}"
    assert f'href="{url}" id="json-trace-link"' in page
    trace = staff_client.get(url)
    assert trace.status_code == 200 and trace.json()["run"]["runId"] == retried.run_id


def test_the_page_fetches_nothing_from_another_origin(staff_client, retried):
    page = detail(staff_client, retried)
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "@import" not in page and "url(http" not in page and "fonts.googleapis" not in page


def test_the_page_opens_by_run_id_too(staff_client, retried):
    response = staff_client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[retried.run_id]))
    assert response.status_code == 200 and response.context["detail"].run.pk == retried.pk
    assert staff_client.get(reverse("admin:diagnosis_diagnosisrun_change", args=["run-" + "0" * 32])).status_code == 404
    assert staff_client.get(reverse("admin:diagnosis_diagnosisrun_change", args=["nope"])).status_code == 404


def test_a_fallback_run_says_it_is_degraded_and_shows_the_rejected_citation(staff_client, alice):
    run = fallback_run(owner=alice)
    page = detail(staff_client, run)
    assert "Degraded: the deterministic fallback wrote this answer" in page
    assert ">REJECT<" in section(page, "gatekeeper") and "excerpt_mismatch" in page


def test_a_simple_run_is_labelled_unverified_instead_of_drawing_an_empty_graph(staff_client, alice):
    run = DiagnosisRunFactory(session__owner=alice, strategy="SIMPLE", status="SUCCESS", answer="Hello!")
    page = detail(staff_client, run)
    assert 'id="unverified-badge"' in page and 'id="unverified-route"' in page and 'id="unverified-audit"' in page
    assert "route-svg" not in section(page, "route")  # no grey diagnosis graph
    assert "No self-evaluation stored" in page and "No step recorded." in page
    diagnosis = DiagnosisRunFactory(session__owner=alice, status="SUCCESS", answer="Hi")
    assert "unverified" not in detail(staff_client, diagnosis).lower()


def test_an_invalid_stored_trace_is_reported_not_drawn(staff_client, alice):
    run = DiagnosisRunFactory(session__owner=alice, status="SUCCESS", orchestration_trace={"version": "other"})
    assert "not a valid <code>stategraph-v1</code> object" in detail(staff_client, run)


def test_a_failed_run_shows_its_error(staff_client, alice):
    run = DiagnosisRunFactory(session__owner=alice, status="FAILED", error_code="worker_lost",
                              error_message="heartbeat older than 120 s")
    page = detail(staff_client, run)
    assert "<strong>worker_lost</strong>: heartbeat older than 120 s" in page


def test_stored_text_is_escaped_everywhere(staff_client, alice):
    run = happy_run(owner=alice, question="<b>bold</b> question")
    step = run.steps.first()
    step.model_input = [{"role": "user", "content": "<img src=x onerror=alert(1)>"}]
    step.save(update_fields=["model_input"])
    page = detail(staff_client, run)
    assert "&lt;b&gt;bold&lt;/b&gt; question" in page and "<b>bold</b> question" not in page
    step = part(staff_client, run, "step", step.step_index)
    assert "<img src=x" not in step and "&lt;img src=x onerror=alert(1)&gt;" in step
