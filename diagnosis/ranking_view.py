"""The localiser's view of a finished run, kept in its diagnosis beside what the answer established.

Framework-free. Whatever model wrote the answer (offline or OpenAI-compatible), the server runs the
localiser (``diagnosis.localisation``) over the run's own recorded successful tool outputs, the same
way the offline analyser reads them (``localise_results``: failed calls and log lines that read like
instructions to an AI are left out), and keeps:

- ``candidates``: the ranking, top ``MAX_CANDIDATES``, in the one shape that leaves the localiser
  (``Localisation.ranking``), bounded: a candidate whose name is no service name is left out (its rank
  stays, so a gap shows it), a kind outside the closed taxonomy is null, every reference names an
  invocation of this run and a JSON path the server can read;
- ``localisation``: ``{outcome, reason, subject, withoutData}``: the localiser's own outcome, why it
  is undetermined, the services asked about and those with no telemetry;
- ``agreement``: whether ``rootCause.service`` is the top root of the stored ``candidates`` (the first
  one nothing explains): ``agrees`` | ``differs`` | ``no_root_cause`` (the diagnosis names no root-cause service,
  whatever the ranking) | ``no_ranking`` (the localiser found no candidate).

The ranking is a hint, never evidence: nothing here changes the verdict, the root cause or a claim.
Every value is deterministic for the same recorded outputs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from diagnosis.contracts import INVOCATION_ID_RE
from diagnosis.jsonpath import JsonPathError, parse
from diagnosis.llm.offline.lexicon import services_in_question
from diagnosis.llm.offline.localised import localise_results
from diagnosis.localisation.outcome import Localisation
from diagnosis.structured_diagnosis import CAUSE_KIND_IDS, service_name

MAX_CANDIDATES = 5
REFS_PER_CANDIDATE = 4
MAX_EXPLAINS = 10
MAX_RAW_PATH = 200
AGREEMENTS = ("agrees", "differs", "no_root_cause", "no_ranking")
LOCALISATION_OUTCOMES = ("root_cause", "undetermined", "nothing_wrong", "no_data")
REASON_CHARS = 64


def _raw_path(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > MAX_RAW_PATH:
        return None
    try:
        parse(value)
    except JsonPathError:
        return None
    return value


def bounded_candidates(ranking: Iterable[Mapping[str, Any]], invocations: Mapping[str, str]) -> list[dict[str, Any]]:
    """The ranking as stored: names that are service names, kinds of the taxonomy, references into this
    run (``invocations``: invocation id -> tool name) at readable paths, finite numbers."""
    out = []
    for item in ranking:
        service = service_name(item.get("service"))
        if service is None:
            continue
        onset, strength = item.get("onset"), item.get("strength")
        evidence = []
        for ref in item.get("evidence") or ():
            invocation, path = ref.get("invocationId"), _raw_path(ref.get("rawPath"))
            if isinstance(invocation, str) and INVOCATION_ID_RE.match(invocation) and path \
                    and invocations.get(invocation) == ref.get("tool"):
                evidence.append({"invocationId": invocation, "tool": ref["tool"], "rawPath": path})
        out.append({
            "rank": int(item.get("rank") or len(out) + 1),
            "service": service,
            "kind": item.get("kind") if item.get("kind") in CAUSE_KIND_IDS else None,
            "onset": float(onset) if isinstance(onset, (int, float)) and math.isfinite(onset) else None,
            "strength": float(strength) if isinstance(strength, (int, float)) and math.isfinite(strength) else 0.0,
            "explainedBy": service_name(item.get("explainedBy")),
            "explains": [s for s in (service_name(n) for n in item.get("explains") or ()) if s][:MAX_EXPLAINS],
            "evidence": evidence[:REFS_PER_CANDIDATE],
        })
    return out


def top_root(ranking: list[Mapping[str, Any]]) -> str | None:
    """The ranking's top root: the first candidate nothing explains (the first one when all are explained)."""
    roots = [c for c in ranking if not c.get("explainedBy")] or ranking
    return roots[0].get("service") if roots else None


def agreement(root_service: Any, ranking: list[Mapping[str, Any]]) -> str:
    if not isinstance(root_service, str) or not root_service:
        return "no_root_cause"
    if not ranking:
        return "no_ranking"
    return "agrees" if top_root(ranking) == root_service else "differs"


def localisation_summary(loc: Localisation) -> dict[str, Any]:
    names = lambda values: [s for s in (service_name(v) for v in values) if s][:MAX_CANDIDATES]  # noqa: E731
    reason = loc.reason if isinstance(loc.reason, str) and loc.reason.replace("_", "").isalnum() else ""
    return {"outcome": loc.outcome if loc.outcome in LOCALISATION_OUTCOMES else "undetermined",
            "reason": reason[:REASON_CHARS] or None, "subject": names(loc.subject), "withoutData": names(loc.without_data)}


def ranking_view(results: Iterable[Mapping[str, Any]], *, question: str, root_service: Any) -> dict[str, Any]:
    """``{candidates, localisation, agreement}`` of a run: its recorded tool results (dicts with
    invocation_id, tool_name, arguments, status, result), the services its question names, and the
    root-cause service its diagnosis established (or None)."""
    results = [r for r in results if isinstance(r, Mapping)]
    loc = localise_results(results, services_in_question(question))
    ranking = loc.ranking(limit=MAX_CANDIDATES, refs_per_candidate=REFS_PER_CANDIDATE)
    invocations = {str(r.get("invocation_id")): str(r.get("tool_name")) for r in results}
    candidates = bounded_candidates(ranking, invocations)
    # Judged on the candidates as stored and shown, so a reader can check it against them.
    return {"candidates": candidates, "localisation": localisation_summary(loc),
            "agreement": agreement(root_service, candidates)}


__all__ = ["AGREEMENTS", "LOCALISATION_OUTCOMES", "MAX_CANDIDATES", "agreement", "bounded_candidates",
           "ranking_view", "top_root"]
