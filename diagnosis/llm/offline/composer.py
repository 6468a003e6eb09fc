"""The composer role: arranges the verified claims into an answer plan; the server renders the words.

It reads claims as typed findings (``findings.read_finding``) and returns a typed ``AnswerPlan``
(answer_plan_v1 as a dict at the boundary). ``evidence_line`` is the Chinese wording of a finding,
shared with the alert report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from diagnosis.llm.offline.findings import (
    AlertFiring,
    Change,
    HealthyMetrics,
    LogPattern,
    MetricMove,
    NothingWrong,
    QuietLogs,
    RootCause,
    RunbookAdvice,
    RunbookMismatch,
    finding_of,
)
from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID
from diagnosis.llm.offline.lexicon import CAUSE_BY_KEY, _short, question_language
from diagnosis.llm.offline.taxonomy import GENERIC_ACTIONS

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
    "offline_limit": {"en": "Written by the offline analyser (no LLM): it localises the fault from deviations "
                            "against each signal's baseline, their onset order and the dependencies the records "
                            "name, and says undetermined when they do not settle it.",
                      "zh": "本回答由离线分析器生成（未使用大模型）：它根据各信号相对基线的偏离、出现先后以及记录中提到的依赖来定位故障，无法确定时会如实说明。"},
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
    f = finding_of(claim)
    if isinstance(f, MetricMove):
        return f"{f.service} 的指标 {f.metric} 异常（{directions.get(f.direction, '异常')}）：`{excerpt}`"
    if isinstance(f, QuietLogs):
        return f"{f.service} 的 {f.count} 行日志中没有 ERROR，例如：`{excerpt}`"
    if isinstance(f, LogPattern):
        return f"{f.service} 日志中有 {f.count} 条 {f.level}，例如：`{excerpt}`"
    if isinstance(f, HealthyMetrics):
        return f"{f.service} 的指标保持在基线附近（{f.names}）：`{excerpt}`"
    if isinstance(f, AlertFiring):
        state = "正在触发" if f.state == "firing" else "待触发"
        return f"告警 {f.name}（{f.service}）{state}：{excerpt}"
    if isinstance(f, RunbookMismatch):
        cause = CAUSE_BY_KEY.get(f.cause)
        return f"运维手册《{f.title}》认为原因是{cause.label_zh if cause else f.cause}，但 {f.service} 的 {f.metric} 保持在基线附近"
    if isinstance(f, RunbookAdvice):
        return f"运维手册《{f.title}》建议：{excerpt}"
    if isinstance(f, Change):
        return f"{f.service} 在 {f.at} 发生变更：`{excerpt}`"
    if isinstance(f, NothingWrong):
        return f"未发现 {f.services} 的异常"
    return f"`{excerpt}`"


@dataclass
class AnswerPlan:
    """The composer's output: claim ids by section, next steps, and the structured outcome it names."""

    root_cause: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    impact: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    next_steps: list[dict[str, str]] = field(default_factory=list)
    diagnosis: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"version": "answer_plan_v1", "root_cause": self.root_cause, "evidence": self.evidence[:8],
                "impact": self.impact, "timeline": self.timeline, "next_steps": self.next_steps, "diagnosis": self.diagnosis}


def compose(si: Mapping[str, Any]) -> AnswerPlan:
    """Which verified claims are the root cause, evidence, impact and timeline, and the next steps.
    The server renders the words (diagnosis/answer_render.py)."""
    language = si.get("language") if si.get("language") in ("en", "zh") else "en"
    claims = [c for c in (si.get("verified_executor_output") or {}).get("claims") or [] if isinstance(c, Mapping)]
    verdict = si.get("effective_verdict") if si.get("effective_verdict") in ("PASS", "LOW_CONFID", "REJECT") else "REJECT"
    verifier = si.get("verifier") or {}
    unsupported = {c.get("claim_id") for c in verifier.get("claim_checks") or [] if isinstance(c, Mapping) and c.get("supported") is False}
    claims = [c for c in claims if c.get("claim_id") not in unsupported]
    found = [(c, finding_of(c)) for c in claims]
    plan = AnswerPlan()
    root = next(((c, f) for c, f in found if isinstance(f, RootCause)), None)
    nothing = next((c for c, f in found if isinstance(f, NothingWrong)), None)
    actions: list[str] = []
    if verdict in ("PASS", "LOW_CONFID") and root is not None:
        plan.root_cause.append(root[0]["claim_id"])
        cause = CAUSE_BY_KEY.get(root[1].cause)
        actions += list(cause.actions(language) if cause else GENERIC_ACTIONS[language])
    elif verdict in ("PASS", "LOW_CONFID") and nothing is not None:
        plan.evidence.append(nothing["claim_id"])
        actions.append(_t("nothing_action", language))
    elif verdict == "LOW_CONFID":
        actions += list(GENERIC_ACTIONS[language])  # a problem without an established cause: what to check next
    else:
        actions.append(_t("reject_action", language))

    def excerpt_language(claim) -> str:
        return question_language(str((claim.get("evidence") or [{}])[0].get("evidence_excerpt", "")))

    runbooks = [c for c, f in found if isinstance(f, RunbookAdvice)]
    # Advice in the reader's language first; a runbook in the other language is still quoted as is.
    if any(excerpt_language(c) == language for c in runbooks):
        runbooks = [c for c in runbooks if excerpt_language(c) == language]
    if verdict != "REJECT":
        plan.next_steps += [{"claim_id": c["claim_id"]} for c in runbooks[:3]]
    for claim, finding in found:
        if (root is not None and claim is root[0]) or claim is nothing or isinstance(finding, RunbookAdvice):
            continue
        if isinstance(finding, Change):
            plan.timeline.append(claim["claim_id"])
        elif isinstance(finding, AlertFiring):
            plan.impact.append(claim["claim_id"])
        else:
            plan.evidence.append(claim["claim_id"])
    plan.next_steps += [{"text": a} for a in actions[: max(1, 3 - len(plan.next_steps))]]
    plan.diagnosis = _diagnosis_hint(found, root[1] if root else None, nothing, verdict)
    return plan


# The analyser's own cause keys as kinds of the closed taxonomy (diagnosis/localisation/taxonomy.py): the
# composer may only choose a kind id; keys with no kind name none.
CAUSE_KIND_OF = {
    "db_connection_pool_exhausted": "resource.pool", "worker_pool_exhausted": "resource.pool",
    "memory_leak_oom": "resource.memory", "gc_pauses": "resource.memory", "oom_killed": "resource.memory",
    "disk_full": "resource.disk", "inode_exhaustion": "resource.disk",
    "noisy_neighbour_cpu": "resource.cpu", "cpu_throttling": "resource.cpu",
    "slow_downstream_dependency": "dependency.database", "db_replication_lag": "dependency.database",
    "db_deadlock": "dependency.database", "db_lock_wait": "dependency.database",
    "db_too_many_connections": "dependency.database",
    "cache_memory_limit": "dependency.cache", "cache_disabled": "dependency.cache",
    "consumer_lag_rebalance": "dependency.queue", "upstream_breaking_change": "change.deploy",
    "missing_config": "change.config", "invalid_config": "change.config", "config_change": "change.config",
    "credentials_rejected": "change.secret", "image_pull": "change.image", "failed_scheduling": "scheduling.pending",
    "dns_failure": "network.dns", "tls_certificate_expired": "network.tls", "connection_refused": "network.refused",
    "upstream_rate_limited": "capacity.rate_limit",
}


def _diagnosis_hint(found: list[tuple[Mapping[str, Any], Any]], root: RootCause | None,
                    nothing: Mapping[str, Any] | None, verdict: str) -> dict[str, Any]:
    """The composer's choice for the structured diagnosis: an outcome, a cause-kind id, the root service
    (kept only when a cited record names it) and symptom claim ids; the server derives the onset and the
    rest (diagnosis/structured_diagnosis.py)."""
    concluded = verdict in ("PASS", "LOW_CONFID")
    hint: dict[str, Any] = {"outcome": "undetermined", "cause": None, "symptoms": []}
    root_service = None
    if concluded and root is not None:
        root_service = root.service
        if root.cause in CAUSE_KIND_BY_ID:
            hint.update(outcome="root_cause", cause=root.cause, service=root_service)
        elif root.cause in CAUSE_BY_KEY:
            hint.update(outcome="root_cause", cause=CAUSE_KIND_OF.get(root.cause), service=root_service)
    elif concluded and nothing is not None:
        hint["outcome"] = "nothing_wrong"
    seen = {root_service}
    for claim, finding in found:
        if isinstance(finding, (MetricMove, LogPattern, AlertFiring)) and finding.service not in seen:
            seen.add(finding.service)
            hint["symptoms"].append(claim["claim_id"])
    return hint
