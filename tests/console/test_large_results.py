"""A large tool result shows a window around each verified excerpt, however far in the excerpt is;
"show all" loads the whole result from a staff-only endpoint; step bodies load on demand."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from diagnosis.models import DiagnosisRun, ToolInvocation
from tests.console.scenarios import happy_run

pytestmark = pytest.mark.django_db
CITED = "HikariPool-1 - Connection is not available, request timed out after 30000ms (total=20, active=20)"


def marks(html: str) -> list[str]:
    return re.findall(r'<mark class="evidence"[^>]*>(.*?)</mark>', html, re.S)


@pytest.fixture
def big_run(alice):
    """The happy run whose log result grows to 6,000 records (~700 KB), the cited one near the end."""
    run = happy_run(owner=alice)
    logs = run.tool_invocations.get(tool_name="query_logs")
    records = [{"timestamp": f"2026-11-29T09:{i // 100 % 60:02d}:00Z", "level": "INFO",
                "message": f"GET /v1/payments/{i} 200 in 12ms " + "trace=" + "ab" * 40} for i in range(6000)]
    records[5871] = {"timestamp": "2026-11-29T10:02:13Z", "level": "ERROR", "message": CITED}
    result = {**logs.result, "records": records, "total": len(records)}
    ToolInvocation.objects.filter(pk=logs.pk).update(result=result)
    evaluation = run.self_evaluation
    binding = evaluation["verifier_evaluation"]["gatekeeper_audit"]["audit"][0]["bindings"][0]
    binding.update(raw_path="$.records[5871].message", evidence_excerpt="Connection is not available, request timed out")
    DiagnosisRun.objects.filter(pk=run.pk).update(self_evaluation=evaluation)
    return run, logs.invocation_id


def test_the_cited_line_of_a_large_result_is_shown_and_marked(staff_client, big_run):
    run, invocation_id = big_run
    page = staff_client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[run.pk])).content.decode()
    start = page.index(f'id="{invocation_id}"')
    tool = page[start:page.index("</details>", start)]
    result = tool[tool.index('<pre class="rc-json rc-result"'):]
    assert marks(result) == ["Connection is not available, request timed out"]
    assert "Large result" in tool and 'class="rc-button rc-show-all"' in tool
    assert "5,868 items not shown" in tool and "more items not shown" in tool
    assert "/v1/payments/5870 " in tool and "/v1/payments/5874 " in tool and "/v1/payments/10 " not in tool
    assert len(page.encode()) < 150_000


def test_show_all_loads_the_whole_result_with_the_excerpt_marked(staff_client, big_run):
    run, invocation_id = big_run
    url = reverse("admin:diagnosis_diagnosisrun_part", args=[run.pk, "result", invocation_id])
    whole = staff_client.get(url).content.decode()
    assert marks(whole) == ["Connection is not available, request timed out"]
    assert "/v1/payments/10 " in whole and "/v1/payments/5999 " in whole and "not shown" not in whole


@pytest.mark.parametrize("who, status", [("auditor_client", 200), ("outsider", 302)])
def test_the_parts_are_for_staff_only(request, client, big_run, who, status):
    run, invocation_id = big_run
    if who == "outsider":
        client.force_login(request.getfixturevalue("outsider"))
        viewer = client
    else:
        viewer = request.getfixturevalue(who)
    for kind, key in (("result", invocation_id), ("tool", invocation_id), ("step", 0)):
        response = viewer.get(reverse("admin:diagnosis_diagnosisrun_part", args=[run.pk, kind, key]))
        assert response.status_code == status, (kind, response.status_code)


def test_an_unknown_part_is_404(staff_client, big_run):
    run, _ = big_run
    for kind, key in (("result", "inv-00000000"), ("step", 99), ("other", "x")):
        response = staff_client.get(reverse("admin:diagnosis_diagnosisrun_part", args=[run.pk, kind, key]))
        assert response.status_code == 404
