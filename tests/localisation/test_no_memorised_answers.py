"""No answer is memorised: the analyser's code names no service, evidence line or id of any scenario."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE = sorted((ROOT / "diagnosis/localisation").glob("*.py")) + sorted((ROOT / "diagnosis/llm/offline").glob("*.py"))
SCENARIOS = [folder for place in ("diagnosis/demo/scenarios", "tests/holdout_scenarios", "tests/outside_scenarios",
                                  "tests/outside_scenarios_2")
             for folder in sorted((ROOT / place).iterdir())]


def _distinctive(folder: Path) -> set[str]:
    """What only that incident says: its service names and root cause, and its key evidence lines."""
    truth = json.loads((folder / "ground_truth.json").read_text())
    scenario = json.loads((folder / "scenario.json").read_text())
    services = {s for s in scenario["services"] if "-" in s or len(s) > 8} | ({truth["root_cause_service"]} - {None})
    evidence = truth.get("key_evidence", [])
    # A line of real software ("No space left on device") is knowledge; one that names this incident's
    # services or ids is the answer.
    lines = {e for e in evidence if len(e) >= 16 and (any(s in e for s in services) or re.search(r"\d{3,}", e))}
    ids = set(re.findall(r"\b[a-z]+-\d{3,}\b|\b[A-Z]{2,}-\d{3,}\b", " ".join(evidence)))
    return services | lines | ids


@pytest.mark.parametrize("folder", SCENARIOS, ids=lambda p: p.name)
def test_the_analyser_code_names_nothing_distinctive_of_a_scenario(folder):
    text = {path.name: path.read_text() for path in CODE}
    hits = [(name, token) for token in _distinctive(folder) for name, body in text.items()
            if re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", body)]
    assert not hits, hits


def test_the_check_sees_a_planted_name():
    assert "orders-mysql" in _distinctive(ROOT / "diagnosis/demo/scenarios/storefront-orders-mysql-connections")
