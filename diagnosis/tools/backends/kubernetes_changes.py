"""Changes read from Kubernetes: workload rollouts and ConfigMap/Secret updates (never their values).

Rollouts follow kubectl's rollout history: a Deployment's revisions are its ReplicaSets (revision
annotation, owner uid), a StatefulSet's and DaemonSet's its ControllerRevisions. Each revision is
compared with the one before: images are named with their values, any other difference of the pod
template only by its path (``containers[app].env``), so no environment value is ever shown.
ConfigMaps and Secrets are listed as ``PartialObjectMetadataList``: names, resourceVersion and the
latest ``managedFields`` time, nothing else; each is attributed to the workloads whose pod template
refers to it. Stdlib only (the official client is reached through ``KubernetesReader``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from diagnosis.tools.backends.base import parse_time
from diagnosis.tools.backends.changes import ChangeQuery, change_record
from diagnosis.tools.backends.kubernetes_api import METADATA_ONLY, KubernetesReader, label_selector

__all__ = ["KubernetesChangeSource", "template_difference", "references"]

MAX_WORKLOADS = 100
MAX_LISTED = 500
MAX_PATHS = 6  # changed template fields named in one change's `what`
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
CHANGE_CAUSE = "kubernetes.io/change-cause"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
WORKLOADS = (
    ("deployment", "/apis/apps/v1/namespaces/{ns}/deployments"),
    ("statefulset", "/apis/apps/v1/namespaces/{ns}/statefulsets"),
    ("daemonset", "/apis/apps/v1/namespaces/{ns}/daemonsets"),
)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value, argument="time") if value else None
    except Exception:
        return None


def _last_managed(meta: dict[str, Any]) -> tuple[datetime | None, str | None]:
    """The latest ``managedFields[].time`` and its manager: when a field last changed, and by whom."""
    best: tuple[datetime | None, str | None] = (None, None)
    for entry in meta.get("managedFields") or []:
        moment = _time(entry.get("time"))
        if moment is not None and (best[0] is None or moment > best[0]):
            best = (moment, entry.get("manager"))
    return best


def _containers(template: dict[str, Any]) -> dict[str, str | None]:
    spec = template.get("spec") or {}
    return {c.get("name"): c.get("image") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
            if isinstance(c, dict)}


def _keyed(value: Any) -> Any:
    """Lists of named objects (containers, env, volumes) compared by name rather than by position."""
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        return {f"[{v['name']}]": v for v in value}
    return value


def _changed_paths(old: Any, new: Any, path: str, out: list[str], depth: int) -> None:
    old, new = _keyed(old), _keyed(new)
    if old == new:
        return
    if depth >= 4 or not (isinstance(old, dict) and isinstance(new, dict)):
        out.append(path)
        return
    for key in sorted(set(old) | set(new)):
        if key == "image":
            continue  # images are reported with their values
        step = f"{path}{key}" if key.startswith("[") else f"{path}.{key}" if path else key
        _changed_paths(old.get(key), new.get(key), step, out, depth + 1)


def _strip(template: dict[str, Any]) -> dict[str, Any]:
    meta = dict(template.get("metadata") or {})
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items()
                      if k not in ("pod-template-hash", "controller-revision-hash")}
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items() if k != RESTARTED_AT}
    meta.pop("creationTimestamp", None)
    return {"metadata": meta, "spec": template.get("spec") or {}}


def template_difference(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """``app image r/app:1 -> r/app:2; spec changed: containers[app].env`` (field paths, never values)."""
    images = _containers(new)
    if old is None:
        return "image " + ", ".join(f"{n}={i}" for n, i in images.items()) if images else "first recorded revision"
    parts = []
    before = _containers(old)
    for name, image in images.items():
        if name not in before:
            parts.append(f"container {name} added ({image})")
        elif before[name] != image:
            parts.append(f"{name} image {before[name]} -> {image}")
    parts += [f"container {name} removed" for name in before if name not in images]
    restarted = ((new.get("metadata") or {}).get("annotations") or {}).get(RESTARTED_AT)
    if restarted and restarted != ((old.get("metadata") or {}).get("annotations") or {}).get(RESTARTED_AT):
        parts.append("restarted (kubectl rollout restart)")
    paths: list[str] = []
    _changed_paths(_strip(old), _strip(new), "", paths, 0)
    paths = [p.removeprefix("spec.") for p in paths]
    if paths:
        more = f" and {len(paths) - MAX_PATHS} more" if len(paths) > MAX_PATHS else ""
        parts.append("spec changed: " + ", ".join(paths[:MAX_PATHS]) + more)
    return "; ".join(parts) or "pod template unchanged"


def references(template: dict[str, Any]) -> tuple[set[str], set[str]]:
    """Names of the ConfigMaps and Secrets a pod template mounts or reads into its environment."""
    spec = template.get("spec") or {}
    configmaps, secrets = set(), set()
    for volume in spec.get("volumes") or []:
        if (volume.get("configMap") or {}).get("name"):
            configmaps.add(volume["configMap"]["name"])
        if (volume.get("secret") or {}).get("secretName"):
            secrets.add(volume["secret"]["secretName"])
        for source in (volume.get("projected") or {}).get("sources") or []:
            if (source.get("configMap") or {}).get("name"):
                configmaps.add(source["configMap"]["name"])
            if (source.get("secret") or {}).get("name"):
                secrets.add(source["secret"]["name"])
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for source in container.get("envFrom") or []:
            if (source.get("configMapRef") or {}).get("name"):
                configmaps.add(source["configMapRef"]["name"])
            if (source.get("secretRef") or {}).get("name"):
                secrets.add(source["secretRef"]["name"])
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {})
            if (ref.get("configMapKeyRef") or {}).get("name"):
                configmaps.add(ref["configMapKeyRef"]["name"])
            if (ref.get("secretKeyRef") or {}).get("name"):
                secrets.add(ref["secretKeyRef"]["name"])
    secrets |= {s.get("name") for s in spec.get("imagePullSecrets") or [] if s.get("name")}
    return configmaps, secrets


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(o.get("controller") and o.get("uid") == uid for o in _meta(obj).get("ownerReferences") or [])


class KubernetesChangeSource:
    """Rollouts, and ConfigMap/Secret updates, of one namespace (GET and LIST only)."""

    name = "kubernetes"

    def __init__(self, reader: KubernetesReader, *, kinds: Iterable[str] = ("rollout", "config", "secret")) -> None:
        self.reader = reader
        self.kinds = tuple(k for k in kinds if k in ("rollout", "config", "secret"))

    def changes(self, query: ChangeQuery) -> list[dict[str, Any]]:
        workloads = self._workloads(query)
        records: list[dict[str, Any]] = []
        if query.wants("rollout") and "rollout" in self.kinds:
            records += self._rollouts(query, workloads)
        for kind, resource in (("config", "configmaps"), ("secret", "secrets")):
            if query.wants(kind) and kind in self.kinds:
                records += self._object_updates(query, workloads, kind, resource)
        return records

    # --- workloads and their revisions ---

    def _workloads(self, query: ChangeQuery) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for kind, template in WORKLOADS:
            base = self.reader.path(template, ns=query.namespace)
            if query.service:
                item = self.reader.get(f"{base}/{self.reader.path('{n}', n=query.service)}")
                found += [(kind, item)] if item else []
            else:
                found += [(kind, item) for item in self.reader.items(base, query={"limit": MAX_WORKLOADS})]
        return found

    def _rollouts(self, query: ChangeQuery, workloads: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        records = []
        deployments = [w for k, w in workloads if k == "deployment"]
        others = [(k, w) for k, w in workloads if k != "deployment"]
        if deployments:
            selector = label_selector((deployments[0].get("spec") or {}).get("selector")) if query.service else None
            sets = self.reader.items(self.reader.path("/apis/apps/v1/namespaces/{ns}/replicasets", ns=query.namespace),
                                     query={"labelSelector": selector, "limit": MAX_LISTED})
            for deployment in deployments:
                records += self._deployment_revisions(query, deployment, sets)
        if others:
            selector = label_selector((others[0][1].get("spec") or {}).get("selector")) if query.service else None
            revisions = self.reader.items(
                self.reader.path("/apis/apps/v1/namespaces/{ns}/controllerrevisions", ns=query.namespace),
                query={"labelSelector": selector, "limit": MAX_LISTED})
            for kind, workload in others:
                records += self._controller_revisions(query, kind, workload, revisions)
        return records

    def _deployment_revisions(self, query: ChangeQuery, deployment: dict[str, Any],
                              sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
        meta = _meta(deployment)
        name = meta.get("name")
        owned = [rs for rs in sets if _owned_by(rs, meta.get("uid"))]
        owned.sort(key=lambda rs: int((_meta(rs).get("annotations") or {}).get(REVISION, "0") or 0))
        status = _deployment_status(deployment)
        records, previous = [], None
        for i, rs in enumerate(owned):
            rs_meta = _meta(rs)
            annotations = rs_meta.get("annotations") or {}
            template = (rs.get("spec") or {}).get("template") or {}
            revision = annotations.get(REVISION)
            what = template_difference(previous, template)
            history = annotations.get(REVISION_HISTORY)
            at = _time(rs_meta.get("creationTimestamp"))
            if history:
                # A rollback reuses the old ReplicaSet: its creation is the first rollout, the
                # controller's rewrite of the revision annotation (a managedFields time) the rollback.
                what = f"rollback to the template of revision(s) {history}: {what}"
                at = _last_managed(rs_meta)[0] or at
            cause = annotations.get(CHANGE_CAUSE)
            if cause:
                what += f" (change-cause: {cause})"
            previous = template
            if at is None:
                continue
            records.append(change_record(
                kind="rollout", service=name, at=at, what=f"revision {revision}: {what}", object=f"deployment/{name}",
                namespace=query.namespace, revision=revision, status=status if i == len(owned) - 1 else "superseded"))
        return records

    def _controller_revisions(self, query: ChangeQuery, kind: str, workload: dict[str, Any],
                              revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        meta = _meta(workload)
        name = meta.get("name")
        owned = sorted((r for r in revisions if _owned_by(r, meta.get("uid"))), key=lambda r: int(r.get("revision") or 0))
        status = _controller_status(kind, workload)
        records, previous = [], None
        for i, revision in enumerate(owned):
            template = ((revision.get("data") or {}).get("spec") or {}).get("template") or {}
            template = {k: v for k, v in template.items() if k != "$patch"}
            what = template_difference(previous, template)
            previous = template
            # ``data`` is immutable; reverting renumbers the object, which moves its managedFields time.
            cr_meta = _meta(revision)
            at = _last_managed(cr_meta)[0] or _time(cr_meta.get("creationTimestamp"))
            if at is None:
                continue
            number = revision.get("revision")
            records.append(change_record(
                kind="rollout", service=name, at=at, what=f"revision {number}: {what}", object=f"{kind}/{name}",
                namespace=query.namespace, revision=number, status=status if i == len(owned) - 1 else "superseded"))
        return records

    # --- ConfigMaps and Secrets: metadata only ---

    def _object_updates(self, query: ChangeQuery, workloads: list[tuple[str, dict[str, Any]]], kind: str,
                        resource: str) -> list[dict[str, Any]]:
        users: dict[str, list[str]] = {}
        for _, workload in workloads:
            template = (workload.get("spec") or {}).get("template") or {}
            for used in references(template)[0 if kind == "config" else 1]:
                users.setdefault(used, []).append(_meta(workload).get("name"))
        items = self.reader.items(self.reader.path("/api/v1/namespaces/{ns}/" + resource, ns=query.namespace),
                                  query={"limit": MAX_LISTED}, accept=METADATA_ONLY)
        label = "ConfigMap" if kind == "config" else "Secret"
        records = []
        for item in items:
            meta = _meta(item)  # never ``data``/``binaryData``/annotations: a server that ignored the Accept header sent them
            labels = meta.get("labels") or {}
            annotations = meta.get("annotations") or {}
            if labels.get("owner") == "helm" or "kubernetes.io/service-account.name" in annotations:
                continue  # Helm's release records (reported as helm changes) and service-account tokens
            name = meta.get("name")
            created = _time(meta.get("creationTimestamp"))
            at, manager = _last_managed(meta)
            at = at or created
            if at is None or not query.start <= at <= query.end:
                continue
            verb = "created" if created is not None and at == created else "updated"
            what = f"{label} {name} {verb}" + (f" by {manager}" if manager else "")
            owners = sorted(set(users.get(name, []))) or [labels.get("app.kubernetes.io/name") or labels.get("app") or name]
            for owner in owners:
                records.append(change_record(kind=kind, service=owner, at=at, what=what, object=f"{resource[:-1]}/{name}",
                                             namespace=query.namespace, revision=meta.get("resourceVersion"),
                                             by=manager))
        return records


def _deployment_status(deployment: dict[str, Any]) -> str:
    """complete | failed | progressing, from the Progressing condition kubectl's rollout status reads."""
    status = deployment.get("status") or {}
    if status.get("observedGeneration") != _meta(deployment).get("generation"):
        return "progressing"
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Progressing":
            if condition.get("reason") == "ProgressDeadlineExceeded":
                return "failed"
            if condition.get("reason") == "NewReplicaSetAvailable" and condition.get("status") == "True":
                return "complete"
    return "progressing"


def _controller_status(kind: str, workload: dict[str, Any]) -> str:
    status = workload.get("status") or {}
    if kind == "statefulset":
        done = status.get("currentRevision") == status.get("updateRevision")
    else:
        done = status.get("updatedNumberScheduled", 0) >= status.get("desiredNumberScheduled", 0)
    return "complete" if done else "progressing"
