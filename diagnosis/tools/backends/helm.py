"""Helm release history, read from Helm's own storage without keeping any value (Helm 3 and 4).

Helm stores one Secret (driver ``secret``, the default) or ConfigMap (``configmap``) per release
revision, named ``sh.helm.release.v1.<release>.v<revision>`` and labelled ``owner=helm``,
``name``, ``version`` and ``status``. The revisions are first listed as metadata only; just the
ones inside the window (and the revision before each, to say what changed) are then read whole.
Their ``release`` payload (base64 of gzip of JSON; the API adds one more base64 layer to a Secret)
is decoded in memory and only ``RELEASE_FIELDS`` survive it: the user values, chart values and
templates, and the rendered manifest never leave this module. Stdlib only.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from datetime import datetime
from typing import Any

from diagnosis.tools.backends.base import BackendError, parse_time
from diagnosis.tools.backends.changes import ChangeQuery, change_record
from diagnosis.tools.backends.kubernetes_api import METADATA_ONLY, KubernetesReader

__all__ = ["HelmHistorySource", "decode_release", "RELEASE_FIELDS"]

MAX_READS = 20  # revisions read whole per query (each may be up to 1 MiB)
MAX_RELEASE_BYTES = 32 * 1024 * 1024  # a decompressed release larger than this is refused (a gzip bomb)
GZIP_MAGIC = b"\x1f\x8b\x08"
RELEASE_FIELDS = "name, namespace, version, info.{status, description, first_deployed, last_deployed}, " \
                 "chart.metadata.{name, version, appVersion}"


def _b64(value: Any) -> bytes:
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError, TypeError):
        raise BackendError("a Helm release record is not base64", backend="helm") from None


def decode_release(encoded: str, *, driver: str) -> dict[str, Any]:
    """The kept fields of one stored release (``RELEASE_FIELDS``); everything else is dropped here."""
    raw = _b64(encoded)
    if driver == "secret" and not raw.startswith(GZIP_MAGIC):
        raw = _b64(raw)  # Secret data is base64 of Helm's own base64
    if raw.startswith(GZIP_MAGIC):
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(raw, MAX_RELEASE_BYTES)
        except zlib.error:
            raise BackendError("a Helm release record is not valid gzip", backend="helm") from None
        if inflater.unconsumed_tail:
            raise BackendError("a Helm release record is larger than 32 MiB decompressed", backend="helm")
    try:
        release = json.loads(raw)
    except ValueError:
        raise BackendError("a Helm release record is not JSON", backend="helm") from None
    if not isinstance(release, dict):
        raise BackendError("a Helm release record is not a JSON object", backend="helm")
    info = release.get("info") or {}
    chart = (release.get("chart") or {}).get("metadata") or {}
    return {
        "name": release.get("name"), "namespace": release.get("namespace"), "version": release.get("version"),
        "info": {k: info.get(k) for k in ("status", "description", "first_deployed", "last_deployed")},
        "chart": {"metadata": {k: chart.get(k) for k in ("name", "version", "appVersion")}},
    }


def _chart(release: dict[str, Any]) -> str:
    meta = release["chart"]["metadata"]
    text = f"{meta.get('name') or 'MISSING'}-{meta.get('version') or '?'}"
    return text + (f" (app {meta['appVersion']})" if meta.get("appVersion") else "")


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value, argument="time") if value else None
    except BackendError:
        return None


class HelmHistorySource:
    """Helm releases of one namespace, from their storage objects (GET and LIST only)."""

    name = "helm"
    kinds = ("helm",)

    def __init__(self, reader: KubernetesReader, *, driver: str = "secret") -> None:
        if driver not in ("secret", "configmap"):
            raise ValueError(f"unsupported Helm driver {driver!r}")
        self.reader = reader
        self.driver = driver
        self.resource = "secrets" if driver == "secret" else "configmaps"

    def changes(self, query: ChangeQuery) -> list[dict[str, Any]]:
        selector = "owner=helm" + (f",name={query.service}" if query.service else "")
        listing = self.reader.items(self.reader.path("/api/v1/namespaces/{ns}/" + self.resource, ns=query.namespace),
                                    query={"labelSelector": selector, "limit": 500}, accept=METADATA_ONLY)
        releases: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for item in listing:
            meta = item.get("metadata") or {}
            labels = meta.get("labels") or {}
            if labels.get("owner") != "helm" or not str(labels.get("version", "")).isdigit() or not labels.get("name"):
                continue
            releases.setdefault(labels["name"], []).append((int(labels["version"]), meta))
        wanted: list[tuple[str, int, dict[str, Any], dict[str, Any] | None]] = []
        for name, revisions in releases.items():
            revisions.sort(key=lambda r: r[0])
            for i, (version, meta) in enumerate(revisions):
                created = _time(meta.get("creationTimestamp"))
                if created is not None and query.start <= created <= query.end:
                    wanted.append((name, version, meta, revisions[i - 1][1] if i else None))
        wanted.sort(key=lambda w: str(w[2].get("creationTimestamp") or ""), reverse=True)
        records = []
        for name, version, meta, before in wanted[:MAX_READS]:
            release = self._read(meta)
            if release is None:
                continue
            previous = self._read(before) if before is not None else None
            records.append(self._record(query, name, version, meta, release, previous))
        return records

    def _read(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        path = self.reader.path("/api/v1/namespaces/{ns}/" + self.resource + "/{name}",
                                ns=meta.get("namespace") or "", name=meta.get("name") or "")
        stored = self.reader.get(path)
        encoded = ((stored or {}).get("data") or {}).get("release")
        if not encoded:
            return None
        return decode_release(encoded, driver=self.driver)

    def _record(self, query: ChangeQuery, name: str, version: int, meta: dict[str, Any], release: dict[str, Any],
                previous: dict[str, Any] | None) -> dict[str, Any]:
        info = release["info"]
        chart = _chart(release)
        if previous is not None and _chart(previous) != chart:
            chart = f"{_chart(previous)} -> {chart}"
        description = info.get("description") or ""
        what = f"release {name} revision {version} {info.get('status') or 'unknown'}: chart {chart}"
        what += f"; {description}" if description else ""
        at = _time(info.get("last_deployed")) or _time(meta.get("creationTimestamp"))
        return change_record(kind="helm", service=name, at=at, what=what, object=f"helm-release/{name}",
                             namespace=release.get("namespace") or query.namespace, revision=version,
                             status=info.get("status"))
