"""The planner, executor, verifier, composer and simple-chat roles."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping
from diagnosis.llm.base import ChatRequest, ToolCall

from diagnosis.llm.offline.taxonomy import GENERIC_ACTIONS, LAST_ERROR
from diagnosis.llm.offline.lexicon import (
    CAUSE_BY_KEY,
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
from diagnosis.llm.offline.observations import Observations
from diagnosis.llm.offline.hypotheses import Diagnosis, diagnose
from diagnosis.llm.offline.claims import (
    ALERT_RE,
    CHANGE_RE,
    ClaimBook,
    HEALTHY_METRICS_RE,
    LOGS_RE,
    METRIC_RE,
    MISMATCH_RE,
    NOTHING_RE,
    QUIET_LOGS_RE,
    ROOT_RE,
    RUNBOOK_RE,
    _service_claims,
    _top_patterns,
    build_claims,
    follow_up_calls,
)


# --------------------------------------------------------------------------- the roles


def _plan(si: Mapping[str, Any]) -> dict[str, Any]:
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
        goal = "Close the critical evidence gaps named by the verifier." if language == "en" else "补齐校验环节指出的关键证据缺口。"
        return {"version": PLAN_VERSION, "goal": goal, "services": list(dict.fromkeys(services)), "language": language,
                "steps": steps}
    services = services_in_question(question)
    steps: list[dict[str, Any]] = []

    def step(tool: str, arguments: dict, purpose: str) -> None:
        if tool in allowed:
            steps.append({"tool": tool, "arguments": arguments, "purpose": purpose})

    step("query_alerts", {}, "Active alerts: which services are firing and since when.")
    step("lookup_knowledge", {"query": question[:500], "top_k": KNOWLEDGE_TOP_K}, "Runbooks and past cases for this question.")
    for service in services:
        step("query_logs", {"service": service, "limit": LOG_LIMIT}, f"Recent log lines of {service}: errors, warnings, changes.")
        step("query_metrics", {"service": service}, f"Metric series of {service} against their baselines.")
    for service in services[:1]:
        step("query_kubernetes", {"kind": "deployment", "name": service},
             f"Kubernetes events and container states of {service}: restarts, exit codes, scheduling.")
    if services:
        goal = f"Find why {', '.join(services)} {'is' if len(services) == 1 else 'are'} misbehaving and cite the evidence."
    else:
        goal = "Find the failing services from the active alerts, then explain the incident with cited evidence."
    if language == "zh":
        goal = f"查明 {'、'.join(services) or '告警中的服务'} 出现问题的原因，并给出可核验的证据。"
    return {"version": PLAN_VERSION, "goal": goal, "services": services, "language": language, "steps": steps}


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


MAX_LEAD_HOPS = 2
_PRIORITY = {"query_alerts": 0, "query_logs": 1, "query_metrics": 1, "lookup_knowledge": 2}


def _executor(request: ChatRequest, si: Mapping[str, Any]) -> tuple[str | None, list[ToolCall]]:
    plan = si.get("plan") if isinstance(si.get("plan"), Mapping) else {}
    results = list(si.get("tool_results") or [])
    mode = si.get("mode") or plan.get("mode") or "NORMAL"
    budget = si.get("tool_budget") if isinstance(si.get("tool_budget"), int) else 0
    offered = _offered_tools(request)
    rounds = _tool_rounds(request)
    named = [s for s in plan.get("services") or [] if isinstance(s, str)] or services_in_question(str(si.get("question", "")))
    if offered and budget > 0:
        if rounds == 0:
            steps = [(s.get("tool"), s.get("arguments") or {}) for s in plan.get("steps") or [] if isinstance(s, Mapping)]
            steps = [(t, a) for t, a in steps if t in offered and isinstance(a, Mapping)]
            steps = sorted(dict((_canonical(t, a), (t, dict(a))) for t, a in steps).values(), key=lambda s: _PRIORITY.get(s[0], 3))
            if steps:
                return None, _tool_calls(steps[:budget], len(results) + 1)
        elif mode != "EVIDENCE_GAP_ONLY":
            # One follow-up round where the results point; two when the question named no service and
            # the first one only found which service the alerts are about.
            has_service_steps = any(isinstance(s, Mapping) and s.get("tool") in ("query_logs", "query_metrics")
                                    for s in plan.get("steps") or [])
            # A further round only follows a lead the previous one found (a multi-hop cause).
            if rounds - 1 < (1 if has_service_steps else 2) + MAX_LEAD_HOPS - 1:
                obs = Observations(results, str(si.get("question", "")))
                hop = rounds - 1 >= (1 if has_service_steps else 2)
                calls = follow_up_calls(obs, named, offered, str(si.get("question", "")),
                                        frontier=_last_round_services(request, results) if hop else None)
                allowed = budget - GAP_RESERVE if budget > GAP_RESERVE + 2 else budget
                if calls and allowed > 0:
                    return None, _tool_calls(calls[:allowed], len(results) + 1)
    return _json(_evidence(si, results, named, mode)), []


def _last_round_services(request: ChatRequest, results: list) -> list[str]:
    """The services the previous tool round queried: the frontier of lead following."""
    turns = [m for m in request.messages if isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("tool_calls")]
    count = len(turns[-1].get("tool_calls") or []) if turns else 0
    services = [str((r.get("arguments") or {}).get("service")) for r in results[-count:] if count
                and r.get("tool_name") == "query_logs" and (r.get("arguments") or {}).get("service")]
    return list(dict.fromkeys(services))


def _evidence(si: Mapping[str, Any], results: list, named: list[str], mode: str) -> dict[str, Any]:
    obs = Observations(results, str(si.get("question", "")))
    previous = si.get("previous_snapshot") if mode == "EVIDENCE_GAP_ONLY" else None
    if isinstance(previous, Mapping) and isinstance(previous.get("claims"), list):
        return _extend_snapshot(previous, obs)
    found = diagnose(obs, named)
    book = ClaimBook()
    language = si.get("language") if si.get("language") in ("en", "zh") else question_language(str(si.get("question", "")))
    summary = build_claims(obs, found, book, language)
    return {"version": EVIDENCE_VERSION, "summary": summary, "claims": book.claims, "open_questions": _open_questions(obs, found)}


def _open_questions(obs: Observations, found: Diagnosis) -> list[str]:
    questions = [f"Tool call failed: {failure}" for failure in obs.failed[:3]]
    for service, count in obs.suspicious.items():
        questions.append(f"{count} log line(s) of {service} read like instructions to an AI and were ignored as untrusted data.")
    if found.via == "neighbour" and found.root and not obs.has(found.root):
        questions.append(f"The metrics and logs of {found.root} itself were not queried.")
    return questions


def _extend_snapshot(previous: Mapping[str, Any], obs: Observations) -> dict[str, Any]:
    """EVIDENCE_GAP_ONLY: the full earlier snapshot, the root-cause claim strengthened, new claims added."""
    claims = [dict(c) for c in previous["claims"] if isinstance(c, Mapping)]
    numbers = [int(m.group(1)) for c in claims for m in [re.fullmatch(r"c(\d+)", str(c.get("claim_id", "")))] if m]
    book = ClaimBook(start=max(numbers, default=0) + 1)
    for claim in claims:
        match = ROOT_RE.match(str(claim.get("statement", "")))
        if not match:
            continue
        profile = obs.profiles.get(match.group("service"))
        cause = CAUSE_BY_KEY.get(match.group("cause"))
        if profile is None:
            continue
        extra: list[dict[str, str]] = []
        if cause is not None:
            extra += [s.binding() for s in profile.cause_series(cause)[:1]]
            cue = profile.cue_line(cause)
            extra += [cue.binding()] if cue else []
        extra += [s.binding() for s in profile.anomalies[:1]] + [p.first.binding() for p in _top_patterns(profile)[:1]]
        have = {(b.get("source_invocation_id"), b.get("raw_path")) for b in claim.get("evidence") or []}
        claim["evidence"] = list(claim.get("evidence") or []) + [
            b for b in dict(((b["source_invocation_id"], b["raw_path"]), b) for b in extra).values()
            if (b["source_invocation_id"], b["raw_path"]) not in have][:3]
    book.cited = {(b.get("source_invocation_id"), b.get("raw_path")) for c in claims for b in c.get("evidence") or []
                  if isinstance(b, Mapping)}
    for service in obs.profiles:
        _service_claims(obs.profiles[service], book)
    summary = str(previous.get("summary", ""))
    summary += f" The evidence retry added {len(book.claims)} claim(s) from {len(obs.calls)} new quer{'y' if len(obs.calls) == 1 else 'ies'}."
    return {"version": EVIDENCE_VERSION, "summary": summary.strip(), "claims": claims + book.claims,
            "open_questions": list(previous.get("open_questions") or [])[:10] + _open_questions(obs, Diagnosis([]))}


# --------------------------------------------------------------------------- verifier


TELEMETRY_TOOLS = ("query_logs", "query_metrics", "query_alerts")
V = {  # what the verifier says, in the language of the question (the composer quotes it)
    "pass": {"en": "The root cause ({cause} in {service}) is supported by evidence from {tools}, checked against the "
                   "patterns of its category.",
             "zh": "根因（{service} 的 {cause}）得到 {tools} 的证据支持，且证据符合该类故障的特征。"},
    "fallback": {"en": "no known failure pattern matched; the last error {service} logged before the failure is named as the "
                       "likely cause",
                 "zh": "未匹配到已知故障模式；以 {service} 在故障前记录的最后一条错误作为可能原因"},
    "single": {"en": "the root cause in {service} is supported only by {tools}",
               "zh": "{service} 的根因只有 {tools} 的证据支持"},
    "gap_metrics": {"en": "{service}'s metrics would confirm or refute the root cause.",
                    "zh": "需要 {service} 的指标来证实或否定该根因。"},
    "gap_logs": {"en": "{service}'s logs would confirm or refute the root cause.",
                 "zh": "需要 {service} 的日志来证实或否定该根因。"},
    "healthy": {"en": "Metrics near baseline and logs without errors support that nothing is wrong.",
                "zh": "指标保持在基线附近、日志中没有错误，支持“未发现异常”的结论。"},
    "healthy_thin": {"en": "the no-anomaly finding rests on a single kind of telemetry",
                     "zh": "“未发现异常”的结论只有一种遥测数据支持"},
    "unexplained": {"en": "some observations are supported, but no verified claim explains the incident",
                    "zh": "部分观察结果得到支持，但没有经过校验的结论能解释本次故障"},
    "gap_errors": {"en": "No verified root cause; the error lines of {service} may name it.",
                   "zh": "尚无经过校验的根因；{service} 的错误日志可能指明原因。"},
    "reject": {"en": "No claim is supported by its evidence.", "zh": "没有任何结论得到其证据的支持。"},
    "capped": {"en": " Capped at the gatekeeper ceiling {ceiling}.", "zh": "（受校验上限 {ceiling} 限制。）"},
}


def _verify(si: Mapping[str, Any]) -> dict[str, Any]:
    language = si.get("language") if si.get("language") in ("en", "zh") else "en"

    def say(key: str, **values: Any) -> str:
        return V[key][language].format(**values)

    output = si.get("verified_executor_output") or {}
    claims = [c for c in output.get("claims") or [] if isinstance(c, Mapping)]
    ceiling = si.get("verdict_ceiling") if si.get("verdict_ceiling") in ("PASS", "LOW_CONFID", "REJECT") else "REJECT"
    checks, supported = [], {}
    for claim in claims:
        ok, why = _check_claim(claim)
        supported[claim.get("claim_id")] = ok
        checks.append({
            "claim_id": claim.get("claim_id"), "supported": ok, "rationale": why,
            "evidence_refs": [{"claim_id": claim.get("claim_id"), "source_invocation_id": b.get("source_invocation_id"),
                               "tool_name": b.get("tool_name"), "raw_path": b.get("raw_path")}
                              for b in claim.get("evidence") or [] if isinstance(b, Mapping)],
        })
    roots = [c for c in claims if ROOT_RE.match(str(c.get("statement", ""))) and supported.get(c.get("claim_id"))]
    nothing = [c for c in claims if NOTHING_RE.match(str(c.get("statement", ""))) and supported.get(c.get("claim_id"))]
    gaps: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    if roots:
        match = ROOT_RE.match(roots[0]["statement"])
        service = match.group("service")
        evidence = [b for b in roots[0].get("evidence") or [] if isinstance(b, Mapping)]
        tools = {b.get("tool_name") for b in evidence} & set(TELEMETRY_TOOLS)
        listed = ", ".join(sorted(tools)) or "lookup_knowledge"
        # Logs and metrics are independent views of a service: a cause both show is corroborated.
        corroborated = {"query_logs", "query_metrics"} <= tools
        facts.append({"fact": f"The root-cause service {service} appears in the cited evidence.",
                      "consistent": any(service in str(b.get("evidence_excerpt", "")) for b in evidence)})
        facts.append({"fact": f"The root cause is supported by logs and metrics (tools: {listed}).", "consistent": corroborated})
        if match.group("cause") not in CAUSE_BY_KEY or match.group("cause") == LAST_ERROR.key:
            # The generic fallback names an error, not a recognised failure: never more than LOW_CONFID.
            verdict, rationale = "LOW_CONFID", say("fallback", service=service)
        elif corroborated:
            verdict, rationale = "PASS", say("pass", cause=match.group("cause"), service=service, tools=listed)
        else:
            verdict, rationale = "LOW_CONFID", say("single", service=service, tools=listed)
            missing = "query_metrics" if "query_metrics" not in tools else "query_logs"
            arguments = {"service": service} if missing == "query_metrics" else {"service": service, "limit": LOG_LIMIT}
            gaps.append({"gap": say("gap_metrics" if missing == "query_metrics" else "gap_logs", service=service),
                         "suggested_query": {"tool": missing, "arguments": arguments}})
    elif nothing:
        tools = {b.get("tool_name") for c in claims if supported.get(c.get("claim_id")) for b in c.get("evidence") or []}
        verdict = "PASS" if {"query_logs", "query_metrics"} <= tools else "LOW_CONFID"
        rationale = say("healthy" if verdict == "PASS" else "healthy_thin")
        facts.append({"fact": "No anomaly was found in the verified evidence.", "consistent": True})
    elif any(supported.values()):
        verdict, rationale = "LOW_CONFID", say("unexplained")
        service = _first_service(claims)
        if service:
            gaps.append({"gap": say("gap_errors", service=service),
                         "suggested_query": {"tool": "query_logs", "arguments": {"service": service, "query": "level:ERROR,WARN",
                                                                                 "limit": LOG_LIMIT}}})
    else:
        verdict, rationale = "REJECT", say("reject")
    rank = {"REJECT": 0, "LOW_CONFID": 1, "PASS": 2}
    if rank[verdict] > rank[ceiling]:
        rationale += say("capped", ceiling=ceiling)
        verdict = ceiling
    score = {"PASS": 0.9, "LOW_CONFID": 0.55, "REJECT": 0.1}[verdict]
    if claims:
        score = round(score * (0.8 + 0.2 * sum(supported.values()) / len(claims)), 3)
    return {"verdict": verdict, "score": score, "claim_checks": checks, "fact_checks": facts,
            "critical_evidence_gaps": gaps if verdict == "LOW_CONFID" else [], "rationale": rationale}


def _check_claim(claim: Mapping[str, Any]) -> tuple[bool, str]:
    evidence = [b for b in claim.get("evidence") or [] if isinstance(b, Mapping)]
    excerpts = " ".join(str(b.get("evidence_excerpt", "")) for b in evidence)
    statement = str(claim.get("statement", ""))
    if not evidence:
        return False, "No verified evidence."
    root = ROOT_RE.match(statement)
    if root:
        cause = CAUSE_BY_KEY.get(root.group("cause"))
        if cause is None:
            return len(evidence) >= 2, "Unclassified root cause; supported only by the number of citations."
        if cause is LAST_ERROR:
            quoted = statement.split(": \"", 1)[-1][:40]
            ok = any(quoted[:30] in " ".join(str(b.get("evidence_excerpt", "")).split()) for b in evidence)
            return ok, "The last error named as the cause is quoted from the cited lines." if ok else "The named error is not cited."
        text_hit = cause.matches_text(excerpts)
        metric_hit = any(cause.watches(m) for m in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\{)", excerpts))
        if text_hit or metric_hit:
            return True, f"The excerpts show the {cause.key} pattern ({'log text' if text_hit else 'metric'})."
        return False, f"No excerpt shows the {cause.key} pattern."
    metric = METRIC_RE.match(statement) or HEALTHY_METRICS_RE.match(statement)
    if metric:
        names = [metric.group("metric")] if "metric" in metric.groupdict() and metric.group("metric") else \
            [n.strip() for n in metric.groupdict().get("names", "").split(",")]
        ok = any(n and n in excerpts for n in names)
        return ok, "The cited series description matches the metric." if ok else "The cited series is another metric."
    return True, "The excerpt is quoted verbatim from the tool output."


def _first_service(claims: list[Mapping[str, Any]]) -> str | None:
    for claim in claims:
        for regex in (METRIC_RE, LOGS_RE, ALERT_RE, CHANGE_RE):
            match = regex.match(str(claim.get("statement", "")))
            if match and "service" in match.groupdict():
                return match.group("service")
    return None


# --------------------------------------------------------------------------- composer


T = {
    "summary_pass": {"en": "The offline analyser traced the incident to **{root}**: {label}.",
                     "zh": "离线分析器将本次故障定位到 **{root}**：{label}。"},
    "summary_low": {"en": "The most likely cause is **{root}**: {label}; confidence is limited.",
                    "zh": "最可能的原因是 **{root}**：{label}；但置信度有限。"},
    "summary_nothing": {"en": "No anomaly found: nothing wrong was detected for {services}. Metrics stay near their "
                                "baselines, the logs show no errors and no alert is firing; the service looks healthy.",
                        "zh": "未发现异常：{services} 的指标保持在基线附近，日志中没有错误，也没有告警触发，服务运行正常。"},
    "summary_reject": {"en": "The collected evidence could not be verified well enough to name a root cause.",
                       "zh": "收集到的证据未能通过校验，无法给出根因结论。"},
    "summary_unknown": {"en": "Some observations were verified, but none of them explains the incident yet.",
                        "zh": "部分观察结果已通过校验，但尚不足以解释本次故障。"},
    "verified": {"en": "{n} claim(s) were verified against this run's tool output.",
                 "zh": "共有 {n} 条结论通过了本次运行工具输出的校验。"},
    "root_head": {"en": "**Root cause**", "zh": "**根因**"},
    "assess_head": {"en": "**Assessment**", "zh": "**初步判断**"},
    "evidence_head": {"en": "**Evidence**", "zh": "**证据**"},
    "limits_head": {"en": "**Limitations**", "zh": "**局限性**"},
    "actions_head": {"en": "**Recommended actions**", "zh": "**建议措施**"},
    "affected": {"en": " It explains the failures of {services}.", "zh": "它导致了 {services} 的故障。"},
    "trigger": {"en": " It began after this change: `{excerpt}`.", "zh": "问题始于这次变更之后：`{excerpt}`。"},
    "low_reason": {"en": "Confidence is limited: {reason}", "zh": "置信度有限：{reason}"},
    "offline_limit": {"en": "Written by the offline analyser (rule-based pattern matching, no LLM): it recognises known "
                            "failure patterns and can miss new ones.",
                      "zh": "本回答由离线分析器生成（基于规则的模式匹配，未使用大模型）：它能识别常见故障模式，但可能遗漏新的故障类型。"},
    "window_limit": {"en": "Only the telemetry of the last hour and the services queried in this run were examined.",
                     "zh": "只检查了最近一小时的遥测数据，以及本次运行中查询过的服务。"},
    "no_evidence": {"en": "No evidence passed verification.", "zh": "没有证据通过校验。"},
    "nothing_action": {"en": "No action is needed now. If users still report failures, ask again with the exact symptom, "
                             "time and endpoint.",
                       "zh": "目前无需处理。如果用户仍反馈故障，请补充具体现象、时间和接口后重新提问。"},
    "reject_action": {"en": "Check the error logs and the key metrics (errors, latency, saturation) of the services involved, "
                            "and ask again naming the failing service.",
                      "zh": "检查相关服务的错误日志和关键指标（错误率、延迟、资源饱和度），并在提问时指明出问题的服务。"},
    "runbook_action": {"en": "{excerpt} (runbook “{title}”)", "zh": "{excerpt}（运维手册《{title}》）"},
    "missing": {"en": "Missing evidence: {gap}", "zh": "缺少的证据：{gap}"},
}


def _t(key: str, language: str, **values: Any) -> str:
    return T[key][language].format(**values)


def _evidence_line(claim: Mapping[str, Any], language: str, safe: Callable[[str], str]) -> str:
    statement = str(claim.get("statement", ""))
    evidence = [b for b in claim.get("evidence") or [] if isinstance(b, Mapping)]
    excerpt = safe(str(evidence[0].get("evidence_excerpt", ""))) if evidence else ""
    if language == "en":
        return safe(_short(statement, 320))
    directions = {"up": "上升", "down": "下降", "saturated": "达到上限", "changed": "发生变化"}
    if m := METRIC_RE.match(statement):
        return f"{m.group('service')} 的指标 {m.group('metric')} 异常（{directions.get(m.group('direction') or 'changed', '异常')}）：`{excerpt}`"
    if m := QUIET_LOGS_RE.match(statement):
        return f"{m.group('service')} 的 {m.group('count')} 行日志中没有 ERROR，例如：`{excerpt}`"
    if m := LOGS_RE.match(statement):
        return f"{m.group('service')} 日志中有 {m.group('count')} 条 {m.group('level')}，例如：`{excerpt}`"
    if m := HEALTHY_METRICS_RE.match(statement):
        return f"{m.group('service')} 的指标保持在基线附近（{m.group('names')}）：`{excerpt}`"
    if m := ALERT_RE.match(statement):
        state = "正在触发" if m.group("state") == "firing" else "待触发"
        return f"告警 {m.group('name')}（{m.group('service')}）{state}：{excerpt}"
    if m := MISMATCH_RE.match(statement):
        cause = CAUSE_BY_KEY.get(m.group("cause"))
        return (f"运维手册《{m.group('title')}》认为原因是{cause.label_zh if cause else m.group('cause')}，"
                f"但 {m.group('service')} 的 {m.group('metric')} 保持在基线附近")
    if m := RUNBOOK_RE.match(statement):
        return f"运维手册《{m.group('title')}》建议：{excerpt}"
    if m := CHANGE_RE.match(statement):
        return f"{m.group('service')} 在 {m.group('at')} 发生变更：`{excerpt}`"
    if m := NOTHING_RE.match(statement):
        return f"未发现 {m.group('services')} 的异常"
    return f"`{excerpt}`"


def _compose(si: Mapping[str, Any]) -> dict[str, Any]:
    """The composer's structure (answer_plan_v1): which verified claims are the root cause, evidence,
    impact and timeline, and the next steps. The server renders the words (diagnosis/answer_render.py)."""
    language = si.get("language") if si.get("language") in ("en", "zh") else "en"
    claims = [c for c in (si.get("verified_executor_output") or {}).get("claims") or [] if isinstance(c, Mapping)]
    verdict = si.get("effective_verdict") if si.get("effective_verdict") in ("PASS", "LOW_CONFID", "REJECT") else "REJECT"
    verifier = si.get("verifier") or {}
    unsupported = {c.get("claim_id") for c in verifier.get("claim_checks") or [] if isinstance(c, Mapping) and c.get("supported") is False}
    claims = [c for c in claims if c.get("claim_id") not in unsupported]
    plan: dict[str, Any] = {"version": "answer_plan_v1", "root_cause": [], "evidence": [], "impact": [],
                            "timeline": [], "next_steps": []}
    root = next((c for c in claims if ROOT_RE.match(str(c.get("statement", "")))), None)
    nothing = next((c for c in claims if NOTHING_RE.match(str(c.get("statement", "")))), None)
    actions: list[str] = []
    if verdict in ("PASS", "LOW_CONFID") and root is not None:
        plan["root_cause"].append(root["claim_id"])
        cause = CAUSE_BY_KEY.get(ROOT_RE.match(root["statement"]).group("cause"))
        actions += list(cause.actions(language) if cause else GENERIC_ACTIONS[language])
    elif verdict in ("PASS", "LOW_CONFID") and nothing is not None:
        plan["evidence"].append(nothing["claim_id"])
        actions.append(_t("nothing_action", language))
    elif verdict == "LOW_CONFID":
        actions += list(GENERIC_ACTIONS[language])  # a problem without an established cause: what to check next
    else:
        actions.append(_t("reject_action", language))

    def excerpt_language(claim) -> str:
        return question_language(str((claim.get("evidence") or [{}])[0].get("evidence_excerpt", "")))

    runbooks = [c for c in claims if RUNBOOK_RE.match(str(c.get("statement", "")))]
    # Advice in the reader's language first; a runbook in the other language is still quoted as is.
    if any(excerpt_language(c) == language for c in runbooks):
        runbooks = [c for c in runbooks if excerpt_language(c) == language]
    if verdict != "REJECT":
        plan["next_steps"] += [{"claim_id": c["claim_id"]} for c in runbooks[:3]]
    for claim in claims:
        if claim is root or claim is nothing or claim in runbooks:
            continue
        statement = str(claim.get("statement", ""))
        if CHANGE_RE.match(statement):
            plan["timeline"].append(claim["claim_id"])
        elif ALERT_RE.match(statement):
            plan["impact"].append(claim["claim_id"])
        elif not RUNBOOK_RE.match(statement):
            plan["evidence"].append(claim["claim_id"])
    plan["evidence"] = plan["evidence"][:8]
    plan["next_steps"] += [{"text": a} for a in actions[: max(1, 3 - len(plan["next_steps"]))]]
    plan["diagnosis"] = _diagnosis_hint(claims, root, nothing, verdict)
    return plan


def _diagnosis_hint(claims: list[Mapping[str, Any]], root: Mapping[str, Any] | None,
                    nothing: Mapping[str, Any] | None, verdict: str) -> dict[str, Any]:
    """The structured outcome the server checks against what it renders (answer_render.structured_diagnosis)."""
    concluded = verdict in ("PASS", "LOW_CONFID")
    hint: dict[str, Any] = {"outcome": "undetermined", "symptoms": []}
    root_service = None
    if concluded and root is not None:
        match = ROOT_RE.match(str(root["statement"]))
        root_service = match.group("service")
        if match.group("cause") in CAUSE_BY_KEY:
            hint.update(outcome="root_cause", service=root_service, cause=match.group("cause"))
    elif concluded and nothing is not None:
        hint["outcome"] = "nothing_wrong"
    seen = {root_service}
    for claim in claims:
        statement = str(claim.get("statement", ""))
        match = METRIC_RE.match(statement) or LOGS_RE.match(statement) or ALERT_RE.match(statement)
        if match and match.group("service") not in seen:
            seen.add(match.group("service"))
            hint["symptoms"].append({"service": match.group("service"), "claim_id": claim["claim_id"]})
    return hint


# --------------------------------------------------------------------------- simple chat


def _simple(si: Mapping[str, Any], request: ChatRequest) -> str:
    question = str(si.get("question") or _last_user_text(request))
    language = question_language(question)
    services = services_in_question(question)
    if language == "zh":
        text = "你好！我是本诊断服务的离线分析器（基于规则，未使用大模型），不能自由聊天，但可以根据日志、指标、告警和运维手册诊断故障。"
        text += (f"如果想了解 {services[0]} 的问题，请以诊断模式提问，例如“{services[0]} 为什么报错？”。" if services
                 else "请在问题中指明服务名，例如“payment-service 为什么报错？”，我会给出带证据引用的诊断。")
        return text
    text = ("Hello! I am the offline analyser of this diagnosis service (rule-based, no LLM). I cannot chat freely, but I can "
            "diagnose incidents from logs, metrics, alerts and runbooks. ")
    text += (f"To look into {services[0]}, ask in diagnosis mode, e.g. “Why is {services[0]} failing?”." if services
             else "Name the service in your question, e.g. “Why is payment-service failing?”, to get a diagnosis with cited evidence.")
    return text


def _last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, Mapping) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


