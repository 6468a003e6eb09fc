"""The structured diagnosis of a run, derived by the server from verified claims and the records they cite.

Framework-free (stdlib and the project's framework-free modules). The composer only *chooses among
ids the server offers* (``DiagnosisChoice``): an outcome, a cause-kind id of the closed taxonomy
(``diagnosis.localisation.taxonomy.CAUSE_KINDS``) and the claim ids of the symptoms. Everything else
is read from the evidence:

- ``rootCause.service`` is the service label of a record the root-cause claims cite (a log record's
  ``service``, a metric series' or an alert's ``service`` label, a Kubernetes object's app label),
  resolved from the stored tool result at each citation's ``raw_path``: the composer may choose
  among those services (``record_services``), else the first cited record's counts;
- ``rootCause.startedAt`` is the onset of those records (``onset``: today the earliest timestamp);
- ``nothingWrong`` is refused while any cited record shows a problem (``problem_records``);
- claim ids follow ``CLAIM_ID_PATTERN`` and must be verified claims shown to the reader.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from diagnosis.contracts import KNOWLEDGE_TOOLS
from diagnosis.jsonpath import JsonPathError, parse
from diagnosis.localisation.records import service_of as labels_service, service_target
from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID, CAUSE_KINDS

CLAIM_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
CLAIM_ID_RE = re.compile(CLAIM_ID_PATTERN)
OUTCOMES = ("root_cause", "nothing_wrong", "undetermined")
CAUSE_KIND_IDS = tuple(kind.id for kind in CAUSE_KINDS)
MAX_SYMPTOMS = 12
ERROR_LEVELS = frozenset({"error", "err", "fatal", "critical", "crit", "panic", "alert", "emerg", "emergency", "severe"})
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?$")
_SERVICE = re.compile(r"^[A-Za-z0-9][\w.:/-]{0,127}$")
TIME_FIELDS = ("timestamp", "time", "ts", "activeAt", "startsAt", "eventTime", "firstTimestamp", "lastTimestamp")


@dataclass(frozen=True)
class CitedRecord:
    """The record a citation points into (the element of the result's top-level list it sits in)."""

    invocation_id: str
    tool_name: str
    path: str
    record: Mapping[str, Any]
    service: str | None
    at: str | None
    problem: str | None  # "error_log" | "firing_alert" | "warning_event" | None


@dataclass(frozen=True)
class DiagnosisChoice:
    """What the composer may choose (validated): an outcome, a cause kind, symptom claim ids."""

    outcome: str | None = None
    cause: str | None = None
    service: str | None = None  # kept only if a record the root claims cite names it
    symptoms: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "cause": self.cause, "service": self.service, "symptoms": list(self.symptoms)}


def claim_id_ok(value: Any) -> bool:
    return isinstance(value, str) and CLAIM_ID_RE.match(value) is not None


def choice_read(value: Any) -> DiagnosisChoice:
    """The composer's ``diagnosis`` choice, keeping only ids of the offered sets (never raises)."""
    if not isinstance(value, Mapping):
        return DiagnosisChoice()
    outcome = value.get("outcome") if value.get("outcome") in OUTCOMES else None
    cause = value.get("cause") if isinstance(value.get("cause"), str) and value["cause"] in CAUSE_KIND_BY_ID else None
    raw = value.get("symptoms") if isinstance(value.get("symptoms"), list) else []
    symptoms = tuple(dict.fromkeys(s for s in raw if claim_id_ok(s)))[:MAX_SYMPTOMS]
    return DiagnosisChoice(outcome=outcome, cause=cause, service=service_name(value.get("service")), symptoms=symptoms)


def empty_diagnosis() -> dict[str, Any]:
    """The structured diagnosis of a run that established nothing (no root cause, not healthy)."""
    return {"rootCause": None, "nothingWrong": False, "undetermined": True, "symptoms": []}


# --------------------------------------------------------------------------- records


def _labels(record: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("labels", "metric"):
        if isinstance(record.get(key), Mapping):
            return record[key]
    metadata = record.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("labels"), Mapping):
        return metadata["labels"]
    return {}


def service_name(value: Any) -> str | None:
    """`value` stripped when it reads as a service name (the one test of a name the server keeps), else None."""
    return value.strip() if isinstance(value, str) and _SERVICE.match(value.strip()) else None


def record_service(tool_name: str, record: Mapping[str, Any]) -> str | None:
    """The service of one record: its own ``service`` field, the workload a Kubernetes Service stands for
    (``localisation.records.service_target``), else what its labels say by the conventions the localiser reads
    them with (``localisation.records.service_of``: a service label, else its pod's workload)."""
    if tool_name in KNOWLEDGE_TOOLS:
        return None
    own = service_name(record.get("service"))
    if own:
        return own
    if tool_name == "query_kubernetes" and record.get("name") and {"selector", "externalName", "clusterIP"} & set(record):
        return service_name(service_target(record))  # a Service: the workload it stands for
    labels = _labels(record)
    return service_name(labels_service({str(k): v for k, v in labels.items() if isinstance(v, str)})) if labels else None


def record_time(record: Mapping[str, Any], tail: tuple) -> str | None:
    """When the record happened: its time field, or the sample cited inside a series (``values[i]``)."""
    for name in TIME_FIELDS:
        value = record.get(name)
        if isinstance(value, str) and _ISO.match(value.strip()):
            return value.strip()
    if len(tail) >= 2 and tail[0] == "values" and isinstance(tail[1], int):
        values = record.get("values")
        if isinstance(values, list) and -len(values) <= tail[1] < len(values):
            sample = values[tail[1]]
            if isinstance(sample, list) and sample and isinstance(sample[0], (int, float)) and not isinstance(sample[0], bool):
                return datetime.fromtimestamp(float(sample[0]), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return None


def record_problem(tool_name: str, record: Mapping[str, Any]) -> str | None:
    """Why a record rules out "nothing wrong": an error-level log record, a firing alert, a Warning event."""
    level = str(record.get("level") or record.get("severity_text") or "").strip().lower()
    if tool_name == "query_logs" and level in ERROR_LEVELS:
        return "error_log"
    state = str(record.get("state") or record.get("status") or "").strip().lower()
    if tool_name == "query_alerts" and state == "firing":
        return "firing_alert"
    if tool_name == "query_kubernetes" and str(record.get("type") or "").strip().lower() == "warning":
        return "warning_event"
    return None


def cited_record(*, invocation_id: str, tool_name: str, result: Any, raw_path: Any) -> CitedRecord | None:
    """The record a citation points into: the element of the first list on its path (``$.records[3]``
    for ``$.records[3].message``); the cited object itself when the path crosses no list."""
    if not isinstance(raw_path, str) or not isinstance(result, Mapping):
        return None
    try:
        segments = parse(raw_path)
    except JsonPathError:
        return None
    node: Any = result
    record, record_at, tail = (result if isinstance(result, Mapping) else None), 0, tuple(segments)
    for i, segment in enumerate(segments):
        if isinstance(segment, int):
            if not isinstance(node, list) or not -len(node) <= segment < len(node):
                return None
            node = node[segment]
            if isinstance(node, Mapping):
                record, record_at, tail = node, i + 1, tuple(segments[i + 1:])
                break
        else:
            if not isinstance(node, Mapping) or segment not in node:
                return None
            node = node[segment]
    if not isinstance(record, Mapping):
        return None
    path = "$" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in segments[:record_at])
    return CitedRecord(invocation_id=invocation_id, tool_name=tool_name, path=path, record=record,
                       service=record_service(tool_name, record), at=record_time(record, tail),
                       problem=record_problem(tool_name, record))


RecordsOf = Callable[[Mapping[str, Any]], list[CitedRecord]]


def records_resolver(lookup: Any, claims: Iterable[Mapping[str, Any]], *, run_id: str) -> RecordsOf:
    """``records_of(claim)``: the records a claim's bindings cite, read once from this run's stored
    results through the Gatekeeper's ``InvocationLookup``."""
    claims = [c for c in claims if isinstance(c, Mapping)]
    ids = {str(b.get("source_invocation_id")) for c in claims for b in c.get("evidence") or () if isinstance(b, Mapping)}
    rows = lookup.lookup(tuple(sorted(ids))) if ids else ()
    results = {r.invocation_id: r for r in rows if r.run_id == run_id}

    def records_of(claim: Mapping[str, Any]) -> list[CitedRecord]:
        found = []
        for b in claim.get("evidence") or ():
            if not isinstance(b, Mapping):
                continue
            row = results.get(str(b.get("source_invocation_id")))
            if row is None:
                continue
            rec = cited_record(invocation_id=row.invocation_id, tool_name=row.tool_name, result=row.result,
                               raw_path=b.get("raw_path"))
            if rec is not None:
                found.append(rec)
        return found

    return records_of


def no_records(claim: Mapping[str, Any]) -> list[CitedRecord]:
    return []


# --------------------------------------------------------------------------- the derivations (one function each)


def record_services(records: Iterable[CitedRecord]) -> list[str]:
    """The services the records name, in citation order, each once: the candidates a composer may choose."""
    return list(dict.fromkeys(r.service for r in records if r.service))


def service_of(records: Iterable[CitedRecord], chosen: str | None = None) -> str | None:
    """The root-cause service: the composer's choice when a cited record is of that service or names it as
    the host it called, else the service of the first cited record that names one (a claim's first
    citation is its primary evidence)."""
    records = list(records)
    named = record_services(records)
    if chosen and (chosen in named or any(names_service(r, chosen) for r in records)):
        return chosen
    return named[0] if named else None


def names_service(record: CitedRecord, service: str) -> bool:
    """Whether a cited record's own text names the service as the host it called (``svc:5432``,
    ``https://svc.ns.svc/``): a caller's error line is evidence about the dependency it names."""
    text = " ".join(str(record.record.get(k) or "") for k in ("message", "description"))
    return bool(_SERVICE.match(service)) and re.search(
        rf"(?<![\w.-]){re.escape(service)}(?=[.:/]|\s|$)", text) is not None


def onset(records: Iterable[CitedRecord]) -> str | None:
    """When the root cause began: the earliest timestamp among the cited records (the localiser's onset
    takes this place where it is known)."""
    times = sorted(r.at for r in records if r.at)
    return times[0] if times else None


def problem_records(records: Iterable[CitedRecord]) -> list[CitedRecord]:
    """The cited records that show a problem, so "nothing wrong" cannot be served over them."""
    return [r for r in records if r.problem]


def derive_diagnosis(*, choice: DiagnosisChoice, roots: list[str], shown: Collection[str],
                     verified: Mapping[str, Mapping[str, Any]], concluded: bool, records_of: RecordsOf,
                     summary: Callable[[Any], str], knowledge_root: bool) -> dict[str, Any]:
    """``{rootCause, nothingWrong, undetermined, symptoms}`` from what the answer shows.

    A root cause exists only when a verified root-cause claim is shown under a verdict; its service and
    onset come from the records it cites, its cause only from the closed kind set. "Nothing wrong" needs
    a verdict, no root cause, the composer's choice, and no cited record that shows a problem.
    """
    root_cause = None
    if roots and concluded and choice.outcome != "undetermined":
        records = [r for claim_id in roots for r in records_of(verified[claim_id])]
        root_cause = {
            "service": service_of(records, choice.service), "cause": choice.cause,
            "summary": summary(verified[roots[0]].get("statement", "")),
            "startedAt": onset(records), "claimIds": list(roots),
            "basis": "knowledge_only" if knowledge_root else "observed",
        }
    blocked = bool(problem_records(r for claim in verified.values() for r in records_of(claim)))
    nothing_wrong = root_cause is None and concluded and choice.outcome == "nothing_wrong" and not blocked
    symptoms = []
    for claim_id in choice.symptoms:
        if claim_id not in verified or claim_id not in shown or claim_id in roots:
            continue
        service = service_of(records_of(verified[claim_id]))
        if service:
            symptoms.append({"service": service, "summary": summary(verified[claim_id].get("statement", "")),
                             "claimIds": [claim_id]})
    return {"rootCause": root_cause, "nothingWrong": nothing_wrong,
            "undetermined": root_cause is None and not nothing_wrong, "symptoms": symptoms}
