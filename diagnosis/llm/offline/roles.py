"""The planner, executor and simple-chat roles (the verifier and composer have their own modules).

Each role's output is a typed structure (``Plan``, ``EvidenceReport``), turned into the JSON of its
contract only at the boundary (``to_dict``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from diagnosis import i18n
from diagnosis.llm.base import ChatRequest, ToolCall

from diagnosis.llm.offline.findings import RootCause, finding_of
from diagnosis.llm.offline.lexicon import (
    DEFAULT_TOOLS,
    EVIDENCE_VERSION,
    GAP_RESERVE,
    KNOWLEDGE_TOP_K,
    LOG_LIMIT,
    PLAN_VERSION,
    _canonical,
    _json,
    _short,
    question_language,
    services_in_question,
)
from diagnosis.localisation.outcome import Localisation
from diagnosis.llm.offline.observations import Observations
from diagnosis.llm.offline.claims import ClaimBook, procedure_claims, service_claims, top_patterns
from diagnosis.llm.offline.localised import build_claims as build_localised_claims
from diagnosis.llm.offline.leads import howto_question
from diagnosis.llm.offline.localised import localise_results, next_calls, undetermined_summary


# --------------------------------------------------------------------------- typed outputs


@dataclass
class Plan:
    """The planner's output (planner_plan_v1)."""

    goal: str
    services: list[str]
    language: str
    steps: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"version": PLAN_VERSION, "goal": self.goal, "services": self.services, "language": self.language,
                "steps": self.steps}


@dataclass
class EvidenceReport:
    """The executor's final output (executor_evidence_v2): claims with exact excerpts."""

    summary: str
    claims: list[dict[str, Any]]
    open_questions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"version": EVIDENCE_VERSION, "summary": self.summary, "claims": self.claims,
                "open_questions": self.open_questions}


# --------------------------------------------------------------------------- the roles


def _plan(si: Mapping[str, Any]) -> Plan:
    question = str(si.get("question", ""))
    language = si.get("language") if si.get("language") in ("en", "zh") else question_language(question)
    allowed = set(si.get("allowed_tools") or DEFAULT_TOOLS)
    if si.get("mode") == "EVIDENCE_GAP_ONLY":
        steps, services = [], []
        for gap in ((si.get("retry_context") or {}).get("critical_evidence_gaps") or [])[:4]:
            query = gap.get("suggested_query") if isinstance(gap, Mapping) else None
            if not isinstance(query, Mapping) or query.get("tool") not in allowed or not isinstance(query.get("arguments", {}), Mapping):
                continue
            arguments = dict(query.get("arguments") or {})
            if any(_canonical(s["tool"], s["arguments"]) == _canonical(query["tool"], arguments) for s in steps):
                continue
            steps.append({"tool": query["tool"], "arguments": arguments, "purpose": _short(str(gap.get("gap", "")), 200)})
            if isinstance(arguments.get("service"), str):
                services.append(arguments["service"])
        goal = i18n.text("Close the critical evidence gaps named by the verifier.", language)
        return Plan(goal, list(dict.fromkeys(services)), language, steps)
    services = services_in_question(question)
    steps: list[dict[str, Any]] = []

    def step(tool: str, arguments: dict, purpose: str) -> None:
        if tool in allowed:
            steps.append({"tool": tool, "arguments": arguments, "purpose": purpose})

    if howto_question(question):  # a procedure is asked for: the runbooks answer it, the telemetry does not
        step("lookup_knowledge", {"query": question[:500], "top_k": KNOWLEDGE_TOP_K}, "Runbooks that describe this procedure.")
        if services:  # by the asked service's name too: a runbook in another language than the question still names it
            step("lookup_knowledge", {"query": " ".join(services)[:500], "top_k": KNOWLEDGE_TOP_K},
                 "Runbooks that name the asked service.")
        return Plan(_goal(services, language), services, language, steps)
    # The first round reads what localises: the alerts, the asked services' telemetry, the changes and the
    # cluster's Services. The runbooks wait for the kind of fault (`localised.next_calls`), and a service's
    # Kubernetes state for the localiser to ask for it, unless no service is named: then the runbooks retrieved
    # for the question help tell which firing service it is about.
    step("query_alerts", {}, "Active alerts: which services are firing and since when.")
    if not services:
        step("lookup_knowledge", {"query": question[:500], "top_k": KNOWLEDGE_TOP_K},
             "Runbooks and past cases for this question: which service it is about.")
    for service in services:
        step("query_logs", {"service": service, "limit": LOG_LIMIT}, f"Recent log lines of {service}: errors, warnings, changes.")
        step("query_metrics", {"service": service}, f"Metric series of {service} against their baselines.")
    step("query_changes", {}, "What changed before the onset: rollouts, config and secret updates, releases.")
    step("query_kubernetes", {"kind": "service"},
         "The cluster's Services: which names, addresses and outside hosts are its own, and where their pods run.")
    return Plan(_goal(services, language), services, language, steps)


def _goal(services: list[str], language: str) -> str:
    if not services:
        return i18n.text("Find the failing services from the active alerts, then explain the incident with cited evidence.",
                         language)
    named = i18n.text(", ", language).join(services)
    if len(services) == 1:
        return i18n.text("Find why {services} is misbehaving and cite the evidence.", language, services=named)
    return i18n.text("Find why {services} are misbehaving and cite the evidence.", language, services=named)


def _offered_tools(request: ChatRequest) -> set[str]:
    names = set()
    for spec in request.tools or ():
        name = (spec.get("function") or {}).get("name") if isinstance(spec, Mapping) else None
        if isinstance(name, str):
            names.add(name)
    return names


def _tool_rounds(request: ChatRequest) -> int:
    """How many tool-call turns this executor already took: its own assistant messages in the conversation."""
    return sum(1 for m in request.messages if isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("tool_calls"))


def _tool_calls(calls: list[tuple[str, dict]], first_id: int) -> list[ToolCall]:
    return [ToolCall(id=f"call_{first_id + i}", name=tool, arguments=dict(args), raw_arguments=_json(args))
            for i, (tool, args) in enumerate(calls)]


MAX_LEAD_HOPS = 4
_PRIORITY = {"query_alerts": 0, "query_logs": 1, "query_metrics": 1, "lookup_knowledge": 2}


def _executor(request: ChatRequest, si: Mapping[str, Any]) -> tuple[str | None, list[ToolCall]]:
    plan = si.get("plan") if isinstance(si.get("plan"), Mapping) else {}
    results = list(si.get("tool_results") or [])
    mode = si.get("mode") or plan.get("mode") or "NORMAL"
    budget = si.get("tool_budget") if isinstance(si.get("tool_budget"), int) else 0
    offered = _offered_tools(request)
    rounds = _tool_rounds(request)
    question = str(si.get("question", ""))
    obs = Observations(results, question)  # read once: the names, the follow-ups and the evidence report
    named = [s for s in plan.get("services") or [] if isinstance(s, str)] or services_in_question(question)
    if not named and results:  # a plain name ("checkout") is read once the evidence shows such a service
        named = obs.services_named_in(question)
    if offered and budget > 0:
        if rounds == 0:
            steps = [(s.get("tool"), s.get("arguments") or {}) for s in plan.get("steps") or [] if isinstance(s, Mapping)]
            steps = [(t, a) for t, a in steps if t in offered and isinstance(a, Mapping)]
            steps = sorted(dict((_canonical(t, a), (t, dict(a))) for t, a in steps).values(), key=lambda s: _PRIORITY.get(s[0], 3))
            if steps:
                return None, _tool_calls(steps[:budget], len(results) + 1)
        elif mode != "EVIDENCE_GAP_ONLY" and not howto_question(question):
            # Follow-up rounds where the results point: MAX_LEAD_HOPS of them, one more when the question named
            # no service and the first one only found which service the alerts are about.
            has_service_steps = any(isinstance(s, Mapping) and s.get("tool") in ("query_logs", "query_metrics")
                                    for s in plan.get("steps") or [])
            # A further round only follows a lead the previous one found (a multi-hop cause).
            if rounds - 1 < (1 if has_service_steps else 2) + MAX_LEAD_HOPS - 1:
                calls = next_calls(obs, results, named, offered, question)
                allowed = budget - GAP_RESERVE if budget > GAP_RESERVE + 2 else budget
                if calls and allowed > 0:
                    return None, _tool_calls(calls[:allowed], len(results) + 1)
    return _json(_evidence(si, obs, results, named, mode).to_dict()), []


def _evidence(si: Mapping[str, Any], obs: Observations, results: list, named: list[str], mode: str) -> EvidenceReport:
    previous = si.get("previous_snapshot") if mode == "EVIDENCE_GAP_ONLY" else None
    if isinstance(previous, Mapping) and isinstance(previous.get("claims"), list):
        return _extend_snapshot(previous, obs)
    book = ClaimBook()
    language = si.get("language") if si.get("language") in ("en", "zh") else question_language(str(si.get("question", "")))
    if howto_question(str(si.get("question", ""))):  # answered from the runbooks; no diagnosis is made
        title = procedure_claims(obs, named, book, language)
        summary = (f"How-to question: the steps are quoted from the runbook \"{title}\"; no diagnosis was made."
                   if title and book.claims else "How-to question: no runbook of this run describes the procedure.")
        return EvidenceReport(summary, book.claims, [])
    loc = localise_results(results, named)
    summary = build_localised_claims(obs, loc, book, language, obs.symptom.stated)
    return EvidenceReport(summary, book.claims, _open_questions(obs, loc))


def _open_questions(obs: Observations, loc: Localisation | None) -> list[str]:
    questions = [f"Tool call failed: {failure}" for failure in obs.failed[:3]]
    for service, count in obs.suspicious.items():
        questions.append(f"{count} log line(s) of {service} read like instructions to an AI and were ignored as untrusted data.")
    if loc is not None and loc.outcome == "undetermined":
        questions.append(undetermined_summary(loc))
    return questions


def _extend_snapshot(previous: Mapping[str, Any], obs: Observations) -> EvidenceReport:
    """EVIDENCE_GAP_ONLY: the full earlier snapshot, the root-cause claim strengthened, new claims added."""
    claims = [dict(c) for c in previous["claims"] if isinstance(c, Mapping)]
    numbers = [int(m.group(1)) for c in claims for m in [re.fullmatch(r"c(\d+)", str(c.get("claim_id", "")))] if m]
    book = ClaimBook(start=max(numbers, default=0) + 1)
    for claim in claims:
        root = finding_of(claim)
        if not isinstance(root, RootCause):
            continue
        profile = obs.profiles.get(root.service)
        if profile is None:
            continue
        extra = [s.binding() for s in profile.anomalies[:1]] + [p.first.binding() for p in top_patterns(profile)[:1]]
        have = {(b.get("source_invocation_id"), b.get("raw_path")) for b in claim.get("evidence") or []}
        claim["evidence"] = list(claim.get("evidence") or []) + [
            b for b in dict(((b["source_invocation_id"], b["raw_path"]), b) for b in extra).values()
            if (b["source_invocation_id"], b["raw_path"]) not in have][:3]
    book.cited = {(b.get("source_invocation_id"), b.get("raw_path")) for c in claims for b in c.get("evidence") or []
                  if isinstance(b, Mapping)}
    for service in obs.profiles:
        service_claims(obs.profiles[service], book)
    summary = str(previous.get("summary", ""))
    summary += f" The evidence retry added {len(book.claims)} claim(s) from {len(obs.calls)} new quer{'y' if len(obs.calls) == 1 else 'ies'}."
    return EvidenceReport(summary.strip(), claims + book.claims,
                          list(previous.get("open_questions") or [])[:10] + _open_questions(obs, None))


# --------------------------------------------------------------------------- simple chat


def _simple(si: Mapping[str, Any], request: ChatRequest) -> str:
    question = str(si.get("question") or _last_user_text(request))
    language = question_language(question)
    services = services_in_question(question)
    text = i18n.text("Hello! I am the offline analyser of this diagnosis service (rule-based, no LLM). I cannot chat "
                     "freely, but I can diagnose incidents from logs, metrics, alerts and runbooks. ", language)
    if services:
        return text + i18n.text("To look into {service}, ask in diagnosis mode, e.g. “Why is {service} failing?”.",
                                language, service=services[0])
    return text + i18n.text("Name the service in your question, e.g. “Why is checkout-api failing?”, to get a diagnosis "
                            "with cited evidence.", language)


def _last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, Mapping) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


