"""The reviewer's own rows in the console: score configurations with the scores given by them, and saved
views of the run list. Audit rows themselves live in the diagnosis app and are never written here."""

from __future__ import annotations

from django.conf import settings
from django.db import models

NUMERIC_SCALE = ("1", "2", "3", "4", "5")


class ScoreConfig(models.Model):
    """A score reviewers give beside the binary feedback: numeric 1-5 or one of named categories."""

    class Kind(models.TextChoices):
        NUMERIC = "numeric", "Numeric (1-5)"
        CATEGORICAL = "categorical", "Categorical"

    name = models.CharField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    categories = models.JSONField(default=list, blank=True, help_text="The allowed values of a categorical score.")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "console_score_config"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def values(self) -> tuple[str, ...]:
        if self.kind == self.Kind.NUMERIC:
            return NUMERIC_SCALE
        return tuple(str(c) for c in self.categories or ())


class RunScore(models.Model):
    """One reviewer's value of one score on one run; giving it again replaces it."""

    run = models.ForeignKey("diagnosis.DiagnosisRun", on_delete=models.CASCADE, related_name="scores")
    config = models.ForeignKey(ScoreConfig, on_delete=models.PROTECT, related_name="scores")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    value = models.CharField(max_length=64)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "console_run_score"
        constraints = [models.UniqueConstraint(fields=["run", "config", "user"], name="console_run_score_once")]


class SavedView(models.Model):
    """A reviewer's named run-list view: its filters, search and sort (the query) and its columns."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=80)
    query = models.CharField(max_length=2000, blank=True)
    columns = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "console_saved_view"
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="console_saved_view_name")]

    def __str__(self) -> str:
        return self.name
