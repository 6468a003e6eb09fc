"""A replay's run page names the recorded run and links to the diff of the two."""

from __future__ import annotations

import pytest
from django.urls import reverse

from diagnosis.models import DiagnosisRun
from tests.console.scenarios import happy_run

pytestmark = pytest.mark.django_db


def test_a_replay_page_links_to_the_recorded_run_and_the_diff(staff_client, alice):
    recorded = happy_run(owner=alice)
    replay = happy_run(owner=alice)
    DiagnosisRun.objects.filter(pk=replay.pk).update(replay_of=recorded, replay_options={"model": "offline"})
    page = staff_client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[replay.pk])).content.decode()
    assert 'id="replay-badge"' in page and recorded.run_id in page
    diff_link = f"{reverse('admin:diagnosis_diagnosisrun_diff')}?a={recorded.run_id}&amp;b={replay.run_id}"
    assert diff_link in page
    plain = staff_client.get(reverse("admin:diagnosis_diagnosisrun_change", args=[recorded.pk])).content.decode()
    assert 'id="replay-badge"' not in plain and 'id="compare-recorded-link"' not in plain
    diff = staff_client.get(diff_link.replace("&amp;", "&"))
    assert diff.status_code == 200 and replay.run_id in diff.content.decode()
