"""Public identifiers: run ids, session ids and the short invocation ids that claims cite."""

import secrets
import uuid

from diagnosis.contracts import RUN_ID_RE, SESSION_ID_RE


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
