"""The run page's "Ranking (a hint, not evidence)" section: the localiser's candidates kept in the run's
diagnosis (diagnosis.ranking_view), each linked to the records that show it, and whether the diagnosis
agreed with the ranking.

The records a candidate cites are marked in their tool result as hints (``rendering.HINT_CSS``), never
as verified excerpts, so a link scrolls the record into view the way a citation does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from diagnosis.contracts import StructuredDiagnosis
from diagnosis.ranking_view import top_root
from traces.rendering import Highlight, record_highlight

AGREEMENT_TEXT = {
    "agrees": "The diagnosis agreed with the ranking: its root cause, {root}, is the ranking's top root.",
    "differs": "The diagnosis differs from the ranking: its root cause is {root}, the ranking's top root is {top}.",
    "no_root_cause": "The diagnosis named no root-cause service; the ranking's top root is {top}.",
    "no_ranking": "The localiser ranked no candidate; the diagnosis's root cause is {root}.",
}


@dataclass
class RecordLink:
    invocation_id: str
    tool: str
    raw_path: str
    in_run: bool
    mark: str  # the title of the hint mark in the result, which the link scrolls into view


@dataclass
class CandidateView:
    rank: int
    service: str
    kind: str | None
    onset: str  # ISO 8601 UTC, "" when unknown
    explained_by: str | None
    explains: list[str]
    records: list[RecordLink]


@dataclass
class RankingView:
    recorded: bool  # false for runs recorded before the ranking was kept
    candidates: list[CandidateView] = field(default_factory=list)
    agreement: str = ""
    agreement_text: str = ""
    outcome: str = ""
    reason: str = ""
    subject: list[str] = field(default_factory=list)
    without_data: list[str] = field(default_factory=list)


def mark_title(raw_path: str) -> str:
    return f"ranking: the record at {raw_path}"


def _onset(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return ""
    try:
        return datetime.fromtimestamp(float(value), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return ""


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def build_ranking(diagnosis: Any, invocations: Mapping[str, Any],
                  highlights: dict[str, list[Highlight]]) -> RankingView | None:
    """The section's view (None without a diagnosis); adds a hint mark for every record a candidate cites."""
    if not isinstance(diagnosis, Mapping):
        return None
    stored = StructuredDiagnosis.read(diagnosis)
    if not stored.ranked:
        return RankingView(recorded=False)
    raw = [c for c in stored.candidates if isinstance(c.get("service"), str)]
    marked: set[tuple[str, str]] = set()
    candidates = []
    for item in raw:
        records = []
        for ref in item.get("evidence") or ():
            if not isinstance(ref, Mapping) or not isinstance(ref.get("invocationId"), str):
                continue
            invocation, path = ref["invocationId"], str(ref.get("rawPath") or "")
            in_run = invocation in invocations
            highlight = record_highlight(path, mark_title(path)) if in_run else None
            if highlight is not None and (invocation, path) not in marked:
                marked.add((invocation, path))
                highlights.setdefault(invocation, []).append(highlight)
            records.append(RecordLink(invocation, str(ref.get("tool") or ""), path, in_run,
                                      highlight.label if highlight else ""))
        candidates.append(CandidateView(
            rank=item.get("rank") if isinstance(item.get("rank"), int) else len(candidates) + 1,
            service=item["service"], kind=item.get("kind") if isinstance(item.get("kind"), str) else None,
            onset=_onset(item.get("onset")),
            explained_by=item.get("explainedBy") if isinstance(item.get("explainedBy"), str) else None,
            explains=_names(item.get("explains")), records=records))
    root = stored.root_cause or {}
    agreement = stored.agreement if stored.agreement in AGREEMENT_TEXT else ""
    text = AGREEMENT_TEXT[agreement].format(root=root.get("service") or "—", top=top_root(raw) or "—") if agreement \
        else ""
    localisation = stored.localisation or {}
    return RankingView(
        recorded=True, candidates=candidates, agreement=agreement, agreement_text=text,
        outcome=str(localisation.get("outcome") or ""), reason=str(localisation.get("reason") or ""),
        subject=_names(localisation.get("subject")), without_data=_names(localisation.get("withoutData")))
