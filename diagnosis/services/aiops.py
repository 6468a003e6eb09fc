"""Alert analysis (F-60): validate a request or an Alertmanager webhook (version "4") into the run's
normalised alerts, submit an AI_OPS run like a chat run, and execute it on the alert-analysis graph.

The alerts cross the task boundary in the run's `input` column, written in the same transaction that
creates the run, so the task (eager or on another machine) always finds them; the stream's first
message says how many are analysed. A run with no firing alert analyses what `query_alerts` returns.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from django.conf import settings
from django.db import transaction

from diagnosis.agents.aiops import ACTIVE_STATES, INACTIVE_STATES, MAX_ROUNDS, alert_record
from diagnosis.agents.aiops_nodes import AlertSupervisor, outcome_of
from diagnosis.agents.catalog import prompt_audit
from diagnosis.agents.results import bounded_audit
from diagnosis.claim_sentences import plain_statement
from diagnosis.contracts import RunResult, known_verdict
from diagnosis.graph.aiops_topology import AiOpsKey
from diagnosis.graph.engine import GraphRunError
from diagnosis.graph.trace import build_orchestration_trace
from diagnosis.models import DiagnosisRun
from diagnosis.redaction import redact_text, redact_value
from diagnosis.services.run_context import RunContext
from diagnosis.services.submission import RunRefused, run_submit
from diagnosis.structured_diagnosis import claim_id_ok, empty_diagnosis, no_records, records_resolver, service_of

logger = logging.getLogger(__name__)

REPORT_EVENT = "report"
MAX_LABELS = 64
MAX_LABEL_VALUE_CHARS = 1024
MAX_ANNOTATION_CHARS = 4096
MAX_TIMESTAMP_CHARS = 64
MAX_TEXT_CHARS = 2048  # receiver, groupKey, externalURL, generatorURL, annotation names
LABEL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$")
STATES = ACTIVE_STATES + INACTIVE_STATES
WEBHOOK_KEYS = ("version", "groupKey", "receiver", "truncatedAlerts")


def max_alerts() -> int:
    return getattr(settings, "AIOPS_MAX_ALERTS", 50)


def max_input_bytes() -> int:
    return getattr(settings, "AIOPS_MAX_INPUT_BYTES", 64 * 1024)


def max_rounds() -> int:
    return getattr(settings, "AIOPS_MAX_ROUNDS", MAX_ROUNDS)


class AlertInputError(RunRefused):
    """A request the analysis cannot take: refused naming the field (invalid_input), nothing is created."""


@dataclass(frozen=True)
class AlertInput:
    """The validated, normalised (and redacted) alerts of one request."""

    alerts: list[dict]
    ignored: int
    source: str  # request | alertmanager
    language: str | None = None
    group_key: str | None = None
    receiver: str | None = None

    def input_data(self) -> dict[str, Any]:
        return {"alerts": self.alerts, "alertsTotal": len(self.alerts), "alertsIgnored": self.ignored,
                "source": self.source, "language": self.language, "groupKey": self.group_key, "receiver": self.receiver}


@dataclass(frozen=True)
class AiOpsSubmission:
    run: DiagnosisRun
    created: bool
    input: AlertInput = field(repr=False)


# --------------------------------------------------------------------------- validation


def _text(value: Any, where: str, *, limit: int = MAX_TEXT_CHARS) -> str:
    """A string the database and the prompts can take: bounded, no NUL, valid UTF-8 (no lone surrogate)."""
    if not isinstance(value, str):
        raise AlertInputError(where, f"{where} must be a string, got {_json_type(value)}")
    if len(value) > limit:
        raise AlertInputError(where, f"{where} is longer than {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise AlertInputError(where, f"{where} is not valid UTF-8 text") from None
    if "\x00" in value:
        raise AlertInputError(where, f"{where} must not contain NUL characters")
    return value


def _string_map(value: Any, where: str, *, limit: int, label_names: bool) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise AlertInputError(where, f"{where} must be an object of strings")
    if len(value) > MAX_LABELS:
        raise AlertInputError(where, f"{where} has {len(value)} entries; at most {MAX_LABELS} are allowed")
    clean = {}
    for key, item in value.items():
        if label_names and not LABEL_NAME_RE.match(str(key)):
            raise AlertInputError(where, f"{where}: {str(key)[:64]!r} is not a valid label name ([A-Za-z_][A-Za-z0-9_]*)")
        _text(key, where, limit=128)
        clean[str(key)] = _text(item, f"{where}.{key}", limit=limit)
    return clean


def _optional(payload: Mapping, key: str) -> bool:
    """True when the field is given; null counts as absent (as the OpenAPI schema documents)."""
    return payload.get(key) is not None


def _timestamp(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_TIMESTAMP_CHARS or not RFC3339_RE.match(value.strip()):
        raise AlertInputError(where, f"{where} must be an RFC 3339 timestamp such as 2026-11-29T10:00:00Z")
    try:
        datetime.fromisoformat(re.sub(r"[Zz]$", "+00:00", value.strip()))
    except ValueError:
        raise AlertInputError(where, f"{where} must be an RFC 3339 timestamp, got {value[:40]!r}") from None
    return value.strip()


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", int: "integer", float: "number", bool: "boolean",
            type(None): "null"}.get(type(value), type(value).__name__)


def _alert(raw: Any, index: int) -> dict[str, Any]:
    where = f"alerts[{index}]"
    if not isinstance(raw, Mapping):
        raise AlertInputError(where, f"{where} must be an object with labels and annotations")
    if "labels" not in raw:
        raise AlertInputError(f"{where}.labels", f"{where}.labels is required")
    labels = _string_map(raw["labels"], f"{where}.labels", limit=MAX_LABEL_VALUE_CHARS, label_names=True)
    if not labels.get("alertname", "").strip():
        raise AlertInputError(f"{where}.labels.alertname", f"{where}.labels.alertname is required")
    annotations = _string_map(raw["annotations"], f"{where}.annotations", limit=MAX_ANNOTATION_CHARS,
                              label_names=False) if _optional(raw, "annotations") else {}
    clean: dict[str, Any] = {"labels": labels, "annotations": annotations}
    allowed = {"state": STATES, "status": ("firing", "resolved")}
    for key, values in allowed.items():
        if _optional(raw, key):
            if not isinstance(raw[key], str) or raw[key].strip().lower() not in values:
                raise AlertInputError(f"{where}.{key}", f"{where}.{key} must be one of {', '.join(values)}")
            clean[key] = raw[key].strip().lower()
    for key in ("activeAt", "startsAt", "endsAt"):
        if _optional(raw, key):
            clean[key] = _timestamp(raw[key], f"{where}.{key}")
    if _optional(raw, "fingerprint"):
        clean["fingerprint"] = _text(raw["fingerprint"], f"{where}.fingerprint", limit=64)
    if _optional(raw, "generatorURL"):
        _text(raw["generatorURL"], f"{where}.generatorURL")  # checked, not kept: a backlink may carry secrets
    return clean


def alerts_parse(payload: Any) -> AlertInput:
    """Validate `{sessionId?, alerts?: [...]}` or an Alertmanager webhook payload (version "4").

    Resolved (and inactive) alerts are ignored; duplicates (same fingerprint, or same labels) are kept once.
    """
    if not isinstance(payload, Mapping):
        raise AlertInputError("body", "the request body must be a JSON object")
    webhook = any(key in payload for key in WEBHOOK_KEYS)
    if webhook:
        if payload.get("version") != "4":
            raise AlertInputError("version", 'only Alertmanager webhook payloads of version "4" are accepted')
        if not isinstance(payload.get("alerts"), list):
            raise AlertInputError("alerts", "an Alertmanager webhook payload needs an alerts list")
    # The webhook's other fields are checked whatever the shape, so a malformed one is never silently ignored.
    if _optional(payload, "status") and payload["status"] not in ("firing", "resolved"):
        raise AlertInputError("status", "status must be firing or resolved")
    for key in ("receiver", "groupKey", "externalURL"):
        if _optional(payload, key):
            _text(payload[key], key)
    for key in ("groupLabels", "commonLabels", "commonAnnotations"):
        if _optional(payload, key):
            _string_map(payload[key], key, limit=MAX_ANNOTATION_CHARS, label_names=key != "commonAnnotations")
    truncated = payload.get("truncatedAlerts")
    if truncated is not None and (not isinstance(truncated, int) or isinstance(truncated, bool) or truncated < 0):
        raise AlertInputError("truncatedAlerts", "truncatedAlerts must be a non-negative integer")
    language = payload.get("language")
    if language is not None and language not in ("en", "zh"):
        raise AlertInputError("language", "language must be en or zh")
    raws = payload.get("alerts")
    if raws is None:
        raws = []
    if not isinstance(raws, list):
        raise AlertInputError("alerts", f"alerts must be a list, got {_json_type(raws)}")
    if len(raws) > max_alerts():
        raise AlertInputError("alerts", f"at most {max_alerts()} alerts per request, got {len(raws)}")
    size = len(json.dumps(raws, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    if size > max_input_bytes():
        raise AlertInputError("alerts", f"the alerts take {size} bytes; at most {max_input_bytes()} are accepted")
    source = "alertmanager" if webhook else "request"
    alerts, ignored, seen = [], 0, set()
    for index, raw in enumerate(raws):
        clean = _alert(raw, index)
        state = clean.get("status") or clean.get("state") or "firing"
        if state in INACTIVE_STATES:
            ignored += 1
            continue
        key = clean.get("fingerprint") or json.dumps(sorted(clean["labels"].items()))
        if key in seen:
            continue
        seen.add(key)
        clean = redact_value(clean)
        alerts.append(alert_record({**clean, "state": state}, alert_id=f"a{len(alerts) + 1}", source=source))
    return AlertInput(alerts=alerts, ignored=ignored, source=source, language=language,
                      group_key=redact_text(str(payload["groupKey"]))[:500] if webhook and payload.get("groupKey") else None,
                      receiver=redact_text(str(payload["receiver"]))[:200] if webhook and payload.get("receiver") else None)


def _question(data: AlertInput) -> str:
    """The run's question: what is analysed, in one readable line (the alerts themselves are in its input)."""
    if not data.alerts:
        return "Analyse the active alerts (none were given: they are read with query_alerts)."
    names = ", ".join(f"{a['alertname']} ({a['service'] or '-'})" for a in data.alerts[:10])
    more = f" and {len(data.alerts) - 10} more" if len(data.alerts) > 10 else ""
    return f"Analyse {len(data.alerts)} active alert(s): {names}{more}."[: min(1000, settings.CHAT_MAX_QUESTION_CHARS)]


# --------------------------------------------------------------------------- submit


def aiops_submit(*, user, payload: Any, session_id: str | None = None, request_id: str | None = None) -> AiOpsSubmission:
    """Create the AI_OPS run PENDING (owned by the caller, enqueued after commit like a chat run), with
    its alerts as its input. The same requestId twice in a session returns the same run."""
    data = alerts_parse(payload)
    with transaction.atomic():  # the run, its input and the enqueue (on commit) go together
        submission = run_submit(user=user, question=_question(data), session_id=session_id, request_id=request_id,
                                 flow=DiagnosisRun.Flow.AI_OPS)
        if submission.created:
            submission.run.input = data.input_data()
            DiagnosisRun.objects.filter(pk=submission.run.pk).update(input=submission.run.input)
        elif submission.run.agent_flow != DiagnosisRun.Flow.AI_OPS:
            raise AlertInputError("requestId", "this requestId already names a chat run in this session")
    return AiOpsSubmission(submission.run, submission.created, data)


def aiops_input(run: DiagnosisRun) -> dict[str, Any]:
    """The alerts submitted with the run (its input); empty when there is none."""
    return dict(run.input) if isinstance(run.input, dict) else {}


# --------------------------------------------------------------------------- execute


def aiops_diagnosis(outcome, agent) -> dict[str, Any]:
    """The structured diagnosis of an alert analysis: no single root cause (each alert has its own
    findings), one symptom per task with verified claims (its service read from the records they cite),
    and the coverage: alerts analysed out of alerts received."""
    claims = [c for r in outcome.results for c in r.verified_claims[:1]]
    records_of = records_resolver(agent.lookup, claims, run_id=agent.run_id) if claims else no_records
    symptoms = []
    for claim in claims:
        service = service_of(records_of(claim))
        if service and claim_id_ok(claim.get("claim_id")):
            symptoms.append({"service": service, "summary": plain_statement(claim.get("statement", "")),
                             "claimIds": [claim["claim_id"]]})
    return redact_value({**empty_diagnosis(), "symptoms": symptoms, "coverage": outcome.coverage})


def aiops_execute(rc: RunContext) -> DiagnosisRun | None:
    """Run the alert-analysis graph for a claimed AI_OPS run and save the checked report with its
    `stategraph-v1` orchestration trace. The supervisor decisions, the per-task Gatekeeper audits and
    the report check go to `self_evaluation`."""
    run, publish, budget, tools = rc.run, rc.publish, rc.budget, rc.tools
    submitted = aiops_input(run)
    alerts = [a for a in submitted.get("alerts") or [] if isinstance(a, dict)]
    supervisor = AlertSupervisor(rc.agent, max_rounds=max_rounds(), on_event=publish, heartbeat=rc.heartbeat)
    state: Mapping[str, Any] = {}
    try:
        for state in supervisor.stream(alerts=alerts or None, language=submitted.get("language")):
            pass
    except GraphRunError as exc:
        partial = exc.partial_state or {}
        events = list(partial.get(AiOpsKey.ORCHESTRATION_EVENTS) or ())
        trace = build_orchestration_trace(events, partial, interrupted_at=exc.node) if events else None
        return rc.fail(code=exc.code, message=str(exc), partial=RunResult(orchestration_trace=trace))
    outcome = outcome_of(state, max_rounds=supervisor.max_rounds)
    report = redact_text(outcome.report_markdown).strip()
    evaluation = bounded_audit({
        "aiops_rule_evaluation": outcome.rule_evaluation(outcomes=tools.outcomes, budget=budget.to_dict(tools),
                                                         alerts_ignored=int(submitted.get("alertsIgnored") or 0)),
        "aiops_audit": outcome.audit(),
        "prompt_audit": prompt_audit(),
    })
    if not report:
        return rc.fail(code="missing_answer", message="the alert analysis produced no report",
                       partial=RunResult(self_evaluation=evaluation, orchestration_trace=outcome.orchestration_trace))
    # The report goes out before the terminal status: a stream that sees the run finished has it already.
    publish(REPORT_EVENT, {"reportMarkdown": report, "degraded": outcome.degraded,
                           "citedInvocationIds": outcome.cited_invocation_ids,
                           "alertsTotal": len(outcome.alerts), "alertsSource": outcome.alerts_source})
    return rc.succeed(RunResult(answer=report, degraded=outcome.degraded, self_evaluation=evaluation,
                                effective_verdict=known_verdict(outcome.verdict),
                                diagnosis=aiops_diagnosis(outcome, rc.agent),
                                orchestration_trace=outcome.orchestration_trace))
