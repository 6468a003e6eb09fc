"""Prompt catalogs side by side, pinned per replay; manage.py replay_run; the live fallback."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.management import CommandError, call_command

from diagnosis.agents import catalog
from diagnosis.models import AgentStep, DiagnosisRun
from diagnosis.services.replay import ReplayOptions, replay_submit
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def older_catalog(tmp_path, monkeypatch):
    """A second catalog beside the current one: the planner prompt has one more line."""
    monkeypatch.setattr(catalog, "CATALOGS_DIR", tmp_path / "catalogs")
    folder = tmp_path / "catalogs" / "v-older"
    shutil.copytree(catalog.PROMPTS_DIR, folder, ignore=shutil.ignore_patterns("catalogs"))
    planner = folder / "planner.md"
    planner.write_text(planner.read_text(encoding="utf-8") + "\nPrefer the logs of the failing service first.\n",
                       encoding="utf-8")
    return folder


def test_a_new_catalog_is_added_beside_the_current_one_and_either_can_be_pinned(older_catalog, alice, recorded,
                                                                              eager_tasks, capsys):
    available = catalog.available_catalogs()
    assert set(available) == {"current", "v-older"} and available["current"] != available["v-older"]
    assert catalog.catalog_version() == available["current"]
    with catalog.use_catalog(available["v-older"]) as version:  # by hash as well as by name
        assert version == available["v-older"] and "Prefer the logs" in catalog.prompt("planner").text
    assert "Prefer the logs" not in catalog.prompt("planner").text  # the pin ends with the block
    with pytest.raises(catalog.PromptError, match="v-older"):
        catalog.resolve_catalog("v-missing")

    original = recorded("inventory-disk-full")
    assert original.prompt_version == available["current"]
    call_command("replay_run", original.run_id, "--model", "offline", "--prompt-version", "v-older")
    out = json.loads(capsys.readouterr().out)
    pinned = DiagnosisRun.objects.get(run_id=out["runId"])
    assert out["replayOf"] == original.run_id and out["status"] == "SUCCESS"
    assert pinned.prompt_version == available["v-older"] == out["promptVersion"]
    planner_input = AgentStep.objects.filter(run=pinned, agent="planner").first().model_input
    assert "Prefer the logs of the failing service first." in planner_input[0]["content"]
    call_command("replay_run", original.run_id, "--model", "offline", "--prompt-version", "current")
    again = DiagnosisRun.objects.get(run_id=json.loads(capsys.readouterr().out)["runId"])
    assert again.prompt_version == available["current"] and again.answer == original.answer


def test_replay_run_refuses_unknown_runs_and_users_who_may_not_replay(alice, bob, recorded):
    original = recorded("inventory-disk-full")
    with pytest.raises(CommandError, match="does not exist"):
        call_command("replay_run", "run-" + "0" * 32)
    with pytest.raises(CommandError, match="may not replay"):
        call_command("replay_run", original.run_id, "--user", bob.username)
    with pytest.raises(CommandError, match="promptVersion"):
        call_command("replay_run", original.run_id, "--prompt-version", "nope")
    assert not DiagnosisRun.objects.filter(replay_of=original).exists()


def test_live_fallback_serves_a_missing_call_live_and_marks_it(alice, recorded, openai_llm, eager_tasks, settings,
                                                              django_capture_on_commit_callbacks):
    settings.LLM_PROVIDER = "offline"
    source = recorded("payment-db-pool-exhaustion")
    new_args = {"service": "payment-service", "query": "timeout"}
    recorded_args = source.tool_invocations.filter(tool_name="query_logs").first().arguments
    assert recorded_args != new_args
    openai_llm.always(Reply.json({"version": "planner_plan_v1", "goal": "x", "services": [],
                                  "steps": [{"tool": "query_logs", "arguments": new_args}]}), role="planner")
    openai_llm.enqueue(Reply.tool_calls(("query_logs", new_args, "c1"), ("query_logs", recorded_args, "c2")),
                       role="executor")
    openai_llm.always(Reply.json({"version": "executor_evidence_v2", "summary": "", "claims": [], "open_questions": []}),
                      role="executor")
    openai_llm.always(Reply.json({"verdict": "LOW_CONFID", "score": 0.2, "claim_checks": [], "critical_evidence_gaps": []}),
                      role="verifier")
    openai_llm.always(Reply.json({"answer_markdown": "Not enough evidence.", "cited_invocation_ids": []}), role="composer")
    with django_capture_on_commit_callbacks(execute=True):
        replay = replay_submit(user=alice, run_id=source.run_id,
                               options=ReplayOptions(model="fake-live", live_fallback=True))
    replay.refresh_from_db()
    assert replay.is_terminal
    live, served = replay.tool_invocations.order_by("id")
    assert live.replay_mode == "live_fallback" and live.status == "SUCCESS" and live.source_invocation_id is None
    assert live.result["request"]["service"] == "payment-service"
    assert served.replay_mode == "recorded" and served.source_invocation.run_id == source.pk
