"""One error shape for every endpoint: {"error": {"code", "message", "field"?}}."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler


class ApiError(exceptions.APIException):
    """Raise from a view with an explicit code, message, HTTP status and optional field."""

    def __init__(self, *, code: str, message: str, status_code: int = 400, field: str | None = None):
        self.status_code = status_code
        self.code, self.message, self.field = code, message, field
        super().__init__(detail=message, code=code)


def error_response(*, code: str, message: str, status_code: int, field: str | None = None, headers=None) -> Response:
    # A message may echo the caller's input: a lone surrogate in it must not make the error itself a 500.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    body = {"code": code, "message": message}
    if field:
        body["field"] = field
    return Response({"error": body}, status=status_code, headers=headers)


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
        return error_response(code=exc.code, message=exc.message, status_code=exc.status_code, field=exc.field)
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
