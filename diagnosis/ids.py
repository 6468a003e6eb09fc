"""Public identifiers: run ids, session ids and the short invocation ids that claims cite."""

import re
import secrets
import uuid

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
RUN_ID_RE = re.compile(r"^run-[0-9a-f]{32}$")
INVOCATION_ID_RE = re.compile(r"^inv-[0-9a-f]{8}$")


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex}"


def new_session_id() -> str:
    return f"s-{uuid.uuid4().hex}"


def new_invocation_id() -> str:
    return f"inv-{secrets.token_hex(4)}"


def is_valid_session_id(value: str) -> bool:
    return isinstance(value, str) and bool(SESSION_ID_RE.fullmatch(value))


def is_valid_run_id(value: str) -> bool:
    return isinstance(value, str) and bool(RUN_ID_RE.fullmatch(value))
