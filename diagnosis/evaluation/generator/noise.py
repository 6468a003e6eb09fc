"""What every incident also holds, fault or not: routine lines, routine warnings, retries that succeed,
a scheduled job, a healthy traffic spike, an unrelated restart at deploy time, an older unrelated
change and failed scrapes. None of it deviates from the baseline the way a fault does."""

from __future__ import annotations

from diagnosis.evaluation.generator.callers import api_path
from diagnosis.evaluation.generator.faults_change import record_change, roll_out
from diagnosis.evaluation.generator.formats import nginx_access
from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.names import pod_suffix
from diagnosis.evaluation.generator.story import spread
from diagnosis.evaluation.generator.world import SAMPLES, WINDOW, World, first_sample_at

START = -WINDOW


def routine_line(world: World, node: Node, at: float) -> None:
    """One ordinary INFO line in the node's own words."""
    rng = world.rng
    ms = rng.randint(2, 90)
    if node.tech == "nginx":
        tl = world.timelines[node.name]
        i = min(SAMPLES - 1, first_sample_at(at))
        status = rng.choice((502, 504)) if rng.random() < tl.err[i] else rng.choice((200, 200, 200, 304))
        seconds = min(60.0, tl.latency[i] * rng.uniform(0.5, 1.5))
        world.log(node, at, "INFO", nginx_access(f"10.{rng.randint(0, 9)}.{rng.randint(0, 9)}.{rng.randint(2, 250)}",
                                                 rng.choice(("GET", "POST")), api_path(world, node), status,
                                                 rng.randint(120, 9000), seconds, seconds * 0.95), raw=True)
        return
    texts = {
        "postgres": [f"checkpoint complete: wrote {rng.randint(20, 900)} buffers ({rng.uniform(0.1, 5):.1f}%); 0 WAL file(s) "
                     f"added, 0 removed, 1 recycled; write={rng.uniform(1, 30):.3f} s", "checkpoint starting: time",
                     f'automatic vacuum of table "{node.database}.public.{world.names.plain((2, 2))}": index scans: 1'],
        "mysql": [f"Aborted connection {rng.randint(100, 9999)} to db: '{node.database}' user: '{node.db_user}' host: "
                  f"'{rng.choice([world.pod_ip(c) for c in world.graph.callers(node.name) if c.in_cluster] or ['10.0.0.9'])}' "
                  "(Got timeout reading communication packets)."],
        "redis": [f"{rng.randint(10, 900)} changes in 300 seconds. Saving...", "Background saving terminated with success",
                  f"Background saving started by pid {rng.randint(100, 9999)}"],
        "rabbitmq": [f"accepting AMQP connection <0.{rng.randint(900, 9000)}.0> ({rng.choice(_ips(world, node))}:"
                     f"{rng.randint(30000, 60000)} -> {world.workloads[node.name].pods[0].ip}:5672)"],
        "kafka": [f"[GroupCoordinator 1]: Stabilized group {world.names.plain((2, 2))} generation {rng.randint(2, 90)} "
                  f"(__consumer_offsets-{rng.randint(0, 49)}) with {rng.randint(1, 6)} members (kafka.coordinator.group.GroupCoordinator)"],
        "envoy": [],
    }
    if node.tech == "envoy":
        world.log(node, at, "INFO", '{"start_time":"{ts:iso}","method":"GET","path":"%s","protocol":"HTTP/1.1",'
                                    '"response_code":200,"response_flags":"-","duration":%d}' % (api_path(world, node), ms),
                  raw=True)
        return
    if node.tech in texts:
        world.log(node, at, "INFO", rng.choice(texts[node.tech]))
        return
    thing = rng.choice(("request", "job", "batch", "lookup", "session"))
    world.log(node, at, "INFO", rng.choice((
        f"{rng.choice(('GET', 'POST'))} {api_path(world, node)} 200 {ms}ms",
        f"{thing} {rng.randint(1000, 99999)} completed in {ms}ms",
        f"processed {rng.randint(1, 400)} {thing}s in {ms}ms",
        f"health check ok ({ms}ms)")))


def _ips(world: World, node: Node) -> list[str]:
    return sorted({world.pod_ip(c) for c in world.graph.callers(node.name) if c.in_cluster}) or ["10.0.0.9"]


def routine_warning(world: World, node: Node, at: float) -> str:
    rng = world.rng
    texts = {
        "java": ["HHH90000026: MySQL8Dialect has been deprecated; use org.hibernate.dialect.MySQLDialect instead",
                 "spring.jpa.open-in-view is enabled by default. Therefore, database queries may be performed during view rendering."],
        "python": ["Unverified HTTPS request is being made to host 'metadata.internal'. Adding certificate verification is strongly advised.",
                   "DeprecationWarning: datetime.datetime.utcnow() is deprecated and scheduled for removal in a future version."],
        "node": ["(node:1) [DEP0005] DeprecationWarning: Buffer() is deprecated due to security and usability issues."],
        "go": [f"config key {world.names.plain((2, 2))}.timeout is deprecated, use {world.names.plain((2, 2))}.deadline"],
        "postgres": ["there is no transaction in progress"],
        "mysql": ["CA certificate ca.pem is self signed."],
        "redis": ["WARNING Memory overcommit must be enabled! Without it, a background save or replication may fail under low memory condition."],
        "rabbitmq": ["Free disk space is 2.1GB, the free disk space alarm limit is 50MB"],
        "kafka": [f"[Log partition={world.names.plain((2, 2))}-0] Found deletable segments with base offsets [0] due to retention time 604800000ms breach"],
    }
    options = texts.get(node.tech) or texts["go"]
    text = rng.choice(options)
    world.log(node, at, "WARN", text)
    return text


def add_noise(world: World, healthy: list[Node], onset: int | None) -> dict[str, str]:
    """Noise on healthy nodes; returns what was added (for the ground-truth notes).

    Why it is long: a list of independent kinds of noise, each a few lines, drawn from the one rng in a fixed
    order (a seed always gives the same incident)."""
    rng = world.rng
    apps = [n for n in healthy if n.role in ("frontend", "service")]
    cluster = [n for n in healthy if n.in_cluster]
    notes: dict[str, str] = {}
    # routine warnings, spread evenly over the hour
    for node in rng.sample(cluster, min(len(cluster), rng.randint(1, 3))):
        for at in spread(world, START, 0, rng.randint(2, 4)):
            notes["routine_warning"] = routine_warning(world, node, at)
    # retries that succeed
    edges = [(a, b) for a, b in world.graph.edges if world.graph.by_name[a] in apps and world.graph.by_name[b] in healthy]
    if edges:
        a, b = rng.choice(edges)
        caller, callee = world.graph.by_name[a], world.graph.by_name[b]
        for at in spread(world, START, 0, rng.randint(1, 2)):
            world.log(caller, at, "WARN", f"retrying call to {callee.name} (attempt 1/3) after 503")
            world.log(caller, at + 0.4, "INFO", f"call to {callee.name} succeeded after 1 retry")
        notes["retry"] = f"{caller.name} -> {callee.name}"
    # a scheduled job with a short CPU and traffic bump
    if apps:
        node = rng.choice(apps)
        job = f"{world.names.plain((2, 2))}-{rng.choice(('sync', 'cleanup', 'report', 'export', 'rollup'))}"
        at = rng.uniform(START + 120, -240)
        took = rng.randint(20, 140)
        world.log(node, at, "INFO", f"scheduled task {job} started")
        world.log(node, at + took, "INFO", f"scheduled task {job} finished in {took}s ({rng.randint(100, 90000)} rows)")
        tl = world.timelines[node.name]
        i = first_sample_at(at)
        for k in range(i, min(SAMPLES, i + 2)):
            tl.cpu[k] = min(tl.cpu_limit * 0.7, tl.cpu[k] * 1.8)
        stamp = rng.randint(29000000, 29999999)
        world.extra_pods.append({"name": f"{node.name}-{job}-{stamp}-{pod_suffix(rng)}", "phase": "Succeeded",
                                 "node": rng.choice(world.nodes)[0], "labels": {"job-name": f"{node.name}-{job}-{stamp}"},
                                 "containers": [{"name": job, "image": world.workloads[node.name].image, "ready": False,
                                                 "restartCount": 0, "state": {"state": "terminated", "reason": "Completed",
                                                                              "exitCode": 0,
                                                                              "started_offset_seconds": int(at),
                                                                              "finished_offset_seconds": int(at + took)},
                                                 "lastState": None}]})
        world.k8s_event("cronjob", f"{node.name}-{job}", "SuccessfulCreate", f"Created job {node.name}-{job}-{stamp}",
                        at - 1, at - 1, type_="Normal")
        world.k8s_event("job", f"{node.name}-{job}-{stamp}", "Completed", "Job completed", at + took, at + took,
                        type_="Normal")
        notes["scheduled_job"] = f"{job} on {node.name}"
    # a healthy spike of traffic (latency and errors unchanged)
    if apps or cluster:
        node = rng.choice(apps or cluster)
        i = rng.randint(3, SAMPLES - 4)
        for k in range(i, i + rng.randint(2, 3)):
            world.timelines[node.name].rps[k] *= rng.uniform(1.8, 2.6)
        notes["healthy_spike"] = node.name
    # an unrelated restart at deploy time (a rollout of a healthy service)
    services = [n for n in apps if n.role == "service"]
    if services:
        node = rng.choice(services)
        at = int(rng.uniform(START + 60, -300)) if onset is None else int(rng.uniform(START + 60, max(START + 90, onset - 600)))
        roll_out(world, node, at)
        world.log(node, at - 2, "INFO", "received SIGTERM, shutting down gracefully")
        world.log(node, at + rng.randint(15, 50), "INFO", f"{node.name} started in {rng.uniform(2, 30):.1f} seconds "
                                                             f"(version {world.workloads[node.name].image.rpartition(':')[2]})")
        notes["deploy_restart"] = node.name
    # failed scrapes: a single missing sample here and there before the story
    for node in rng.sample(cluster, min(len(cluster), rng.randint(0, 3))):
        world.timelines[node.name].missing.add(rng.randint(1, 20))
    return notes


def older_change(world: World, healthy: list[Node]) -> None:
    """An unrelated change on a healthy service, hours before anything happens."""
    rng = world.rng
    apps = [n for n in healthy if n.role in ("frontend", "service")]
    if not apps:
        return
    node = rng.choice(apps)
    at = -rng.randint(7, 72) * 3600 - rng.randint(0, 3599)
    kind = rng.choice(("rollout", "config", "helm"))
    if kind == "config":
        record_change(world, node, at, "config", f"ConfigMap {node.name}-config: log level info -> debug",
                      f"configmap/{node.name}-config")
    else:
        record_change(world, node, at, kind, f"{node.name} {world.workloads[node.name].image.rpartition(':')[2]} "
                                             "(routine release)", f"deployment/{node.name}",
                      revision=str(world.workloads[node.name].revision), status="Complete" if kind == "rollout" else "deployed")
