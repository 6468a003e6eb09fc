"""Shipped demo incident scenarios (logs, metrics, alerts, runbooks, ground truth) and their loader."""

from diagnosis.demo.loader import (
    SCENARIOS_DIR,
    Scenario,
    ScenarioError,
    load_ground_truth,
    load_scenario,
    load_scenario_meta,
    runbook_files,
    scenario_dir,
    shipped_scenarios,
)

__all__ = [
    "SCENARIOS_DIR",
    "Scenario",
    "ScenarioError",
    "load_ground_truth",
    "load_scenario",
    "load_scenario_meta",
    "runbook_files",
    "scenario_dir",
    "shipped_scenarios",
]
