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
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from diagnosis.advice import destructive_commands, is_destructive
from diagnosis.contracts import ANSWER_PLAN_VERSION
from diagnosis.markdown_text import md_inline, md_neutralise, plain_line
from diagnosis.model_text import cap_text, foreign_citations, id_like_tokens, scrub_sentences
from diagnosis.redaction import redact_text
from diagnosis.structured_diagnosis import (
    RecordsOf, choice_read, claim_id_ok, derive_diagnosis, empty_diagnosis, no_records,
)

SECTIONS = ("root_cause", "evidence", "impact", "timeline")
KNOWLEDGE_TOOLS = frozenset({"lookup_knowledge"})
MAX_STATEMENT_CHARS = 400
MAX_EXCERPT_CHARS = 240
MAX_EXCERPTS_PER_CLAIM = 3
MAX_SUGGESTIONS = 5
MAX_SUGGESTION_CHARS = 300
MAX_CLAIMS_PER_SECTION = 12

TEXT = {
    "intro_pass": {
        "en": "Every sentence below is a claim the Gatekeeper verified against this run's own tool output; "
              "the quoted excerpt and its citation follow each sentence.",
        "zh": "以下每一句都是经过证据网关（Gatekeeper）针对本次运行工具输出校验的结论，句后附有引用的原文摘录和出处。",
    },
    "intro_low": {
        "en": "Confidence is limited. Every sentence below is a verified claim followed by its quoted evidence.",
        "zh": "置信度有限。以下每一句都是通过校验的结论，句后附有引用的原文摘录。",
    },
    "intro_none": {
        "en": "No root cause could be verified from this run's tool output.",
        "zh": "本次运行的工具输出未能验证出根因。",
    },
    "root_cause": {"en": "**Root cause**", "zh": "**根因**"},
    "likely_cause": {"en": "**Likely cause** (confidence limited)", "zh": "**可能的原因**（置信度有限）"},
    "evidence": {"en": "**Evidence**", "zh": "**证据**"},
    "impact": {"en": "**Impact**", "zh": "**影响**"},
    "timeline": {"en": "**Timeline**", "zh": "**时间线**"},
    "checked": {"en": "**What the tool output showed**", "zh": "**工具输出显示的情况**"},
    "next_steps": {"en": "**Next steps** (quoted from verified runbooks and past cases)",
                   "zh": "**下一步**（引自已校验的运维手册和历史案例）"},
    "suggestions": {"en": "**Suggestions (not checked against evidence)**", "zh": "**建议（未经证据校验）**"},
    "destructive": {"en": "**Warning: destructive command — not verified; check it and its target before running.** ",
                    "zh": "**警告：破坏性命令——未经校验，执行前请核实命令及其作用对象。** "},
    "similar": {"en": "A similar past incident or runbook describes: ", "zh": "类似的历史故障或运维手册记载："},
    "knowledge": {"en": "From the knowledge base (not this run's telemetry): ", "zh": "来自知识库（并非本次运行的遥测数据）："},
    "nothing_verified": {"en": "No claim passed verification.", "zh": "没有结论通过校验。"},
    "simple_label": {
        "en": "_General answer — not checked against evidence (no diagnosis was run). "
              "Ask in diagnosis mode for an answer built from verified tool output._",
        "zh": "_一般性回答——未经证据校验（未运行诊断）。如需基于已校验工具输出的回答，请使用诊断模式提问。_",
    },
    "simple_withheld": {
        "en": "The answer was withheld because it repeated the service's instructions.",
        "zh": "该回答因复述了系统指令而被隐去。",
    },
    "undetermined": {
        "en": "**Cause not established.** The evidence shows a problem, but this run could not establish its cause. "
              "Check next: the logs of the services named below around the onset, recent deploys and config changes, "
              "and the dependencies their error lines name.",
        "zh": "**未能确定原因。** 证据显示存在问题，但本次运行未能确定其原因。下一步请检查：下列服务在问题开始前后的日志、"
              "最近的发布与配置变更，以及错误日志中提到的依赖。",
    },
    "limits": {"en": "**Limitations**", "zh": "**局限性**"},
    "unchecked": {"en": "Not checked: `{tool}` failed in this run, so what the {kind} would confirm or refute is unknown.",
                  "zh": "未能检查：本次运行中 `{tool}` 调用失败，{kind}能否证实或否定上述结论尚不可知。"},
    "offline": {"en": "_Offline analyser (rule-based, no LLM)_", "zh": "_离线分析器（基于规则，未使用大模型）_"},
    "offline_limit": {
        "en": "Written by the offline analyser (no LLM): it localises the fault from deviations against each "
              "signal's baseline, their onset order and the dependencies the records name, and says "
              "undetermined when they do not settle it.",
        "zh": "本回答由离线分析器生成（未使用大模型）：它根据各信号相对基线的偏离、出现先后以及记录中提到的依赖来定位故障，无法确定时会如实说明。",
    },
}



def text(key: str, language: str) -> str:
    return TEXT[key]["zh" if language == "zh" else "en"]


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


def _flat(value: Any) -> str:
    return plain_line(value)


def plain_statement(value: Any) -> str:
    """A claim statement as plain text (for JSON fields): one line, secrets masked, capped."""
    return cap_text(redact_text(plain_line(value)), MAX_STATEMENT_CHARS)


def clean_statement(value: Any) -> str:
    """A claim statement as inert inline Markdown (diagnosis.markdown_text)."""
    return md_inline(plain_statement(value))


def _excerpt(value: Any) -> str:
    flat = plain_line(value)
    if len(flat) > MAX_EXCERPT_CHARS:
        flat = flat[:MAX_EXCERPT_CHARS].rstrip() + "…"
    return md_inline(redact_text(flat))


def claim_text(claim: Mapping[str, Any]) -> str:
    """A claim's statement and its quoted excerpts, as one text (what a reader would act on)."""
    excerpts = [str(b.get("evidence_excerpt", "")) for b in claim.get("evidence") or () if isinstance(b, Mapping)]
    return " \n".join([str(claim.get("statement", "")), *excerpts])


def knowledge_only(claim: Mapping[str, Any]) -> bool:
    tools = {str(b.get("tool_name")) for b in claim.get("evidence") or () if isinstance(b, Mapping)}
    return bool(tools) and tools <= KNOWLEDGE_TOOLS


def claim_sentence(claim: Mapping[str, Any], language: str, *, similar: bool = False,
                   knowledge: bool = False) -> tuple[str, list[str]]:
    """``statement — “excerpt” [inv-…]; “excerpt” [inv-…]`` and the invocation ids it cites."""
    statement = clean_statement(claim.get("statement", ""))
    quotes, ids = [], []
    for b in [b for b in claim.get("evidence") or () if isinstance(b, Mapping)][:MAX_EXCERPTS_PER_CLAIM]:
        invocation_id = str(b.get("source_invocation_id"))
        quotes.append(f"“{_excerpt(b.get('evidence_excerpt', ''))}” [{invocation_id}]")
        ids.append(invocation_id)
    prefix = text("similar", language) if similar else text("knowledge", language) if knowledge else ""
    return f"{prefix}{statement} — {'; '.join(quotes)}", ids


def _plan_ids(plan: Mapping[str, Any], key: str) -> list[str]:
    value = plan.get(key) if isinstance(plan, Mapping) else None
    return [v for v in value if isinstance(v, str)][:MAX_CLAIMS_PER_SECTION] if isinstance(value, list) else []


def clean_suggestion(value: Any, prompt_echoed=None) -> tuple[str | None, str | None]:
    """(text, None) for a usable suggestion, else (None, why it was dropped)."""
    flat = _flat(value)
    if not flat:
        return None, "empty"
    if id_like_tokens(flat):
        return None, "citation_like_token"
    if prompt_echoed is not None and prompt_echoed(flat):
        return None, "prompt_echo"
    return md_inline(cap_text(redact_text(flat), MAX_SUGGESTION_CHARS)), None


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
    language = "zh" if language == "zh" else "en"
    verified = {str(c.get("claim_id")): c for c in claims if isinstance(c, Mapping) and c.get("evidence")}
    verified_ids = {str(b.get("source_invocation_id")) for c in verified.values() for b in c["evidence"]
                    if isinstance(b, Mapping)}
    removed: list[dict[str, Any]] = []
    placed: set[str] = set()
    sections: dict[str, list[str]] = {}

    def take(ids: list[str], where: str) -> list[str]:
        kept = []
        for claim_id in ids:
            if claim_id not in verified:
                removed.append({"where": where, "claim_id": cap_text(claim_id, 80), "reason": "not_verified"})
            elif claim_id in exclude:
                removed.append({"where": where, "claim_id": claim_id, "reason": "verifier_unsupported"})
            elif claim_id not in placed:
                placed.add(claim_id)
                kept.append(claim_id)
        return kept

    for key in SECTIONS:
        sections[key] = take(_plan_ids(plan, key), key)
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
    sections["evidence"] += [c for c in steps if not knowledge_only(verified[c])]
    sections["next_steps"] = [c for c in steps if knowledge_only(verified[c])]
    concluded = verdict in ("PASS", "LOW_CONFID")
    if concluded:
        # Nothing verified is hidden: claims the composer left out are shown as evidence.
        sections["evidence"] += [c for c in verified if c not in placed and c not in exclude]
        placed.update(sections["evidence"])

    # A runbook or case step carrying a destructive command is never served as verified: it leaves its
    # section for the labelled suggestions, with a warning.
    flagged: list[str] = []
    for key in sections:
        keep = []
        for claim_id in sections[key]:
            claim = verified[claim_id]
            if knowledge_only(claim) and is_destructive(claim_text(claim)):
                flagged.append(claim_id)
                removed.append({"where": key, "claim_id": claim_id, "reason": "destructive_command",
                                "commands": destructive_commands(claim_text(claim))[:5]})
            else:
                keep.append(claim_id)
        sections[key] = keep

    choice = choice_read(plan.get("diagnosis"))
    if choice.outcome == "undetermined" and sections["root_cause"]:
        # The composer could not establish a cause: its candidate is shown as evidence, never as the cause.
        sections["evidence"] = sections["root_cause"] + sections["evidence"]
        sections["root_cause"] = []
    roots = sections["root_cause"]
    knowledge_root = bool(roots) and all(knowledge_only(verified[c]) for c in roots)
    lines: list[str] = []
    cited: list[str] = []

    def emit(claim_id: str, *, similar: bool = False, knowledge: bool = False, bullet: str = "- ") -> None:
        sentence, ids = claim_sentence(verified[claim_id], language, similar=similar, knowledge=knowledge)
        bad = foreign_citations(sentence, verified_ids)
        if bad:
            removed.append({"where": "render", "claim_id": claim_id, "reason": "foreign_citation",
                            "tokens": [cap_text(t, 40) for t in bad[:5]]})
            return
        lines.append(f"{bullet}{sentence}")
        cited.extend(ids)

    if offline:
        lines += [text("offline", language), ""]
    low = verdict != "PASS" or knowledge_root
    if quotes_only:
        sections = {key: [] for key in sections}
        lines += [text("checked", language)]
        for claim in verified.values():
            if str(claim.get("claim_id")) in flagged:
                continue  # a destructive runbook step is not quoted as checked output either
            for b in [b for b in claim["evidence"] if isinstance(b, Mapping)][:MAX_EXCERPTS_PER_CLAIM]:
                line = f"- “{_excerpt(b.get('evidence_excerpt', ''))}” [{b.get('source_invocation_id')}]"
                if foreign_citations(line, verified_ids):
                    removed.append({"where": "render", "claim_id": claim.get("claim_id"), "reason": "foreign_citation"})
                    continue
                lines.append(line)
                cited.append(str(b.get("source_invocation_id")))
    elif roots and concluded:
        lines += [text("intro_low" if low else "intro_pass", language), "",
                  text("likely_cause" if low else "root_cause", language)]
        for claim_id in roots:
            emit(claim_id, similar=knowledge_only(verified[claim_id]))
    else:
        lines.append(text("intro_pass", language) if concluded and verified else text("intro_none", language))
        for claim_id in roots:  # no verdict backs a root cause: it is not shown
            removed.append({"where": "root_cause", "claim_id": claim_id, "reason": "no_verdict_for_root_cause"})
        sections["root_cause"] = roots = []
    headings = {"evidence": "evidence" if verdict in ("PASS", "LOW_CONFID") else "checked",
                "impact": "impact", "timeline": "timeline", "next_steps": "next_steps"}
    for key, heading in headings.items():
        ids = [] if quotes_only else sections.get(key) or []
        if not ids:
            continue
        lines += ["", text(heading, language)]
        for claim_id in ids:
            emit(claim_id, knowledge=(key != "next_steps" and knowledge_only(verified[claim_id])))
    if not verified or not cited:
        lines += ["", text("nothing_verified", language)]
    shown = {c for key in sections for c in sections[key]}
    diagnosis = derive_diagnosis(choice=choice, roots=roots if not quotes_only else [], shown=shown,
                                 verified=verified, concluded=concluded and not quotes_only, records_of=records_of,
                                 summary=plain_statement, knowledge_root=knowledge_root)
    if diagnosis["undetermined"] and verified and not quotes_only:
        lines += ["", text("undetermined", language)]

    kinds = {"query_logs": ("logs", "日志"), "query_metrics": ("metrics", "指标"), "query_alerts": ("metrics", "告警"),
             "lookup_knowledge": ("runbooks", "运维手册")}
    unchecked = [t for t in dict.fromkeys(failed_tools) if t in kinds]
    if unchecked:
        lines += ["", text("limits", language)]
        lines += [f"- {text('unchecked', language).format(tool=t, kind=kinds[t][language == 'zh'])}" for t in unchecked]

    advice: list[dict[str, Any]] = [
        {"text": clean_statement(verified[c].get("statement", "")), "verified": True, "destructive": False, "claimId": c}
        for c in sections.get("next_steps", []) if not quotes_only]
    kept_suggestions: list[str] = []
    candidates = [(verified[c].get("statement", ""), c) for c in flagged] + \
        [(raw, None) for raw in list(free_steps) + list(suggestions or ())]
    for raw, claim_id in candidates:
        if len(kept_suggestions) >= MAX_SUGGESTIONS:
            break
        cleaned, why = clean_suggestion(raw, prompt_echoed)
        if cleaned is None:
            removed.append({"where": "suggestions", "reason": why, "text": cap_text(_flat(raw), 120)})
            continue
        destructive = claim_id is not None or is_destructive(raw)
        shown = f"{text('destructive', language)}{cleaned}" if destructive else cleaned
        if shown not in kept_suggestions:
            kept_suggestions.append(shown)
            advice.append({"text": shown, "verified": False, "destructive": destructive, "claimId": claim_id})
    if kept_suggestions:
        lines += ["", text("suggestions", language)] + [f"- {s}" for s in kept_suggestions]
    if offline:
        lines += ["", f"_{text('offline_limit', language)}_"]
    markdown = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"
    return RenderedAnswer(
        markdown=markdown, suggestions=kept_suggestions, advice=advice,
        sections={k: list(v) for k, v in sections.items()},
        cited_invocation_ids=sorted(set(cited)), knowledge_only_root=knowledge_root, removed=removed,
        diagnosis=diagnosis,
    )


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
    language = "zh" if language == "zh" else "en"
    body = md_neutralise(redact_text(str(content or ""))).strip()
    removed: list[dict[str, Any]] = []
    if prompt_echoed is not None and prompt_echoed(body):
        removed.append({"where": "simple", "reason": "prompt_echo"})
        body = text("simple_withheld", language)
    body, scrubbed = scrub_sentences(body, ())
    removed += [{"where": "simple", "reason": "citation_like_token", **item} for item in scrubbed]
    return f"{text('simple_label', language)}\n\n{body.strip()}\n", removed
