"""One error shape for every endpoint: {"error": {"code", "message", "field"?}}."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from diagnosis.services.submission import BrokerUnavailable, RunRefused, SessionNotFound

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = "10"  # a dependency outage: how soon a client may try again


class ApiError(exceptions.APIException):
    """Raise from a view with an explicit code, message, HTTP status and optional field (and headers,
    e.g. Retry-After on a 503)."""

    def __init__(self, *, code: str, message: str, status_code: int = 400, field: str | None = None,
                 headers: dict | None = None):
        self.status_code = status_code
        self.code, self.message, self.field = code, message, field
        self.headers = headers or ({"Retry-After": RETRY_AFTER_SECONDS} if status_code == 503 else None)
        super().__init__(detail=message, code=code)


# --- bounded parsing of ids and headers -------------------------------------------------------------------

MAX_INT_DIGITS = 18  # fits a signed 64-bit column; int() of thousands of digits would raise (or take CPU)


def parse_bounded_int(value, *, field: str, default: int | None = None, max_digits: int = MAX_INT_DIGITS) -> int:
    """A non-negative decimal integer of at most `max_digits` ASCII digits; ApiError 400 otherwise.
    The length is checked before parsing, so no input can make int() itself fail or spin."""
    if value is None or value == "":
        if default is not None:
            return default
        raise ApiError(code="invalid_input", message=f"{field} is required", field=field)
    text = str(value)[: max_digits + 1]
    if not (text.isascii() and text.isdigit()) or len(str(value)) > max_digits:  # isdigit() alone accepts "²"
        raise ApiError(code="invalid_input", field=field,
                       message=f"{field} must be a non-negative integer of at most {max_digits} digits")
    return int(text)


# --- dependency outages ----------------------------------------------------------------------------------

def dependency_unavailable(exc: BaseException) -> tuple[str, str] | None:
    """(code, message) when `exc` means a dependency is down: the database, the broker or the cache."""
    if isinstance(exc, (OperationalError, InterfaceError)) or (
            isinstance(exc, DatabaseError) and "connection" in str(exc).lower()):
        return "database_unavailable", "The database is unavailable. Retry shortly."
    try:
        from kombu.exceptions import OperationalError as BrokerError
    except ImportError:  # pragma: no cover - kombu ships with celery
        BrokerError = ()
    if BrokerError and isinstance(exc, BrokerError):
        return "broker_unavailable", "The task queue (Redis) is unavailable. Retry shortly."
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover
        return None
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError)):
        return "cache_unavailable", "The cache (Redis) is unavailable. Retry shortly."
    return None


def unavailable_response(code: str, message: str) -> Response:
    return error_response(code=code, message=message, status_code=503, headers={"Retry-After": RETRY_AFTER_SECONDS})


def error_response(*, code: str, message: str, status_code: int, field: str | None = None, headers=None) -> Response:
    # A message may echo the caller's input: a lone surrogate in it must not make the error itself a 500.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    body = {"code": code, "message": message}
    if field:
        body["field"] = field
    return Response({"error": body}, status=status_code, headers=headers)


# --- refused runs ----------------------------------------------------------------------------------------

# A refused run's code -> its HTTP status; any other code is a 400. Services raise codes, never statuses.
REFUSAL_STATUS = {"too_many_active_runs": 429, "not_replayable": 409, "run_not_finished": 409}
REFUSAL_RETRY_AFTER = {429: "5"}
SUBMISSION_ERRORS = (RunRefused, BrokerUnavailable, SessionNotFound)


def submission_error_response(exc: Exception) -> Response:
    """The answer to a refused submission (chat, alert analysis and replay alike)."""
    if isinstance(exc, BrokerUnavailable):
        return error_response(code="broker_unavailable", status_code=503, headers={"Retry-After": RETRY_AFTER_SECONDS},
                              message="The task queue (Redis) is unavailable; the run was recorded FAILED. Retry shortly.")
    if isinstance(exc, SessionNotFound):
        return error_response(code="not_found", message="session not found", status_code=404, field="sessionId")
    status_code = REFUSAL_STATUS.get(exc.code, 400)
    retry_after = REFUSAL_RETRY_AFTER.get(status_code)
    return error_response(code=exc.code, message=exc.message, status_code=status_code, field=exc.field,
                          headers={"Retry-After": retry_after} if retry_after else None)


def _first_validation_error(detail, prefix: str = "") -> tuple[str | None, str]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = key if key != "non_field_errors" else None
            field, message = _first_validation_error(value, f"{prefix}{name}" if name else prefix)
            return field or (f"{prefix}{name}" if name else None), message
    if isinstance(detail, list) and detail:
        return _first_validation_error(detail[0], prefix)
    return (prefix or None), str(detail)


def _raised_while_parsing_the_body(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == "rest_framework.parsers":
            return True
        tb = tb.tb_next
    return False


def api_exception_handler(exc, context):
    if isinstance(exc, ApiError):
        return error_response(code=exc.code, message=exc.message, status_code=exc.status_code, field=exc.field,
                              headers=exc.headers)
    outage = dependency_unavailable(exc)
    if outage is not None:
        logger.error("%s: %s: %s", outage[0], type(exc).__name__, exc)
        return unavailable_response(*outage)
    # Hostile bodies: both would otherwise escape DRF as a bare HTML 400 and a 500.
    if isinstance(exc, RequestDataTooBig):
        return error_response(code="payload_too_large", status_code=413,
                              message=f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.")
    if isinstance(exc, RecursionError) and _raised_while_parsing_the_body(exc):
        return error_response(code="invalid_input", status_code=400, message="JSON parse error - nested too deeply.")
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        field, message = _first_validation_error(exc.detail)
        message = f"{field}: {message}" if field and not message.startswith(field) else message
        return error_response(code="invalid_input", message=message, status_code=400, field=field)
    codes = {
        status.HTTP_401_UNAUTHORIZED: "not_authenticated", status.HTTP_403_FORBIDDEN: "permission_denied",
        status.HTTP_404_NOT_FOUND: "not_found", status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
        status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type", status.HTTP_429_TOO_MANY_REQUESTS: "throttled",
    }
    detail = exc.detail if hasattr(exc, "detail") else str(exc)
    message = detail if isinstance(detail, str) else str(detail)
    headers = {k: v for k, v in response.items() if k in ("WWW-Authenticate", "Retry-After", "Allow")}
    return error_response(code=codes.get(response.status_code, "error"), message=message,
                          status_code=response.status_code, headers=headers)


class ApiErrorMiddleware:
    """Under /api/, whatever escapes the views (and DRF's handler) still answers in the JSON error shape:
    a dependency outage 503 with Retry-After, anything else 500 `server_error`. Never an HTML page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if not request.path.startswith("/api/"):
            return None
        outage = dependency_unavailable(exc)
        if outage is not None:
            logger.error("%s %s: %s: %s", request.method, request.path, type(exc).__name__, exc)
            return JsonResponse({"error": {"code": outage[0], "message": outage[1]}}, status=503,
                                headers={"Retry-After": RETRY_AFTER_SECONDS})
        logger.exception("%s %s failed", request.method, request.path)
        return JsonResponse({"error": {"code": "server_error", "message": "Internal server error."}}, status=500)
