"""GET /metrics: the Prometheus exposition, for a scraper holding METRICS_TOKEN (Bearer) or calling
from METRICS_ALLOWED_NETWORKS. Neither configured: 404, metrics are never public by default."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from diagnosis.observability.metrics import exposition


def _error(code: str, message: str, status: int, headers: dict | None = None) -> JsonResponse:
    response = JsonResponse({"error": {"code": code, "message": message, "field": None}}, status=status)
    for key, value in (headers or {}).items():
        response[key] = value
    return response


def _from_allowed_network(request) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in settings.METRICS_ALLOWED_NETWORKS)


def _has_token(request) -> bool:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return bool(settings.METRICS_TOKEN) and scheme.lower() == "bearer" and \
        hmac.compare_digest(token.strip().encode(), settings.METRICS_TOKEN.encode())


@require_GET
def metrics_view(request):
    if not settings.METRICS_TOKEN and not settings.METRICS_ALLOWED_NETWORKS:
        return _error("not_found", "metrics are disabled: set METRICS_TOKEN or METRICS_ALLOWED_NETWORKS", 404)
    if _has_token(request) or _from_allowed_network(request):
        body, content_type = exposition()
        return HttpResponse(body, content_type=content_type)
    if settings.METRICS_TOKEN:
        return _error("not_authenticated", "a valid bearer token is required", 401, {"WWW-Authenticate": "Bearer"})
    return _error("permission_denied", "this address may not read the metrics", 403)
