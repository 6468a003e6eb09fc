# size: every model of the write side lives here (SPEC §1); each is a table and its few lines.
"""The audit data model: sessions, runs, steps, tool invocations, cases and knowledge.

Table names follow the seed documents. Status fields are moved only by
`diagnosis.services.lifecycle`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F

from diagnosis import contracts
from diagnosis.search_text import answer_terms_of, root_summary_of
from diagnosis.ids import new_run_id


class ChatSession(models.Model):
    session_id = models.CharField(max_length=64, unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="chat_sessions")
    title = models.CharField(max_length=200, blank=True)
    summary = models.TextField(blank=True, help_text="Compacted history of older turns.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_message_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "chat_session"
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="chat_session_owner_created"),
            # The console lists sessions newest first by (created_at, id): one index walked backwards, no sort.
            models.Index(fields=["created_at", "id"], name="chat_session_created_id"),
        ]

    def __str__(self) -> str:
        return self.session_id


class DiagnosisRun(models.Model):
    class Flow(models.TextChoices):
        CHAT = "CHAT"
        AI_OPS = "AI_OPS"

    class Strategy(models.TextChoices):
        SIMPLE = "SIMPLE"
        DIAGNOSIS = "DIAGNOSIS"

    class Status(models.TextChoices):
        PENDING = "PENDING"
        RUNNING = "RUNNING"
        SUCCESS = "SUCCESS"
        FAILED = "FAILED"

    Verdict = models.TextChoices("Verdict", [v.name for v in contracts.Verdict])  # one Verdict: contracts.py

    class Feedback(models.TextChoices):
        USEFUL = "useful"
        NOT_USEFUL = "not_useful"

    run_id = models.CharField(max_length=40, unique=True, default=new_run_id, editable=False)
    session = models.ForeignKey(ChatSession, on_delete=models.PROTECT, related_name="runs")
    agent_flow = models.CharField(max_length=16, choices=Flow.choices, default=Flow.CHAT)
    strategy = models.CharField(max_length=16, choices=Strategy.choices, default=Strategy.DIAGNOSIS)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    question = models.TextField()
    answer = models.TextField(blank=True)
    degraded = models.BooleanField(default=False)
    effective_verdict = models.CharField(max_length=16, choices=Verdict.choices, blank=True)
    self_evaluation = models.JSONField(null=True, blank=True)
    orchestration_trace = models.JSONField(null=True, blank=True)
    # {rootCause: {service, cause, summary, startedAt, claimIds} | null, nothingWrong, undetermined, symptoms}
    diagnosis = models.JSONField(null=True, blank=True)

    feedback = models.CharField(max_length=16, choices=Feedback.choices, null=True, blank=True)
    feedback_comment = models.TextField(blank=True)
    feedback_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    feedback_at = models.DateTimeField(null=True, blank=True)

    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    step_count = models.PositiveIntegerField(default=0)
    tool_count = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    model_name = models.CharField(max_length=128, blank=True)
    prompt_version = models.CharField(max_length=64, blank=True)
    request_id = models.CharField(max_length=64, null=True, blank=True)
    celery_task_id = models.CharField(max_length=64, blank=True)
    # A replay re-runs a recorded run on the evidence it saw (diagnosis.services.replay).
    replay_of = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="replays")
    replay_options = models.JSONField(null=True, blank=True)
    # What the run analyses besides its question: an alert analysis's normalised alerts (AI_OPS only).
    input = models.JSONField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The lease (docs/RELIABILITY.md, "Leases, fencing and reaping"): drawn at each claim; every write of
    # the executing worker is conditional on the run being RUNNING under this token.
    claim_token = models.CharField(max_length=32, blank=True, default="")
    # A PENDING run past the queue deadline is published again once (requeued_at), then failed queue_lost.
    requeued_at = models.DateTimeField(null=True, blank=True)
    # Console search columns (traces/search.py, the run list's filters): computed by the database from
    # the columns above, so no writer sets them. question_terms holds the question's CJK bigrams for
    # databases whose full-text index cannot split Chinese (set on save by traces.fulltext).
    # The structured diagnosis's root-cause service, kept beside it (`save()`, and the lifecycle when it writes
    # a result) in one indexed column for the console's service filter. Not a generated column: SQLite's
    # table introspection cannot parse a JSON expression in the table's definition.
    root_service = models.CharField(max_length=128, null=True, blank=True, editable=False)
    tokens_total = models.GeneratedField(
        expression=F("prompt_tokens") + F("completion_tokens"), output_field=models.PositiveIntegerField(),
        db_persist=False,
    )
    question_terms = models.TextField(null=True, blank=True, editable=False)
    # The root cause's summary and the CJK terms of the answer and that summary, for the console's text
    # search (question, answer, root-cause service and summary); written beside `diagnosis` and `answer`.
    root_summary = models.TextField(null=True, blank=True, editable=False)
    answer_terms = models.TextField(null=True, blank=True, editable=False)

    TERMINAL = (Status.SUCCESS, Status.FAILED)

    @staticmethod
    def root_service_of(diagnosis) -> str | None:
        """`root_service` for a structured diagnosis (None without a root cause)."""
        root = diagnosis.get("rootCause") if isinstance(diagnosis, dict) else None
        service = root.get("service") if isinstance(root, dict) else None
        return str(service)[:128] if service else None

    def save(self, *args, **kwargs):
        self.root_service = self.root_service_of(self.diagnosis)
        self.root_summary = root_summary_of(self.diagnosis)
        self.answer_terms = answer_terms_of(self.answer, self.diagnosis)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and {"diagnosis", "answer"} & set(update_fields):
            kwargs["update_fields"] = {*update_fields, "root_service", "root_summary", "answer_terms"}
        super().save(*args, **kwargs)

    class Meta:
        db_table = "diagnosis_run"
        constraints = [
            # NULL request ids never collide (SQL unique semantics on both SQLite and MariaDB).
            models.UniqueConstraint(fields=["session", "request_id"], name="diagnosis_run_session_request_uniq"),
        ]
        indexes = [
            models.Index(fields=["session", "created_at"], name="diagnosis_run_session_created"),
            models.Index(fields=["status", "created_at"], name="diagnosis_run_status_created"),
            models.Index(fields=["-created_at"], name="diagnosis_run_created"),
            # The console lists newest first by (created_at, id): one index walked backwards, no sort.
            models.Index(fields=["created_at", "id"], name="diagnosis_run_created_id"),
            # Console filters: equality on the code or model, newest first.
            models.Index(fields=["error_code", "created_at"], name="diagnosis_run_error_created"),
            models.Index(fields=["model_name", "created_at"], name="diagnosis_run_model_created"),
            models.Index(fields=["feedback", "created_at"], name="diagnosis_run_feedback_created"),
            models.Index(fields=["duration_ms"], name="diagnosis_run_duration"),
            models.Index(fields=["root_service", "created_at"], name="diagnosis_run_service_created"),
            models.Index(fields=["tokens_total"], name="diagnosis_run_tokens_total"),
            models.Index(fields=["degraded", "created_at"], name="diagnosis_run_degraded_created"),
        ]

    def __str__(self) -> str:
        return self.run_id

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class AgentStep(models.Model):
    class Status(models.TextChoices):
        RUNNING = "RUNNING"
        COMPLETED = "COMPLETED"
        FAILED = "FAILED"

    run = models.ForeignKey(DiagnosisRun, on_delete=models.CASCADE, related_name="steps")
    session_id = models.CharField(max_length=64)
    step_index = models.PositiveIntegerField()
    node = models.CharField(max_length=32)
    agent = models.CharField(max_length=32)
    attempt = models.PositiveSmallIntegerField(default=1)
    model_name = models.CharField(max_length=128, blank=True)
    model_input = models.JSONField(default=list, blank=True)
    model_output = models.JSONField(null=True, blank=True)
    has_tool_call = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Places in the run's progress log (RunEvent): the step's start and end events are derived from this row.
    seq = models.PositiveBigIntegerField(null=True, blank=True)
    end_seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "agent_step"
        ordering = ["run_id", "step_index"]
        constraints = [models.UniqueConstraint(fields=["run", "step_index"], name="agent_step_run_index_uniq")]

    def __str__(self) -> str:
        return f"step {self.step_index} · {self.node}"


# Its fields read like AgentStep's (run, session, status, timings): each table spelled out, as Django models read best.
class ToolInvocation(models.Model):
    class Status(models.TextChoices):
        SUCCESS = "SUCCESS"
        ERROR = "ERROR"
        BLOCKED = "BLOCKED"

    run = models.ForeignKey(DiagnosisRun, on_delete=models.CASCADE, related_name="tool_invocations")
    session_id = models.CharField(max_length=64)
    step = models.ForeignKey(AgentStep, on_delete=models.SET_NULL, null=True, blank=True, related_name="tool_invocations")
    invocation_id = models.CharField(max_length=32)
    tool_name = models.CharField(max_length=64)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    result = models.JSONField(null=True, blank=True)
    truncated = models.BooleanField(default=False)
    error_message = models.TextField(blank=True)
    retrieval_details = models.JSONField(null=True, blank=True)
    evidence_refs = models.JSONField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # In a replay: the recorded invocation this one was served from, and how it was served
    # ("recorded", "not_in_recording", "live_fallback"); blank for a live run. No database constraint:
    # purging the recorded run stays a fast bulk delete and leaves the copy's pointer dangling.
    source_invocation = models.ForeignKey("self", on_delete=models.DO_NOTHING, db_constraint=False, null=True,
                                          blank=True, related_name="+")
    replay_mode = models.CharField(max_length=20, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Its place in the run's progress log (RunEvent): the tool event is derived from this row.
    seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "tool_invocation"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "invocation_id"], name="tool_invocation_run_inv_uniq"),
        ]
        indexes = [
            models.Index(fields=["invocation_id"], name="tool_invocation_inv_id"),
            models.Index(fields=["tool_name", "run"], name="tool_invocation_tool_run"),
        ]

    def __str__(self) -> str:
        return f"{self.invocation_id} {self.tool_name}"


class CaseLibraryEntry(models.Model):
    """A rated run's verified claims as knowledge (SPEC R3): a user's useful rating makes a CANDIDATE,
    support staff PUBLISH it, and only published cases are retrieved by later diagnoses. The asker's
    question and the run's answer are never stored here (the two columns stay empty)."""

    class Status(models.TextChoices):
        CANDIDATE = "CANDIDATE"
        PUBLISHED = "PUBLISHED"

    run = models.OneToOneField(DiagnosisRun, on_delete=models.CASCADE, related_name="case")
    session_id = models.CharField(max_length=64)
    question = models.TextField(blank=True, default="", help_text="Always empty: a case never stores the question.")
    answer = models.TextField(blank=True, default="", help_text="Always empty: a case never stores the answer.")
    root_cause_summary = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CANDIDATE, db_index=True)
    source_run_id = models.CharField(max_length=64, blank=True, default="")
    claims = models.JSONField(default=list, blank=True,
                              help_text="The verified claims of the source run, each with its verified excerpts.")
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_at = models.DateTimeField(null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)
    # Raised whenever the claims change or the case is published: a run that retrieves the case records the
    # version it saw, and a replay says when that version is no longer published (withdrawn).
    version = models.PositiveIntegerField(default=1)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "case_library"
        verbose_name = "case"
        verbose_name_plural = "case library"

    def __str__(self) -> str:
        return f"case: {self.question[:60]}" if self.question else self.case_id

    @property
    def case_id(self) -> str:
        """The case's public name in retrieval results: it never reveals the run it came from."""
        return f"case-{self.pk}"


class KnowledgeDocument(models.Model):
    path = models.CharField(max_length=255, unique=True)
    title = models.CharField(max_length=255)
    content = models.TextField()
    sha256 = models.CharField(max_length=64)
    loaded_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "knowledge_document"

    def __str__(self) -> str:
        return self.path


class KnowledgeChunk(models.Model):
    document = models.ForeignKey(KnowledgeDocument, on_delete=models.CASCADE, related_name="chunks")
    chunk_id = models.CharField(max_length=128, unique=True)
    ordinal = models.PositiveIntegerField()
    heading = models.CharField(max_length=255, blank=True)
    content = models.TextField()

    class Meta:
        db_table = "knowledge_chunk"
        ordering = ["document_id", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["document", "ordinal"], name="knowledge_chunk_doc_ord_uniq")]

    def __str__(self) -> str:
        return self.chunk_id


class MaintenanceLock(models.Model):
    """A named lock held by one process at a time until `locked_until` (the reaper's, across workers and
    beat), and what the holder last did: /api/health reports `last_run_at`."""

    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=128, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_result = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "maintenance_lock"

    def __str__(self) -> str:
        return self.name


class RunEvent(models.Model):
    """One progress event of a run that no other row tells (node transition, status, report), in order.

    A run's progress log is these rows and the events derived from its steps (start and end) and tool
    invocations, ordered by `seq`, a place in the run that all three tables share and that is the
    event's SSE id. The database is the log, so Server-Sent Events work the same with an in-process
    run and with a worker on another machine. One writer at a time holds a run (its lease holder,
    then the reaper), and it numbers the run's events in memory: no `Max(seq)` per event and no retry.
    Events written before the shared numbering have no `seq`; their primary key is their place.
    """

    run = models.ForeignKey(DiagnosisRun, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "run_event"
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="run_event_run_seq_uniq")]


class RunReview(models.Model):
    """A person's review of one run from the triage queue: who looked, why it is wrong, how it ended.

    Written only by `diagnosis.services.reviews`; every change keeps who made it and when.
    """

    class Trigger(models.TextChoices):
        DEGRADED = "degraded", "degraded run"
        LOW_CONFIDENCE = "low_confidence", "low-confidence verdict"
        NOT_USEFUL = "not_useful", "rated not useful"
        SAMPLED = "sampled", "random sample"
        MANUAL = "manual", "opened by hand"

    class Status(models.TextChoices):
        OPEN = "open"
        RESOLVED = "resolved"

    class Reason(models.TextChoices):
        WRONG_ROOT_CAUSE = "wrong_root_cause", "wrong root cause"
        MISSING_EVIDENCE = "missing_evidence", "missing evidence"
        BAD_CITATION = "bad_citation", "bad citation"
        UNSAFE_SUGGESTION = "unsafe_suggestion", "unsafe suggestion"
        OTHER = "other", "other"

    class Resolution(models.TextChoices):
        ANSWER_OK = "answer_ok", "answer is fine"
        ANSWER_WRONG = "answer_wrong", "answer is wrong"
        FOLLOW_UP = "follow_up", "needs a product fix"
        NOT_ACTIONABLE = "not_actionable", "not actionable"

    run = models.OneToOneField(DiagnosisRun, on_delete=models.CASCADE, related_name="review")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    reasons = models.JSONField(default=list, blank=True)
    resolution = models.CharField(max_length=16, choices=Resolution.choices, blank=True)
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "run_review"
        indexes = [models.Index(fields=["status", "created_at"], name="run_review_status_created")]

    def __str__(self) -> str:
        return f"review ({self.get_status_display()}): {self.get_trigger_display()}"


class RunReviewEntry(models.Model):
    """One recorded change to a review (opened, assigned, labelled, resolved, reopened): who and when."""

    review = models.ForeignKey(RunReview, on_delete=models.CASCADE, related_name="entries")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    action = models.CharField(max_length=16)
    changes = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "run_review_entry"
        ordering = ["review_id", "id"]
        verbose_name_plural = "run review entries"

    def __str__(self) -> str:
        return f"{self.action} at {self.created_at:%Y-%m-%d %H:%M}" if self.created_at else self.action


class RegressionSet(models.Model):
    """A named set of recorded runs that `manage.py regress` replays against a new prompt or model."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    filters = models.JSONField(default=dict, blank=True)
    runs = models.ManyToManyField(DiagnosisRun, related_name="regression_sets", blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "regression_set"

    def __str__(self) -> str:
        return self.name
