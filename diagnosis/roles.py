"""The roles (auth groups, created by migration 0002_roles) that widen what a user may see or do (SPEC §9)."""

SUPPORT_STAFF = "support_staff"
AUDITOR = "auditor"
READ_ALL_GROUPS = (SUPPORT_STAFF, AUDITOR)
GIVE_FEEDBACK_PERMISSION = "diagnosis.give_feedback"
