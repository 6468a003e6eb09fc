"""Raw JSON reads of the Kubernetes API through the official client (its kubeconfig, auth and TLS).

The change sources read objects as the API server sends them (camelCase JSON, the wire format
the recorded fixtures hold) rather than as client models, and ask for metadata only where values
must never reach this process (``PartialObjectMetadataList``). Only GET is ever sent.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from diagnosis.tools.backends.base import BackendError

METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
BACKEND_NAME = "kubernetes"


def connect() -> Any:
    """An ``ApiClient`` from KUBECONFIG (or ~/.kube/config), else the in-cluster service account."""
    from kubernetes import client, config

    try:
        config.load_kube_config()
    except Exception:  # no kubeconfig: the in-cluster settings, or a clear error
        try:
            config.load_incluster_config()
        except config.ConfigException as exc:
            raise BackendError(f"no kubeconfig and not in a cluster: {exc}", backend=BACKEND_NAME) from None
    return client.ApiClient()


class KubernetesReader:
    """GETs of JSON documents by path; 404 is ``None``, any other failure a ``BackendError``."""

    def __init__(self, api_client: Any = None, *, timeout: float = 5.0) -> None:
        self._client = api_client
        self.timeout = timeout

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = connect()
        return self._client

    @staticmethod
    def path(template: str, **parts: str) -> str:
        return template.format(**{k: quote(str(v), safe="") for k, v in parts.items()})

    def get(self, path: str, *, query: dict[str, Any] | None = None, accept: str = "application/json") -> dict | None:
        from kubernetes.client.exceptions import ApiException

        params = [(k, v) for k, v in (query or {}).items() if v not in (None, "")]
        try:
            response = self.client.call_api(
                path, "GET", path_params={}, query_params=params, header_params={"Accept": accept},
                auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True,
                _request_timeout=self.timeout)
            body = response.data
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise BackendError(f"Kubernetes API answered {exc.status} {exc.reason} for {path.split('?')[0]}",
                               backend=BACKEND_NAME) from None
        except BackendError:
            raise
        except Exception as exc:  # connection refused, timeouts, TLS
            raise BackendError(f"Kubernetes API unreachable: {type(exc).__name__}: {exc}", backend=BACKEND_NAME) from None
        try:
            document = json.loads(body)
        except ValueError:
            raise BackendError(f"Kubernetes API returned a non-JSON body for {path}", backend=BACKEND_NAME) from None
        if not isinstance(document, dict):
            raise BackendError(f"Kubernetes API returned unexpected JSON for {path}", backend=BACKEND_NAME)
        return document

    def items(self, path: str, *, query: dict[str, Any] | None = None, accept: str = "application/json") -> list[dict]:
        document = self.get(path, query=query, accept=accept)
        return [i for i in (document or {}).get("items") or [] if isinstance(i, dict)]


def label_selector(selector: dict[str, Any] | None) -> str | None:
    """A ``LabelSelector`` object as the query-string form (``app=x,tier in (a,b),!canary``)."""
    if not selector:
        return None
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or None
