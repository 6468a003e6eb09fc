"""Replay a regression set against a model or prompt catalog and judge it against thresholds.

Every run of the set is replayed on its recorded evidence (`diagnosis.services.replay`) and
compared with the recorded run claim by claim (`traces.replay_compare`). The report holds one row
per run and the totals; `breaches` lists every threshold the totals exceed.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from diagnosis.services.access import SUPPORT_STAFF
from diagnosis.services.regression import regression_set_runs
from diagnosis.services.replay import ReplayOptions, replay_submit, replay_wait
from diagnosis.services.submission import RunRefused
from traces.replay_compare import compare_runs

REGRESSION_USER = "regression"


@dataclass(frozen=True)
class Thresholds:
    max_verdict_drops: int = 0
    max_lost_claims: int = 0
    max_root_cause_disagreements: int = 0
    max_unsupported_claims: int = 0
    max_failed_replays: int = 0


def regression_user():
    """The account that owns the replays of `regress` (support staff: it may replay every run)."""
    user, _ = get_user_model().objects.get_or_create(username=REGRESSION_USER)
    user.groups.add(Group.objects.get_or_create(name=SUPPORT_STAFF)[0])
    return user


def _row(source, replay, comparison: dict) -> dict:
    left, right = comparison["left"], comparison["right"]
    return {
        "runId": source.run_id, "replayRunId": replay.run_id, "question": source.question[:200],
        "status": replay.status, "errorCode": replay.error_code or None,
        "rootCauseAgree": comparison["rootCause"]["agree"], "rootCause": comparison["rootCause"],
        "verdict": comparison["verdict"],
        "claims": {"verified": comparison["claims"]["verified"], "rejected": comparison["claims"]["rejected"],
                   "added": len(comparison["claims"]["added"]), "lost": len(comparison["claims"]["lost"]),
                   "lostClaims": comparison["claims"]["lost"], "addedClaims": comparison["claims"]["added"]},
        "unsupportedClaims": right["unsupportedClaims"],
        "notInRecording": replay.tool_invocations.filter(replay_mode="not_in_recording").count(),
        "tokens": {"recorded": left["tokens"], "replay": right["tokens"]},
        "costUsd": {"recorded": left["costUsd"], "replay": right["costUsd"]},
        "latencyMs": {"recorded": left["latencyMs"], "replay": right["latencyMs"]},
        "answerChanged": comparison["answerChanged"],
    }


def _sum_cost(rows, side):
    values = [r["costUsd"][side] for r in rows]
    return round(sum(values), 6) if values and all(v is not None for v in values) else None


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def totals(rows: list[dict]) -> dict:
    n = len(rows)
    return {
        "runs": n,
        "rootCauseAgreement": round(sum(r["rootCauseAgree"] for r in rows) / n, 3) if n else None,
        "rootCauseDisagreements": sum(not r["rootCauseAgree"] for r in rows),
        "verdictChanges": sum(r["verdict"]["changed"] for r in rows),
        "verdictDrops": sum(r["verdict"]["dropped"] for r in rows),
        "claimsVerified": sum(r["claims"]["verified"] for r in rows),
        "claimsRejected": sum(r["claims"]["rejected"] for r in rows),
        "claimsAdded": sum(r["claims"]["added"] for r in rows),
        "claimsLost": sum(r["claims"]["lost"] for r in rows),
        "unsupportedClaims": sum(r["unsupportedClaims"] for r in rows),
        "failedReplays": sum(r["status"] != "SUCCESS" for r in rows),
        "notInRecording": sum(r["notInRecording"] for r in rows),
        "tokens": {"recorded": sum(r["tokens"]["recorded"] for r in rows), "replay": sum(r["tokens"]["replay"] for r in rows)},
        "costUsd": {"recorded": _sum_cost(rows, "recorded"), "replay": _sum_cost(rows, "replay")},
        "medianLatencyMs": {"recorded": _median([r["latencyMs"]["recorded"] for r in rows]),
                            "replay": _median([r["latencyMs"]["replay"] for r in rows])},
    }


def breaches(summary: dict, limits: Thresholds) -> list[str]:
    found = []
    for label, value, limit in (
        ("verdict drops", summary["verdictDrops"], limits.max_verdict_drops),
        ("lost claims", summary["claimsLost"], limits.max_lost_claims),
        ("root-cause disagreements", summary["rootCauseDisagreements"], limits.max_root_cause_disagreements),
        ("unsupported claims", summary["unsupportedClaims"], limits.max_unsupported_claims),
        ("failed replays", summary["failedReplays"], limits.max_failed_replays),
    ):
        if value > limit:
            found.append(f"{label}: {value} > {limit}")
    return found


def _replay_within_cap(user, run_id: str, options: ReplayOptions, wait_seconds: float):
    """Submit one replay under the regression user's active-run cap (CHAT_MAX_ACTIVE_RUNS, as every path that
    starts a run): at the cap, wait for a slot for up to `wait_seconds`, then let the refusal stand."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return replay_submit(user=user, run_id=run_id, options=options)
        except RunRefused as exc:
            if exc.code != "too_many_active_runs" or time.monotonic() >= deadline:
                raise
            time.sleep(1.0)


def regress(*, set_name: str, options: ReplayOptions, limits: Thresholds, prices: dict | None = None,
            wait_seconds: float = 600.0) -> dict:
    user = regression_user()
    rows = []
    for source in regression_set_runs(set_name):
        replay = replay_wait(_replay_within_cap(user, source.run_id, options, wait_seconds), wait_seconds)
        rows.append(_row(source, replay, compare_runs(source, replay, prices=prices)))
    summary = totals(rows)
    return {"set": set_name, "options": options.to_dict(), "thresholds": limits.__dict__, "summary": summary,
            "breaches": breaches(summary, limits), "runs": rows}


def markdown(report: dict) -> str:
    s = report["summary"]
    opts = report["options"]
    lines = [
        f"# Regression report: {report['set']}", "",
        f"Model: {opts['model'] or 'configured'} · per-role: {opts['models'] or '-'} · prompt catalog: "
        f"{opts['prompt_version'] or 'current'} · live fallback: {'yes' if opts['live_fallback'] else 'no'}", "",
        f"**{'REGRESSION' if report['breaches'] else 'OK'}**" + (": " + "; ".join(report["breaches"]) if report["breaches"] else ""), "",
        "| runs | root-cause agreement | verdict changes | verdict drops | claims verified | rejected | added | lost | "
        "unsupported | failed | tokens (recorded → replay) | cost USD | median latency ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {s['runs']} | {s['rootCauseAgreement']} | {s['verdictChanges']} | {s['verdictDrops']} | {s['claimsVerified']} | "
        f"{s['claimsRejected']} | {s['claimsAdded']} | {s['claimsLost']} | {s['unsupportedClaims']} | {s['failedReplays']} | "
        f"{s['tokens']['recorded']} → {s['tokens']['replay']} | {s['costUsd']['recorded']} → {s['costUsd']['replay']} | "
        f"{s['medianLatencyMs']['recorded']} → {s['medianLatencyMs']['replay']} |",
        "", "## Runs", "",
        "| run | replay | status | root cause agrees | verdict | verified | rejected | added | lost | unsupported | "
        "tokens | latency ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        v = r["verdict"]
        lines.append(
            f"| {r['runId']} | {r['replayRunId']} | {r['status']} | {'yes' if r['rootCauseAgree'] else 'NO'} | "
            f"{v['left'] or '-'} → {v['right'] or '-'}{' (drop)' if v['dropped'] else ''} | {r['claims']['verified']} | "
            f"{r['claims']['rejected']} | {r['claims']['added']} | {r['claims']['lost']} | {r['unsupportedClaims']} | "
            f"{r['tokens']['recorded']} → {r['tokens']['replay']} | {r['latencyMs']['recorded']} → {r['latencyMs']['replay']} |")
    lost = [(r["runId"], c) for r in report["runs"] for c in r["claims"]["lostClaims"]]
    if lost:
        lines += ["", "## Lost claims", ""] + [f"- {run}: {claim}" for run, claim in lost]
    return "\n".join(lines) + "\n"


def write_report(report: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "regression.json", out_dir / "regression.md"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    md_path.write_text(markdown(report))
    return json_path, md_path
