"""Change faults: a config, secret, image, flag or version change on the root shortly before the onset,
recorded in changes.json and visible in the cluster (a new ReplicaSet, restarted pods)."""

from __future__ import annotations

from diagnosis.evaluation.generator.formats import Failure
from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.names import pod_suffix, template_hash
from diagnosis.evaluation.generator.story import Story, degrade, spread
from diagnosis.evaluation.generator.world import World, first_sample_at


def record_change(world: World, root: Node, at: int, kind: str, what: str, obj: str, revision: str | None = None,
                  status: str | None = None) -> dict:
    change = {"kind": kind, "service": root.name, "offset_seconds": int(at), "what": what, "object": obj,
              "namespace": world.namespace}
    if revision:
        change["revision"] = revision
    if status:
        change["status"] = status
    change["by"] = world.rng.choice(("ci-bot", "argocd", f"{world.names.plain((1, 2))}@{world.namespace}.example",
                                     "flux-system"))
    world.changes.append(change)
    return change


def roll_out(world: World, root: Node, at: int, image: str | None = None) -> tuple[str, str]:
    """A new ReplicaSet for ``root`` at offset ``at``: new pod names and start times, old RS kept as history.
    Returns (old image, new image)."""
    rng = world.rng
    wl = world.workloads[root.name]
    old_image = wl.image
    if image is None:
        repo, _, tag = old_image.rpartition(":")
        major, minor, patch = (tag.split(".") + ["0", "0", "0"])[:3]
        image = f"{repo}:{major}.{int(minor) + 1 if minor.isdigit() else 1}.0"
    world.old_replicasets.append({"name": f"{root.name}-{wl.template_hash}", "deployment": root.name,
                                  "revision": wl.revision, "replicas": 0, "image": old_image,
                                  "created_offset_seconds": wl.created})
    wl.revision += 1
    wl.template_hash = template_hash(rng)
    wl.image, wl.created = image, at
    for pod in wl.pods:
        if wl.kind == "Deployment":
            pod.replaced = (pod.replaced or (pod.name, at))[0], at
            pod.name = f"{root.name}-{wl.template_hash}-{pod_suffix(rng)}"
        pod.started, pod.image = at + rng.randint(5, 40), image
        pod.restarts, pod.last_state = 0, None
    world.k8s_event("deployment", root.name, "ScalingReplicaSet",
                    f"Scaled up replica set {root.name}-{wl.template_hash} to {wl.replicas}", at, at, type_="Normal")
    return old_image, image


def _crash(world: World, root: Node, onset: int, reason_line: str) -> None:
    rng = world.rng
    i0 = first_sample_at(onset)
    for pod in world.workloads[root.name].pods:
        pod.restart_samples = sorted({i0} | {i for i in range(i0 + 1, 60) if rng.random() < 0.3})
        pod.restarts = len(pod.restart_samples)
        pod.ready = False
        pod.state = {"state": "waiting", "reason": "CrashLoopBackOff",
                     "message": f"back-off 5m0s restarting failed container={root.name} pod={pod.name}"}
        pod.last_state = {"state": "terminated", "reason": "Error", "exitCode": 1,
                          "started_offset_seconds": -rng.randint(60, 200), "finished_offset_seconds": -rng.randint(20, 59)}
        world.k8s_event("pod", pod.name, "BackOff", f"Back-off restarting failed container {root.name} in pod {pod.name}",
                        onset + 20, -rng.randint(5, 40), count=pod.restarts)
    for at in spread(world, onset, 0, rng.randint(2, 4)):
        world.log(root, at, "FATAL" if root.tech == "go" else "ERROR", reason_line)
    world.timelines[root.name].missing |= set(range(first_sample_at(onset), 60))


def config(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    at = onset - rng.randint(30, 600)
    cm = f"{root.name}-config"
    key = rng.choice(("upstream.timeout", "server.port", "cache.ttl", "http.max_body", "worker.count"))
    bad = rng.choice(("30s", "-1", "eight", "0x1F", ""))
    record_change(world, root, at, "config", f"ConfigMap {cm}: {key} changed", f"configmap/{cm}")
    roll_out(world, root, at + rng.randint(5, 30), image=world.workloads[root.name].image)
    lines = {"java": f"Failed to bind properties under '{key}' to java.time.Duration: Reason: failed to convert "
                     f"java.lang.String to java.time.Duration (caused by java.lang.IllegalArgumentException: '{bad}' is not a valid duration)",
             "python": f"ValueError: invalid literal for int() with base 10: '{bad}' (setting {key} from /etc/{root.name}/config.yaml)",
             "node": f"Error: Invalid configuration: \"{key}\" must be a number. Received '{bad}'",
             "*": f"failed to load configuration: {key}: invalid value {bad!r}: yaml: unmarshal errors"}
    line = lines.get(root.tech, lines["*"])
    _crash(world, root, onset, line)
    return Story("change.config", root, onset, "invalid_configuration", ["config", "configmap", "configuration"],
                 [key], "refused", anomalous=[{"signal": "restarts", "service": root.name, "direction": "up"}],
                 notes=f"{cm} changed before the onset; {root.name} crash-loops on the new value")


def secret(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    db = rng.choice([n for n in world.graph.callees(root.name) if n.role in ("datastore", "cache", "queue")])
    at = onset - rng.randint(30, 600)
    name = f"{root.name}-{db.name}-credentials"
    record_change(world, root, at, "secret", f"Secret {name} rotated", f"secret/{name}")
    roll_out(world, root, at + rng.randint(5, 60), image=world.workloads[root.name].image)
    ip = world.pod_ip(root)
    server = {"postgres": (f'password authentication failed for user "{db.db_user}"', "FATAL"),
              "mysql": (f"Access denied for user '{db.db_user}'@'{ip}' (using password: YES)", "WARN"),
              "redis": ("WRONGPASS invalid username-password pair or user is disabled.", "WARN"),
              "rabbitmq": (f"PLAIN login refused: user '{db.db_user}' - invalid credentials", "ERROR")}
    text, level = server.get(db.tech, server["postgres"])
    for at2 in spread(world, onset, 0, rng.randint(2, 4)):
        prefix = f"{db.db_user}@{db.database} {ip}({rng.randint(30000, 60000)}) " if db.tech == "postgres" else ""
        msg = text if db.tech != "rabbitmq" else f"Error on AMQP connection <0.{rng.randint(900, 9000)}.0> ({ip}:{rng.randint(30000, 60000)} -> {world.workloads[db.name].pods[0].ip}:5672): {text}"
        world.log(db, at2, level, msg, logger=prefix)
    conn = world.conn_string(root, db)
    for at2 in spread(world, onset, 0, rng.randint(2, 4)):
        world.log(root, at2, "ERROR", f"cannot connect to {conn}: authentication failed",
                  failure=Failure("AuthenticationError", text))
    degrade(world, root, onset, "errors")
    evidence = {"postgres": "password authentication failed", "mysql": "Access denied for user",
                "redis": "WRONGPASS", "rabbitmq": "invalid credentials"}[db.tech if db.tech in server else "postgres"]
    return Story("change.secret", root, onset, "credential_change", ["secret", "credential", "password", "authentication"],
                 [evidence], "errors", anomalous=[{"signal": "errors", "service": root.name, "direction": "up"}],
                 notes=f"the rotated secret {name} no longer matches what {db.name} accepts")


def image(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    at = onset - rng.randint(10, 120)
    wl = world.workloads[root.name]
    repo = wl.image.rpartition(":")[0]
    tag = f"{rng.randint(1, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}-{rng.choice(('rc1', 'hotfix', 'arm64', 'build'))}"
    old, new = roll_out(world, root, at, image=f"{repo}:{tag}")
    record_change(world, root, at, "rollout", f"image {old} -> {new} (strategy Recreate)", f"deployment/{root.name}",
                  revision=str(wl.revision), status="ProgressDeadlineExceeded")
    host = repo.split("/")[0]
    pull = (f'Failed to pull image "{new}": rpc error: code = NotFound desc = failed to pull and unpack image '
            f'"{new}": failed to resolve reference "{new}": {new}: not found')
    for pod in wl.pods:
        pod.ready = False
        pod.phase = "Pending"
        pod.state = {"state": "waiting", "reason": "ImagePullBackOff", "message": f'Back-off pulling image "{new}"'}
        world.k8s_event("pod", pod.name, "Failed", pull, at + 20, -rng.randint(10, 60), count=rng.randint(4, 20))
        world.k8s_event("pod", pod.name, "Failed", "Error: ImagePullBackOff", at + 30, -rng.randint(5, 40),
                        count=rng.randint(4, 20))
    world.timelines[root.name].missing |= set(range(first_sample_at(at), 60))
    world.log(root, at - rng.uniform(1, 5), "INFO", "received SIGTERM, shutting down gracefully")
    return Story("change.image", root, onset, "image_pull_failure", ["image", "pull", "ImagePullBackOff", "registry"],
                 ["ImagePullBackOff", "failed to resolve reference"], "refused", also_accepted=["change.deploy"],
                 anomalous=[{"signal": "up", "service": root.name, "direction": "down"}],
                 notes=f"the rollout recreated every pod of {root.name}; the new image tag does not exist on {host}")


def flag(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    at = onset - rng.randint(10, 300)
    flag_name = f"{world.names.plain((2, 2))}-{rng.choice(('v2', 'beta', 'rollout', 'new-path', 'batching'))}"
    cm = f"{root.name}-flags"
    record_change(world, root, at, "config", f"feature flag {flag_name}: false -> true", f"configmap/{cm}")
    world.log(root, at + rng.uniform(2, 20), "INFO",
              rng.choice((f"feature flag '{flag_name}' changed: enabled=true", f"flag {flag_name} evaluated to true (reloaded {cm})",
                          f"FeatureToggle {flag_name} switched ON")))
    effect = rng.choice(("slow", "errors"))
    degrade(world, root, onset, effect)
    detail = (f"{flag_name} path: query plan fell back to full scan ({rng.randint(2000, 9000)}ms)" if effect == "slow"
              else f"{flag_name}: unsupported request shape, returning 500")
    for at2 in spread(world, onset, 0, rng.randint(2, 4)):
        world.log(root, at2, "WARN" if effect == "slow" else "ERROR", detail)
    return Story("change.flag", root, onset, "feature_flag_change", ["flag", "feature", "toggle"],
                 [flag_name], effect, also_accepted=["change.config"], trace="slow" if effect == "slow" else "error",
                 anomalous=[{"signal": "latency" if effect == "slow" else "errors", "service": root.name, "direction": "up"}])


def deploy(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    at = onset - rng.randint(30, 600)
    old, new = roll_out(world, root, at)
    record_change(world, root, at, "rollout", f"image {old} -> {new}", f"deployment/{root.name}",
                  revision=str(world.workloads[root.name].revision), status="Complete")
    version = new.rpartition(":")[2]
    world.log(root, at + rng.uniform(10, 40), "INFO", f"starting {root.name} version {version}")
    field_name = world.names.plain((2, 2))
    failures = {"java": Failure("java.lang.NullPointerException",
                                f'Cannot invoke "String.length()" because "{field_name}" is null'),
                "python": Failure("KeyError", f"'{field_name}'"),
                "node": Failure("TypeError", f"Cannot read properties of undefined (reading '{field_name}')"),
                "*": Failure("panic", "runtime error: invalid memory address or nil pointer dereference")}
    failure = failures.get(root.tech, failures["*"])
    for at2 in spread(world, onset, 0, rng.randint(3, 5)):
        if failure.type == "panic":
            world.log(root, at2, "ERROR", f"http: panic serving {world.pod_ip(root)}:{rng.randint(30000, 60000)}: "
                                          f"{failure.message}")
        else:
            world.log(root, at2, "ERROR", f"unhandled error in request handler (version {version})", failure=failure)
    degrade(world, root, onset, "errors")
    return Story("change.deploy", root, onset, "bad_deploy", ["deploy", "rollout", "release", "version"],
                 [version], "errors", also_accepted=["change.image"],
                 anomalous=[{"signal": "errors", "service": root.name, "direction": "up"}],
                 notes=f"{new} went out before the onset")
