"""`rank_root_causes`: the localiser's ranking over this run's earlier tool results, offered to a model as a hint.

The tool reads no backend. It runs the localiser (``diagnosis.localisation``) over the results the run's
tool box has recorded so far (successful calls of the evidence tools, as stored: redacted and capped),
through the entry the view of a finished run (``diagnosis.ranking_view``) and the offline analyser use
(``localise_results``), and returns the ranked candidates in the localiser's one shape (``Localisation.ranking``), each with the
invocation ids and JSON paths of the records that show it. It says where to look; it is never evidence:
the Gatekeeper refuses a citation of it (``ranking_not_evidence``), so a claim cites the records it names.

Framework-free, like the rest of the tools package.
"""

from __future__ import annotations

from typing import Any, Iterable

from diagnosis.contracts import RANKING_TOOL
from diagnosis.llm.offline.localised import localise_results

NOTE = "a hint: cite the records in evidence, never this result"
DEFAULT_LIMIT = 5
REFS_PER_CANDIDATE = 4

RANKING_SCHEMA: dict[str, Any] = {
    "description": "A HINT, never evidence: the deterministic ranking of likely root causes over the tool "
                   "results of this run so far (call the evidence tools first), each candidate with the "
                   "invocation ids and JSON paths of the records that show it. Claims must cite those "
                   "records, never this result: a citation of it is refused.",
    "parameters": {
        "type": "object",
        "properties": {
            "service": {"type": "string", "description": "The service the question is about (the symptom)."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": DEFAULT_LIMIT,
                      "description": "How many candidates to return."},
        },
        "additionalProperties": False,
    },
}


def rank_root_causes(earlier: Iterable[dict[str, Any]], arguments: dict[str, Any]) -> dict[str, Any]:
    """The ranking over ``earlier`` (the run's recorded results as ``ToolOutcome.to_dict()``), read through
    the one entry every caller of the localiser uses (``localise_results``: successful calls only, log lines
    that read like instructions to an AI left out); results of this tool are left out too, so a ranking
    never ranks an earlier ranking."""
    results = [r for r in earlier if r.get("tool_name") != RANKING_TOOL]
    subject = [arguments["service"]] if arguments.get("service") else []
    found = localise_results(results, subject)
    return {
        "outcome": found.outcome, "reason": found.reason, "subject": subject,
        "candidates": found.ranking(limit=arguments.get("limit", DEFAULT_LIMIT), refs_per_candidate=REFS_PER_CANDIDATE),
        "note": NOTE,
    }
