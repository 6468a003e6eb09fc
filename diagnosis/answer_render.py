"""The server-side renderer of answers and reports: only verified claims become sentences.

Framework-free (stdlib plus the project's own framework-free helpers). The composer (a model) only
*chooses and orders* verified claims and proposes next steps (an ``answer_plan_v1``); this module
writes every word the reader sees:

- each factual sentence is a verified claim's statement, followed by its quoted excerpt(s) and
  canonical citation(s) ``[inv-xxxxxxxx]``;
- a claim id the Gatekeeper did not verify cannot be rendered (it is dropped and audited);
- a claim whose only evidence is runbooks or cases is rendered as "a similar past incident or runbook
  says …", never as this incident's root cause;
- next steps either are verified runbook/case claims or go to the labelled *suggestions* section,
  which the API also returns as its own field;
- every rendered line goes through the citation scan of ``diagnosis.model_text``: a line carrying an
  id-like token that is not a canonical verified citation is removed and audited.

The words of one claim (statement, quoted excerpts, citations) and a suggestion made safe are
``diagnosis.claim_sentences``'s, shared with the alert report's renderer; they are also importable from here.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from diagnosis import i18n
from diagnosis.advice import destructive_commands, is_destructive
from diagnosis.claim_sentences import (
    MAX_EXCERPTS_PER_CLAIM, claim_sentence, claim_text, clean_statement, clean_suggestion, excerpt_text,
    knowledge_only, plain_statement,
)
from diagnosis.contracts import ANSWER_PLAN_VERSION
from diagnosis.markdown_text import md_neutralise, plain_line
from diagnosis.model_text import cap_text, foreign_citations, scrub_sentences
from diagnosis.redaction import redact_text
from diagnosis.structured_diagnosis import (
    RecordsOf, choice_read, claim_id_ok, derive_diagnosis, empty_diagnosis, no_records,
)

SECTIONS = ("root_cause", "evidence", "impact", "timeline")
MAX_SUGGESTIONS = 5
MAX_CLAIMS_PER_SECTION = 12

# The answer's wording: English msgids, translated by diagnosis.i18n (the Chinese is in diagnosis/locale).
# A msgid a line, as alert_render and the verifier declare theirs: alike in shape only, each module owns the
# texts it writes (one shared list would tie the answer's wording to the alert report's).
INTRO_PASS = i18n.mark("Every sentence below is a claim the Gatekeeper verified against this run's own tool output; "
                       "the quoted excerpt and its citation follow each sentence.")
INTRO_LOW = i18n.mark("Confidence is limited. Every sentence below is a verified claim followed by its quoted evidence.")
INTRO_NONE = i18n.mark("No root cause could be verified from this run's tool output.")
ROOT_CAUSE_HEADING = i18n.mark("**Root cause**")
LIKELY_CAUSE_HEADING = i18n.mark("**Likely cause** (confidence limited)")
CHECKED_HEADING = i18n.mark("**What the tool output showed**")
SECTION_HEADINGS = {
    "evidence": i18n.mark("**Evidence**"),
    "impact": i18n.mark("**Impact**"),
    "timeline": i18n.mark("**Timeline**"),
    "next_steps": i18n.mark("**Next steps** (quoted from verified runbooks and past cases)"),
}
SUGGESTIONS_HEADING = i18n.mark("**Suggestions (not checked against evidence)**")
DESTRUCTIVE_WARNING = i18n.mark(
    "**Warning: destructive command — not verified; check it and its target before running.** ")
NOTHING_VERIFIED = i18n.mark("No claim passed verification.")
UNDETERMINED = i18n.mark(
    "**Cause not established.** The evidence shows a problem, but this run could not establish its cause. "
    "Check next: the logs of the services named below around the onset, recent deploys and config changes, "
    "and the dependencies their error lines name.")
LIMITS_HEADING = i18n.mark("**Limitations**")
UNCHECKED = i18n.mark("Not checked: `{tool}` failed in this run, so what the {kind} would confirm or refute is unknown.")
# What a failed tool would have shown; the tool is the msgctxt (its alerts read as "metrics" in English only).
UNCHECKED_KINDS = {
    "query_logs": i18n.mark("logs", context="query_logs"),
    "query_metrics": i18n.mark("metrics", context="query_metrics"),
    "query_alerts": i18n.mark("metrics", context="query_alerts"),
    "lookup_knowledge": i18n.mark("runbooks", context="lookup_knowledge"),
}
OFFLINE_LABEL = i18n.mark("_Offline analyser (rule-based, no LLM)_")
OFFLINE_LIMIT = i18n.mark(
    "Written by the offline analyser (no LLM): it localises the fault from deviations against each "
    "signal's baseline, their onset order and the dependencies the records name, and says "
    "undetermined when they do not settle it.")
SIMPLE_LABEL = i18n.mark(
    "_General answer — not checked against evidence (no diagnosis was run). "
    "Ask in diagnosis mode for an answer built from verified tool output._")
SIMPLE_WITHHELD = i18n.mark("The answer was withheld because it repeated the service's instructions.")


@dataclass
class RenderedAnswer:
    markdown: str
    suggestions: list[str] = field(default_factory=list)
    sections: dict[str, list[str]] = field(default_factory=dict)
    cited_invocation_ids: list[str] = field(default_factory=list)
    knowledge_only_root: bool = False
    removed: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: dict[str, Any] = field(default_factory=lambda: empty_diagnosis())
    advice: list[dict[str, Any]] = field(default_factory=list)

    def audit(self) -> dict[str, Any]:
        return {
            "renderer": "answer_render_v1", "sections": self.sections, "suggestions": self.suggestions,
            "advice": self.advice,
            "cited_invocation_ids": self.cited_invocation_ids, "knowledge_only_root": self.knowledge_only_root,
            "removed": self.removed, "diagnosis": self.diagnosis,
        }


def _plan_ids(plan: Mapping[str, Any], key: str) -> list[str]:
    value = plan.get(key) if isinstance(plan, Mapping) else None
    return [v for v in value if isinstance(v, str)][:MAX_CLAIMS_PER_SECTION] if isinstance(value, list) else []


def render_answer(
    *,
    plan: Mapping[str, Any],
    claims: Iterable[Mapping[str, Any]],
    verdict: str | None,
    language: str,
    exclude: Collection[str] = (),
    offline: bool = False,
    prompt_echoed=None,
    suggestions: Iterable[Any] | None = None,
    quotes_only: bool = False,
    failed_tools: Iterable[str] = (),
    records_of: RecordsOf = no_records,
) -> RenderedAnswer:
    """The Markdown answer: verified claims in the composer's order, with their quotes and citations.

    ``claims`` are the Gatekeeper's projection (verified claims with only their verified bindings);
    ids in ``plan`` that are not among them are dropped and recorded in ``removed``. With a PASS or
    LOW_CONFID verdict, verified claims the plan leaves out are still shown as evidence; without one
    (REJECT), only what the plan names outside the root cause is shown. ``quotes_only`` (the degraded
    fallback answer, whose verdict is withheld) shows every verified excerpt with its citation and no
    statement at all. ``records_of(claim)`` reads the records a claim cites (for the structured
    diagnosis: diagnosis/structured_diagnosis.py).
    """
    page = _AnswerPage(i18n.answer_language(language),
                       {str(c.get("claim_id")): c for c in claims if isinstance(c, Mapping) and c.get("evidence")})
    concluded = verdict in ("PASS", "LOW_CONFID")
    choice = choice_read(plan.get("diagnosis"))
    sections, free_steps, flagged = _arrange(page, plan, exclude, concluded, undetermined=choice.outcome == "undetermined")
    knowledge_root = bool(sections["root_cause"]) and all(knowledge_only(page.verified[c]) for c in sections["root_cause"])
    if offline:
        page.lines += [page.say(OFFLINE_LABEL), ""]
    if quotes_only:
        sections = {key: [] for key in sections}
        _quote_every_excerpt(page, flagged)
    else:
        _write_root_cause(page, sections, concluded=concluded, low=verdict != "PASS" or knowledge_root)
        _write_sections(page, sections, concluded=concluded)
    if not page.verified or not page.cited:
        page.lines += ["", page.say(NOTHING_VERIFIED)]
    diagnosis = derive_diagnosis(choice=choice, roots=sections["root_cause"], verified=page.verified,
                                 shown={c for ids in sections.values() for c in ids},
                                 concluded=concluded and not quotes_only, records_of=records_of,
                                 summary=plain_statement, knowledge_root=knowledge_root)
    # "The evidence shows a problem": only when a verified symptom shows one. Runbooks and cases alone show none
    # (a how-to answer quotes only them), and neither does a service no backend returned anything for.
    if diagnosis["undetermined"] and diagnosis["symptoms"] and page.verified and not quotes_only and not all(
            knowledge_only(claim) for claim in page.verified.values()):
        page.lines += ["", page.say(UNDETERMINED)]
    page.lines += _limitations(failed_tools, page.language)
    kept_suggestions, advice = _advice(page, sections, flagged, [*free_steps, *(suggestions or ())], prompt_echoed)
    if offline:
        page.lines += ["", f"_{page.say(OFFLINE_LIMIT)}_"]
    markdown = re.sub(r"\n{3,}", "\n\n", "\n".join(page.lines)).strip() + "\n"
    return RenderedAnswer(
        markdown=markdown, suggestions=kept_suggestions, advice=advice,
        sections={k: list(v) for k, v in sections.items()},
        cited_invocation_ids=sorted(set(page.cited)), knowledge_only_root=knowledge_root, removed=page.removed,
        diagnosis=diagnosis,
    )


@dataclass
class _AnswerPage:
    """One answer being written: the verified claims it may quote, its lines, the ids it cites, and what
    was removed on the way (the audit)."""

    language: str
    verified: dict[str, Mapping[str, Any]]
    lines: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.verified_ids = {str(b.get("source_invocation_id")) for c in self.verified.values() for b in c["evidence"]
                             if isinstance(b, Mapping)}

    def say(self, message: str, **params: Any) -> str:
        return i18n.text(message, self.language, **params)

    def emit(self, claim_id: str, *, similar: bool = False, knowledge: bool = False) -> None:
        """A claim's sentence as a bullet, unless it carries a citation this run did not verify."""
        sentence, ids = claim_sentence(self.verified[claim_id], self.language, similar=similar, knowledge=knowledge)
        bad = foreign_citations(sentence, self.verified_ids)
        if bad:
            self.removed.append({"where": "render", "claim_id": claim_id, "reason": "foreign_citation",
                                 "tokens": [cap_text(t, 40) for t in bad[:5]]})
            return
        self.lines.append(f"- {sentence}")
        self.cited.extend(ids)


def _arrange(page: _AnswerPage, plan: Mapping[str, Any], exclude: Collection[str], concluded: bool, *,
             undetermined: bool) -> tuple[dict[str, list[str]], list[Any], list[str]]:
    """The claim ids of each section, the plan's free-text steps, and the destructive steps held back."""
    sections, free_steps = _place_claims(page, plan, exclude, concluded)
    flagged = _hold_back_destructive(page, sections)
    if undetermined and sections["root_cause"]:
        # The composer could not establish a cause: its candidate is shown as evidence, never as the cause.
        sections["evidence"] = sections["root_cause"] + sections["evidence"]
        sections["root_cause"] = []
    return sections, free_steps, flagged


def _place_claims(page: _AnswerPage, plan: Mapping[str, Any], exclude: Collection[str],
                  concluded: bool) -> tuple[dict[str, list[str]], list[Any]]:
    """The claim ids of each section (each claim once, verified ones only) and the plan's free-text steps."""
    placed: set[str] = set()

    def take(ids: list[str], where: str) -> list[str]:
        kept = []
        for claim_id in ids:
            if claim_id not in page.verified:
                page.removed.append({"where": where, "claim_id": cap_text(claim_id, 80), "reason": "not_verified"})
            elif claim_id in exclude:
                page.removed.append({"where": where, "claim_id": claim_id, "reason": "verifier_unsupported"})
            elif claim_id not in placed:
                placed.add(claim_id)
                kept.append(claim_id)
        return kept

    sections = {key: take(_plan_ids(plan, key), key) for key in SECTIONS}
    step_ids, free_steps = [], []
    for step in (plan.get("next_steps") if isinstance(plan.get("next_steps"), list) else [])[:MAX_CLAIMS_PER_SECTION]:
        if isinstance(step, Mapping) and isinstance(step.get("claim_id"), str):
            step_ids.append(step["claim_id"])
        elif isinstance(step, Mapping) and "text" in step:
            free_steps.append(step["text"])
        elif isinstance(step, str):
            free_steps.append(step)
    steps = take(step_ids, "next_steps")
    # A cited next step is quoted knowledge; one resting on observations is evidence, not advice.
    sections["evidence"] += [c for c in steps if not knowledge_only(page.verified[c])]
    sections["next_steps"] = [c for c in steps if knowledge_only(page.verified[c])]
    if concluded:
        # Nothing verified is hidden: claims the composer left out are shown as evidence.
        sections["evidence"] += [c for c in page.verified if c not in placed and c not in exclude]
    return sections, free_steps


def _hold_back_destructive(page: _AnswerPage, sections: dict[str, list[str]]) -> list[str]:
    """A runbook or case step carrying a destructive command is never served as verified: it leaves its
    section for the labelled suggestions, with a warning. Returns the claim ids held back."""
    flagged: list[str] = []
    for key in sections:
        keep = []
        for claim_id in sections[key]:
            claim = page.verified[claim_id]
            if knowledge_only(claim) and is_destructive(claim_text(claim)):
                flagged.append(claim_id)
                page.removed.append({"where": key, "claim_id": claim_id, "reason": "destructive_command",
                                     "commands": destructive_commands(claim_text(claim))[:5]})
            else:
                keep.append(claim_id)
        sections[key] = keep
    return flagged


def _quote_every_excerpt(page: _AnswerPage, flagged: list[str]) -> None:
    """The degraded answer's body: every verified excerpt with its citation, no statement."""
    page.lines += [page.say(CHECKED_HEADING)]
    for claim in page.verified.values():
        if str(claim.get("claim_id")) in flagged:
            continue  # a destructive runbook step is not quoted as checked output either
        for b in [b for b in claim["evidence"] if isinstance(b, Mapping)][:MAX_EXCERPTS_PER_CLAIM]:
            line = f"- “{excerpt_text(b.get('evidence_excerpt', ''))}” [{b.get('source_invocation_id')}]"
            if foreign_citations(line, page.verified_ids):
                page.removed.append({"where": "render", "claim_id": claim.get("claim_id"), "reason": "foreign_citation"})
                continue
            page.lines.append(line)
            page.cited.append(str(b.get("source_invocation_id")))


def _write_root_cause(page: _AnswerPage, sections: dict[str, list[str]], *, concluded: bool, low: bool) -> None:
    """The introduction and the root cause, shown only under a verdict (else removed from the section)."""
    roots = sections["root_cause"]
    if roots and concluded:
        page.lines += [page.say(INTRO_LOW if low else INTRO_PASS), "",
                       page.say(LIKELY_CAUSE_HEADING if low else ROOT_CAUSE_HEADING)]
        for claim_id in roots:
            page.emit(claim_id, similar=knowledge_only(page.verified[claim_id]))
        return
    page.lines.append(page.say(INTRO_PASS if concluded and page.verified else INTRO_NONE))
    for claim_id in roots:  # no verdict backs a root cause: it is not shown
        page.removed.append({"where": "root_cause", "claim_id": claim_id, "reason": "no_verdict_for_root_cause"})
    sections["root_cause"] = []


def _write_sections(page: _AnswerPage, sections: dict[str, list[str]], *, concluded: bool) -> None:
    """Evidence (or, without a verdict, what the tool output showed), impact, timeline and next steps."""
    for key, heading in SECTION_HEADINGS.items():
        ids = sections.get(key) or []
        if not ids:
            continue
        page.lines += ["", page.say(heading if key != "evidence" or concluded else CHECKED_HEADING)]
        for claim_id in ids:
            page.emit(claim_id, knowledge=(key != "next_steps" and knowledge_only(page.verified[claim_id])))


def _limitations(failed_tools: Iterable[str], language: str) -> list[str]:
    """What this run could not check because a telemetry or knowledge tool failed."""
    unchecked = [t for t in dict.fromkeys(failed_tools) if t in UNCHECKED_KINDS]
    if not unchecked:
        return []
    return ["", i18n.text(LIMITS_HEADING, language)] + [
        f"- {i18n.text(UNCHECKED, language, tool=t, kind=i18n.text(UNCHECKED_KINDS[t], language, context=t))}"
        for t in unchecked]


def _advice(page: _AnswerPage, sections: dict[str, list[str]], flagged: list[str], free: list[Any],
            prompt_echoed) -> tuple[list[str], list[dict[str, Any]]]:
    """The verified next steps, then the labelled suggestions: held-back destructive steps first (with a
    warning), then the composer's free-text steps and the caller's suggestions. Writes the suggestions
    section and returns (suggestions, advice)."""
    advice: list[dict[str, Any]] = [
        {"text": clean_statement(page.verified[c].get("statement", "")), "verified": True, "destructive": False,
         "claimId": c} for c in sections.get("next_steps", [])]
    kept: list[str] = []
    candidates = [(page.verified[c].get("statement", ""), c) for c in flagged] + [(raw, None) for raw in free]
    for raw, claim_id in candidates:
        if len(kept) >= MAX_SUGGESTIONS:
            break
        cleaned, why = clean_suggestion(raw, prompt_echoed)
        if cleaned is None:
            page.removed.append({"where": "suggestions", "reason": why, "text": cap_text(plain_line(raw), 120)})
            continue
        destructive = claim_id is not None or is_destructive(raw)
        shown = f"{page.say(DESTRUCTIVE_WARNING)}{cleaned}" if destructive else cleaned
        if shown not in kept:
            kept.append(shown)
            advice.append({"text": shown, "verified": False, "destructive": destructive, "claimId": claim_id})
    if kept:
        page.lines += ["", page.say(SUGGESTIONS_HEADING)] + [f"- {s}" for s in kept]
    return kept, advice


def validate_answer_plan(output: Any) -> dict[str, Any]:
    """The composer's structure, shape-checked; ``None`` entries and junk are dropped, never rendered.

    Raises ValueError when the output is not an ``answer_plan_v1`` object.
    """
    if not isinstance(output, Mapping) or output.get("version") != ANSWER_PLAN_VERSION:
        raise ValueError(f"composer output must be an {ANSWER_PLAN_VERSION} object")
    plan: dict[str, Any] = {"version": ANSWER_PLAN_VERSION}
    for key in SECTIONS:
        value = output.get(key, [])
        if not isinstance(value, list):
            raise ValueError(f"'{key}' must be a list of claim ids")
        plan[key] = [v for v in value if claim_id_ok(v)][:MAX_CLAIMS_PER_SECTION]
    steps = output.get("next_steps", [])
    if not isinstance(steps, list):
        raise ValueError("'next_steps' must be a list")
    plan["next_steps"] = []
    for step in steps[:MAX_CLAIMS_PER_SECTION]:
        if isinstance(step, Mapping) and isinstance(step.get("claim_id"), str):
            if claim_id_ok(step["claim_id"]):
                plan["next_steps"].append({"claim_id": step["claim_id"]})
        elif isinstance(step, Mapping) and isinstance(step.get("text"), str):
            plan["next_steps"].append({"text": cap_text(step["text"], 1000)})
        elif isinstance(step, str):
            plan["next_steps"].append({"text": cap_text(step, 1000)})
    if isinstance(output.get("diagnosis"), Mapping):
        plan["diagnosis"] = choice_read(output["diagnosis"]).to_dict()
    return plan


def render_simple_answer(content: Any, *, language: str, prompt_echoed=None) -> tuple[str, list[dict[str, Any]]]:
    """A SIMPLE (ungated) answer as served: visibly labelled as not checked against evidence, with
    every sentence carrying a citation-like token removed (nothing may look verified) and secrets masked."""
    language = i18n.answer_language(language)
    body = md_neutralise(redact_text(str(content or ""))).strip()
    removed: list[dict[str, Any]] = []
    if prompt_echoed is not None and prompt_echoed(body):
        removed.append({"where": "simple", "reason": "prompt_echo"})
        body = i18n.text(SIMPLE_WITHHELD, language)
    body, scrubbed = scrub_sentences(body, ())
    removed += [{"where": "simple", "reason": "citation_like_token", **item} for item in scrubbed]
    return f"{i18n.text(SIMPLE_LABEL, language)}\n\n{body.strip()}\n", removed
