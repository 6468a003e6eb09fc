"""Names of the alert-analysis graph: its nodes, state keys, decisions, reason codes and the keys each
node port may return (everything else belongs to the topology)."""

from __future__ import annotations


class AiOpsNode:
    INTAKE = "aiops_intake"
    SUPERVISOR = "aiops_planner"  # the supervisor's decision node (its model role is the planner)
    EXECUTOR = "aiops_executor"
    GATEKEEPER = "aiops_gatekeeper"
    REPORTER = "aiops_reporter"
    REPORT_CHECK = "aiops_report_check"
    FALLBACK = "aiops_fallback"

    ALL = (INTAKE, SUPERVISOR, EXECUTOR, GATEKEEPER, REPORTER, REPORT_CHECK, FALLBACK)


class Decision:
    PLAN = "PLAN"
    EXECUTE = "EXECUTE"
    FINISH = "FINISH"
    STOP = "STOP"  # not the model's: the supervisor port or the topology ends the loop by rule

    MODEL = (PLAN, EXECUTE, FINISH)


class AiOpsKey:
    ALERTS = "alerts"
    ALERTS_SOURCE = "alerts_source"
    INTAKE = "intake"  # {source, status, invocation_id?, error?}
    INTAKE_OUTCOME = "intake_outcome"  # the query_alerts outcome, citable by every task
    LANGUAGE = "language"
    TASKS = "tasks"
    RESULTS = "results"  # append reducer: one TaskResult per executed task
    DECISIONS = "decisions"  # append reducer: {round, decision, rationale, task_id}
    ROUND = "round"
    SUPERVISOR_STATUS = "supervisor_status"
    SUPERVISOR_RETRY_COUNT = "supervisor_retry_count"
    DECISION = "decision"  # {decision, rationale, task_id, ...} of the last supervisor run
    TERMINATION = "termination_reason"
    FAULT = "fault"
    CURRENT_TASK = "current_task"
    TASK_BUDGET = "task_budget"
    EXECUTOR_STATUS = "executor_status"
    TASK_OUTPUT = "task_output"  # the executor's claims, waiting for the task gatekeeper
    REPORTER_STATUS = "reporter_status"
    REPORTER_RETRY_COUNT = "reporter_retry_count"
    REPORTER_FAULT = "reporter_fault"
    REPORT_MARKDOWN = "report_markdown"  # the reporter's own text (audited, never served as is)
    REPORT_STATUS = "report_status"  # checked | emptied
    REPORT_CHECK = "report_check"
    FINAL_ANSWER = "final_answer"
    FALLBACK_REASON = "fallback_reason"
    DEGRADED = "degraded"
    ROUTE = "route"  # the route key the last node chose; set by the topology only
    EVENT_DETAIL = "event_detail"  # small extra fields a port adds to its published event
    ORCHESTRATION_EVENTS = "orchestration_events"

    ALL = frozenset({
        ALERTS, ALERTS_SOURCE, INTAKE, INTAKE_OUTCOME, LANGUAGE, TASKS, RESULTS, DECISIONS, ROUND,
        SUPERVISOR_STATUS, SUPERVISOR_RETRY_COUNT, DECISION, TERMINATION, FAULT, CURRENT_TASK, TASK_BUDGET,
        EXECUTOR_STATUS, TASK_OUTPUT, REPORTER_STATUS, REPORTER_RETRY_COUNT, REPORTER_FAULT, REPORT_MARKDOWN,
        REPORT_STATUS, REPORT_CHECK, FINAL_ANSWER, FALLBACK_REASON, DEGRADED, ROUTE, EVENT_DETAIL,
        ORCHESTRATION_EVENTS,
    })


K = AiOpsKey
N = AiOpsNode

PORT_OUTPUT_KEYS: dict[str, frozenset[str]] = {
    N.INTAKE: frozenset({K.ALERTS, K.ALERTS_SOURCE, K.INTAKE, K.INTAKE_OUTCOME, K.LANGUAGE, K.EVENT_DETAIL}),
    N.SUPERVISOR: frozenset({K.SUPERVISOR_STATUS, K.DECISION, K.TASKS, K.CURRENT_TASK, K.TASK_BUDGET,
                             K.TERMINATION, K.FAULT, K.EVENT_DETAIL}),
    N.EXECUTOR: frozenset({K.EXECUTOR_STATUS, K.TASK_OUTPUT, K.RESULTS, K.TASKS, K.EVENT_DETAIL}),
    N.GATEKEEPER: frozenset({K.RESULTS, K.EVENT_DETAIL}),
    N.REPORTER: frozenset({K.REPORTER_STATUS, K.REPORT_MARKDOWN, K.REPORTER_FAULT, K.EVENT_DETAIL}),
    N.REPORT_CHECK: frozenset({K.REPORT_STATUS, K.REPORT_CHECK, K.FINAL_ANSWER, K.EVENT_DETAIL}),
    N.FALLBACK: frozenset({K.REPORT_CHECK, K.FINAL_ANSWER, K.FALLBACK_REASON, K.EVENT_DETAIL}),
}


class AiOpsReason:
    """Why an alert-analysis node led where it did (stored per event and trace transition).

    alerts_given / query_alerts   intake read the alerts from the request / with query_alerts
    plan, execute, finish         the supervisor's decision (model)
    max_rounds                    the supervisor had used every round: report
    tool_budget_spent, no_active_alerts, alerts_unavailable, nothing_to_execute   the supervisor port stopped by rule
    invalid_output, retryable_failed   a technical failure, retried once (supervisor, reporter)
    retry_exhausted, non_retryable_failed, missing_status, unknown_status   the node gives up (supervisor: report what
                                  was verified; reporter: fallback)
    executed                      the task executor reported claims: the task gatekeeper checks them
    tool_blocked, failed          the task failed; the supervisor decides the next round
    gatekeeper_checked            the task's claims were checked; next round
    report_written                the reporter answered: report check
    report_checked                the served report was rendered from verified evidence: END
    no_verified_statement         every statement the reporter cited failed the check: fallback
    fallback_completed            the deterministic report was written: END
    """

    ALERTS_GIVEN = "alerts_given"
    QUERY_ALERTS = "query_alerts"
    MAX_ROUNDS = "max_rounds"
    INVALID_OUTPUT = "invalid_output"
    RETRYABLE_FAILED = "retryable_failed"
    RETRY_EXHAUSTED = "retry_exhausted"
    NON_RETRYABLE_FAILED = "non_retryable_failed"
    MISSING_STATUS = "missing_status"
    UNKNOWN_STATUS = "unknown_status"
    EXECUTED = "executed"
    TOOL_BLOCKED = "tool_blocked"
    FAILED = "failed"
    GATEKEEPER_CHECKED = "gatekeeper_checked"
    REPORT_WRITTEN = "report_written"
    REPORT_CHECKED = "report_checked"
    NO_VERIFIED_STATEMENT = "no_verified_statement"
    FALLBACK_COMPLETED = "fallback_completed"
