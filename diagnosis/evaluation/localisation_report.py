"""How well the localiser names the root cause of generated incidents, scored strictly.

Every incident of a seed range is generated (``diagnosis.evaluation.generator``), served by the demo
backend, and every tool is asked about every service (the full evidence a run could gather); the
localiser then ranks the candidates and decides. Scores, from the structured result only:

- **AC@1 / AC@3**: the true root service is the first / among the first three ranked candidates;
- **hit**: a decisive root cause on the right service with an accepted kind (``cause_kind`` or
  ``also_accepted_kinds``);
- **false confidence**: a decisive root cause on a wrong service or of a wrong kind, or any root
  cause where nothing is wrong, or on a question about a service with no data;
- **undetermined**: no decisive answer on an incident;
- **nothing-wrong accuracy**: healthy incidents answered "nothing wrong";
- **no data**: questions about a service with no telemetry answered "no data".

How-to questions are the analyser's business (they never reach localisation) and are left out.

    .venv/bin/python -m diagnosis.evaluation.localisation_report --seeds 0:400
    .venv/bin/python -m diagnosis.evaluation.localisation_report --seeds 0:400 --held-back 400 --traces both
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable

from diagnosis.evaluation.generator import HELD_BACK_FROM, generate, write_incident
from diagnosis.localisation.outcome import Localisation, localise
from diagnosis.tools.backends.demo import DemoBackend


# Where offset 0 of every scored incident lies. A fixed clock makes the report repeatable; each seed adds its own
# phase (``moment_of``) so that sample alignment still varies across incidents as it does across real ones.
REFERENCE_NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


def moment_of(seed: int) -> datetime:
    return REFERENCE_NOW + timedelta(seconds=(seed * 7919) % 3600)


def full_evidence(folder: Path, now: datetime = REFERENCE_NOW) -> list[dict[str, Any]]:
    """Every tool asked about every service of a scenario folder, as a run's recorded results (the demo
    backend's clock fixed at ``now``)."""
    backend = DemoBackend([folder], now=now)
    results: list[dict[str, Any]] = []

    def ask(tool: str, arguments: dict[str, Any], call) -> None:
        try:
            result = call(**arguments)
        except Exception:  # noqa: BLE001 - a tool that refuses a call gives no evidence, as in a run
            return
        results.append({"invocation_id": f"inv-{len(results) + 1:08x}", "tool_name": tool, "arguments": arguments,
                        "result": json.loads(json.dumps(result, default=str))})

    ask("query_alerts", {}, backend.query_alerts)
    for service in backend.services():
        ask("query_logs", {"service": service, "limit": 500}, backend.query_logs)
        ask("query_metrics", {"service": service}, backend.query_metrics)
        ask("query_kubernetes", {"kind": "deployment", "name": service}, backend.query_kubernetes)
        ask("query_kubernetes", {"kind": "service", "name": service}, backend.query_kubernetes)
    ask("query_metrics", {"query": '{__name__=~"node_.*"}'}, backend.query_metrics)
    ask("query_traces", {}, backend.query_traces)
    ask("query_changes", {}, backend.query_changes)
    return results


@dataclass(frozen=True)
class Score:
    seed: int
    question: str  # incident | healthy | no_data
    kind: str | None
    format: str
    size: int
    traces: bool
    outcome: str
    ac1: bool
    ac3: bool
    hit: bool
    false_confidence: bool
    seconds: float


def score(truth: dict[str, Any], found: Localisation, seed: int, seconds: float, traces: bool) -> Score:
    question = truth.get("question_kind") or ("healthy" if truth.get("expected_nothing_wrong") else "incident")
    expected = truth.get("root_cause_service")
    kinds = {truth.get("cause_kind"), *truth.get("also_accepted_kinds", [])} - {None}
    ranked = [c.service for c in found.candidates if c.explained_by is None] + \
             [c.service for c in found.candidates if c.explained_by is not None]
    if question == "incident":
        hit = found.outcome == "root_cause" and found.root == expected and found.kind in kinds
        wrong = found.outcome == "root_cause" and not hit
    elif question == "healthy":
        hit, wrong = found.outcome == "nothing_wrong", found.outcome == "root_cause"
    else:  # no_data: never a root cause on another service
        hit, wrong = found.outcome == "no_data", found.outcome == "root_cause"
    return Score(seed, question, truth.get("cause_kind"), str(truth.get("format") or "?"), int(truth.get("size") or 0),
                 traces, found.outcome, bool(ranked[:1]) and ranked[0] == expected, expected in ranked[:3], hit, wrong,
                 seconds)


def evaluate(seeds: Iterable[int], *, traces: bool | None = None) -> list[Score]:
    scores = []
    with tempfile.TemporaryDirectory(prefix="aiops-gen-") as tmp:
        for seed in seeds:
            incident = generate(seed, traces=traces)
            truth = incident.ground_truth
            if truth.get("question_kind") == "howto":
                continue
            folder = write_incident(incident, Path(tmp) / incident.name)
            subject = list(truth.get("asked_services") or [])
            results = full_evidence(folder, moment_of(seed))
            started = time.perf_counter()
            found = localise(results, subject)
            seconds = time.perf_counter() - started
            scores.append(score(truth, found, seed, seconds, incident.traces is not None))
    return scores


def _rate(part: int, whole: int) -> str:
    return f"{part / whole:.2f} ({part}/{whole})" if whole else "–"


def summary_row(scores: list[Score]) -> dict[str, str]:
    incidents = [s for s in scores if s.question == "incident"]
    healthy = [s for s in scores if s.question == "healthy"]
    no_data = [s for s in scores if s.question == "no_data"]
    return {
        "AC@1": _rate(sum(s.ac1 for s in incidents), len(incidents)),
        "AC@3": _rate(sum(s.ac3 for s in incidents), len(incidents)),
        "hit": _rate(sum(s.hit for s in incidents), len(incidents)),
        "false confidence": _rate(sum(s.false_confidence for s in scores), len(scores)),
        "undetermined": _rate(sum(s.outcome == "undetermined" for s in incidents), len(incidents)),
        "nothing-wrong accuracy": _rate(sum(s.hit for s in healthy), len(healthy)),
        "no data": _rate(sum(s.hit for s in no_data), len(no_data)),
    }


def table(columns: dict[str, list[Score]]) -> str:
    rows = {name: summary_row(scores) for name, scores in columns.items()}
    metrics = list(next(iter(rows.values())).keys()) if rows else []
    lines = ["| | " + " | ".join(rows) + " |", "|---|" + "---:|" * len(rows)]
    lines += [f"| {m} | " + " | ".join(rows[c][m] for c in rows) + " |" for m in metrics]
    return "\n".join(lines)


def breakdown(scores: list[Score], key, title: str) -> str:
    groups: dict[str, list[Score]] = defaultdict(list)
    for s in scores:
        if s.question == "incident":
            groups[key(s)].append(s)
    lines = [f"| {title} | incidents | AC@1 | AC@3 | hit | false confidence | undetermined |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name in sorted(groups):
        g = groups[name]
        lines.append(f"| {name} | {len(g)} | {sum(s.ac1 for s in g) / len(g):.2f} | {sum(s.ac3 for s in g) / len(g):.2f} | "
                     f"{sum(s.hit for s in g) / len(g):.2f} | {sum(s.false_confidence for s in g)} | "
                     f"{sum(s.outcome == 'undetermined' for s in g)} |")
    return "\n".join(lines)


def _size_bucket(s: Score) -> str:
    return "3-9" if s.size < 10 else "10-19" if s.size < 20 else "20-30"


def _range(text: str) -> range:
    low, _, high = text.partition(":")
    return range(int(low), int(high))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=_range, default=range(0, 200), help="development seeds, LOW:HIGH")
    parser.add_argument("--held-back", type=int, default=0, metavar="N",
                        help=f"also score N held-back seeds from {HELD_BACK_FROM:,}, in a column of their own")
    parser.add_argument("--traces", choices=("seed", "on", "off", "both"), default="seed",
                        help="traces as each seed decides, forced on or off, or both side by side")
    parser.add_argument("--breakdown", action="store_true", help="per kind, format and graph size")
    args = parser.parse_args(argv)
    if args.seeds.stop > HELD_BACK_FROM:
        parser.error(f"--seeds must stay below {HELD_BACK_FROM:,}: use --held-back for the held-back range")
    modes = {"seed": [None], "on": [True], "off": [False], "both": [False, True]}[args.traces]
    columns: dict[str, list[Score]] = {}
    for mode in modes:
        suffix = "" if mode is None else (" with traces" if mode else " without traces")
        columns[f"seeds {args.seeds.start}-{args.seeds.stop - 1}{suffix}"] = evaluate(args.seeds, traces=mode)
        if args.held_back:
            held = range(HELD_BACK_FROM, HELD_BACK_FROM + args.held_back)
            columns[f"held back{suffix}"] = evaluate(held, traces=mode)
    print(table(columns))
    if args.breakdown:
        development = next(iter(columns.values()))
        print()
        print(breakdown(development, lambda s: s.kind or "?", "kind"))
        print()
        print(breakdown(development, lambda s: s.format, "format"))
        print()
        print(breakdown(development, _size_bucket, "services"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
