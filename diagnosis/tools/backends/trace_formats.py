"""The two trace wire formats, parsed into ``traces.Span``.

OTLP JSON as Tempo marshals it (gogo jsonpb: base64 ids, enum names, ``batches``) and as OTLP/JSON
proper prints it (hex ids, integer enums, ``resourceSpans``); and the span model of Jaeger's
internal ``/api`` (µs times, tags, ``processes``). REFERENCE: docs/TOOLS.md. Stdlib only.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from diagnosis.tools.backends.base import BackendError
from diagnosis.tools.backends.traces import Span, normalise_trace_id

__all__ = ["spans_from_otlp", "spans_from_jaeger", "KINDS"]

KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


# --- OTLP JSON (Tempo; Jaeger api_v3) ---------------------------------------------------------------------


def _otlp_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a plain JSON value (``intValue`` arrives as a string)."""
    if not isinstance(value, Mapping):
        return value
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return str(value["intValue"])
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])
        except (TypeError, ValueError):
            return str(value["doubleValue"])
    if "arrayValue" in value:
        return [_otlp_value(v) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return {kv.get("key"): _otlp_value(kv.get("value")) for kv in (value["kvlistValue"] or {}).get("values") or []
                if isinstance(kv, Mapping)}
    if "bytesValue" in value:
        return str(value["bytesValue"])
    return None


def _exception_message(events: Iterable[Mapping[str, Any]]) -> str:
    """The first ``exception.message`` of a span's events (OTel records exceptions as events)."""
    for event in events:
        message = event.get("exception.message")
        if isinstance(message, str) and message.strip():
            return message.strip()
    return ""


def _otlp_attributes(items: Any) -> dict[str, Any]:
    out = {}
    for item in items or []:
        if isinstance(item, Mapping) and isinstance(item.get("key"), str):
            out[item["key"]] = _otlp_value(item.get("value"))
    return out


def _otlp_enum(value: Any, names: Mapping[str, int]) -> int:
    """``"SPAN_KIND_CLIENT"`` (gogo jsonpb) or ``3`` (OTLP/JSON) -> the number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        return names.get(value.upper(), 0)
    return 0


_KIND_NAMES = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
               "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def spans_from_otlp(body: Any, *, backend: str) -> list[Span]:
    """Every span of an OTLP JSON trace body: ``{"batches"}``, ``{"resourceSpans"}`` or ``{"trace": {…}}``."""
    if not isinstance(body, Mapping):
        raise BackendError(f"{backend} returned a trace that is not a JSON object", backend=backend)
    inner = body.get("trace") if isinstance(body.get("trace"), Mapping) else body
    if isinstance(body.get("result"), Mapping):  # Jaeger api_v3
        inner = body["result"]
    resource_spans = inner.get("resourceSpans") or body.get("batches") or []
    if not isinstance(resource_spans, list):
        raise BackendError(f"{backend} returned a malformed trace (resourceSpans is not a list)", backend=backend)
    spans = []
    for rs in resource_spans:
        if not isinstance(rs, Mapping):
            continue
        resource = _otlp_attributes((rs.get("resource") or {}).get("attributes"))
        service = str(resource.get("service.name") or "unknown")
        for scope in (rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []):
            for raw in (scope or {}).get("spans") or []:
                if not isinstance(raw, Mapping):
                    continue
                start, end = _int(raw.get("startTimeUnixNano")), _int(raw.get("endTimeUnixNano"))
                status = raw.get("status") or {}
                code = _otlp_enum(status.get("code"), _STATUS_NAMES)
                message = str(status.get("message") or "") or _exception_message(
                    _otlp_attributes(e.get("attributes")) for e in raw.get("events") or [] if isinstance(e, Mapping))
                parent = raw.get("parentSpanId")
                spans.append(Span(
                    trace_id=normalise_trace_id(raw.get("traceId")),
                    span_id=normalise_trace_id(raw.get("spanId"), argument="spanId", width=16),
                    parent_span_id=normalise_trace_id(parent, argument="parentSpanId", width=16) if parent else None,
                    service=service,
                    operation=str(raw.get("name") or ""),
                    kind=KINDS.get(_otlp_enum(raw.get("kind"), _KIND_NAMES), "unspecified"),
                    start_ns=start,
                    duration_ns=max(0, end - start),
                    status={2: "error", 1: "ok"}.get(code, "unset"),
                    status_message=message,
                    attributes=_otlp_attributes(raw.get("attributes")),
                ))
    return spans


# --- Jaeger's internal /api model ----------------------------------------------------------------------


def _jaeger_tags(tags: Any) -> dict[str, Any]:
    out = {}
    for tag in tags or []:
        if isinstance(tag, Mapping) and isinstance(tag.get("key"), str):
            out[tag["key"]] = tag.get("value")
    return out


def _jaeger_status(tags: Mapping[str, Any]) -> tuple[str, str]:
    """error | ok | unset, and the status message, from the tags Jaeger maps OTel status onto."""
    code = str(tags.get("otel.status_code") or "").upper()
    http_status = _int(tags.get("http.response.status_code") or tags.get("http.status_code"), 0)
    message = str(tags.get("otel.status_description") or "")
    if tags.get("error") in (True, "true") or code == "ERROR" or http_status >= 500:
        return "error", message
    return ("ok" if code == "OK" else "unset"), message


def spans_from_jaeger(trace: Any, *, backend: str = "jaeger") -> list[Span]:
    """Every span of one trace of Jaeger's ``/api/traces`` model (times in µs, service via ``processes``)."""
    if not isinstance(trace, Mapping) or not isinstance(trace.get("spans"), list):
        raise BackendError(f"{backend} returned a malformed trace (no spans list)", backend=backend)
    processes = trace.get("processes") or {}
    spans = []
    for raw in trace["spans"]:
        if not isinstance(raw, Mapping):
            continue
        tags = _jaeger_tags(raw.get("tags"))
        process = processes.get(raw.get("processID")) or raw.get("process") or {}
        parent = next((ref.get("spanID") for ref in raw.get("references") or []
                       if isinstance(ref, Mapping) and ref.get("refType") == "CHILD_OF"), None)
        status, message = _jaeger_status(tags)
        message = message or _exception_message(_jaeger_tags(log.get("fields")) for log in raw.get("logs") or []
                                                if isinstance(log, Mapping))
        kind = str(tags.pop("span.kind", "") or "internal").lower()
        for key in ("otel.status_code", "otel.status_description", "error"):
            tags.pop(key, None)
        spans.append(Span(
            trace_id=normalise_trace_id(raw.get("traceID") or trace.get("traceID")),
            span_id=normalise_trace_id(raw.get("spanID"), argument="spanID", width=16),
            parent_span_id=normalise_trace_id(parent, argument="spanID", width=16) if parent else None,
            service=str(process.get("serviceName") or "unknown"),
            operation=str(raw.get("operationName") or ""),
            kind=kind if kind in KINDS.values() else "unspecified",
            start_ns=_int(raw.get("startTime")) * 1000,
            duration_ns=max(0, _int(raw.get("duration"))) * 1000,
            status=status,
            status_message=message,
            attributes=tags,
        ))
    return spans
