"""Resource and network faults at their root: CPU, memory, disk, pools; DNS, TLS, refused, timeouts, loss.

Each builder writes the root's own evidence (its lines in its stack's words, its series, its Kubernetes
state) and returns the Story that ``story.propagate`` carries up the graph.
"""

from __future__ import annotations

from diagnosis.evaluation.generator.formats import Failure
from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.series import counter, gauge
from diagnosis.evaluation.generator.story import Story, client_lines, degrade, spread
from diagnosis.evaluation.generator.world import SAMPLES, World, first_sample_at, sample_time


def _pick(world: World, options: dict[str, list[str]], node: Node) -> str:
    return world.rng.choice(options.get(node.tech) or options["*"])


def _pod_labels(world: World, pod_name: str, container: str) -> dict[str, str]:
    return {"namespace": world.namespace, "pod": pod_name, "container": container}


def cpu(world: World, root: Node, onset: int) -> Story:
    rng, tl = world.rng, world.timelines[root.name]
    i0 = first_sample_at(onset)
    factor = rng.uniform(4, 9)
    for i in range(i0, SAMPLES):
        tl.cpu[i] = tl.cpu_limit * rng.uniform(0.95, 1.0)
    degrade(world, root, onset, "slow", factor)
    for pod in world.workloads[root.name].pods:
        periods = [600.0 * (rng.uniform(0.85, 0.99) if i >= i0 else rng.uniform(0.0, 0.03)) for i in range(SAMPLES)]
        world.series.append(counter("container_cpu_cfs_throttled_periods_total", _pod_labels(world, pod.name, root.name),
                                    periods, rng.randint(1000, 90000)))
    ms = rng.randint(2500, 9000)
    texts = {
        "java": [f"HikariPool-1 - Thread starvation or clock leap detected (housekeeper delta={ms // 1000}s{ms % 1000}ms).",
                 f"Slow request: took {ms} ms, cpu throttled"],
        "python": [f"WORKER TIMEOUT (pid:{rng.randint(8, 90)})", f"request handling took {ms / 1000:.2f}s"],
        "node": [f"Event loop blocked for {ms}ms", f"event loop lag {ms} ms"],
        "*": [f"request took too long: elapsed={ms}ms", f"handler over latency budget ({ms}ms)"],
    }
    level = "CRITICAL" if root.tech == "python" and rng.random() < 0.5 else "WARN"
    line = _pick(world, texts, root)
    for at in spread(world, onset, 0, rng.randint(3, 5)):
        world.log(root, at, level if "WORKER" in line else "WARN", line)
    return Story("resource.cpu", root, onset, "cpu_saturation", ["cpu", "throttl", "saturat"],
                 ["container_cpu_cfs_throttled_periods_total", line.split(" (")[0][:60]], "slow",
                 anomalous=[{"signal": "cpu", "service": root.name, "direction": "up"},
                            {"signal": "latency", "service": root.name, "direction": "up"}], trace="slow")


def memory(world: World, root: Node, onset: int) -> Story:
    rng, tl = world.rng, world.timelines[root.name]
    leak_start = first_sample_at(onset - rng.randint(600, 1500))
    i0 = first_sample_at(onset)
    for i in range(leak_start, SAMPLES):
        climb = min(1.0, (i - leak_start + 1) / max(1, i0 - leak_start + 1))
        tl.memory[i] = tl.memory[i] + (tl.memory_limit * 0.99 - tl.memory[i]) * climb
    kills = sorted({i0} | {i for i in range(i0 + 2, SAMPLES) if rng.random() < 0.25})
    for i in kills[1:]:
        tl.memory[i] = tl.memory_limit * rng.uniform(0.96, 0.995)
    degrade(world, root, onset, "errors", rng.uniform(0.2, 0.5))
    last_kill = sample_time(kills[-1]) - rng.randint(1, 50)
    process = {"java": "java", "python": "gunicorn", "node": "node", "go": root.name.split("-")[0]}.get(root.tech, "app")
    for pod in world.workloads[root.name].pods:
        pod.restarts += len(kills)
        pod.restart_samples += kills
        pod.last_state = {"state": "terminated", "reason": "OOMKilled", "exitCode": 137,
                          "started_offset_seconds": sample_time(kills[-2]) if len(kills) > 1 else pod.started,
                          "finished_offset_seconds": last_kill}
        pod.started = last_kill + rng.randint(2, 20)
        world.k8s_event("pod", pod.name, "BackOff", "Back-off restarting failed container "
                        f"{root.name} in pod {pod.name}_{world.namespace}({rng.getrandbits(32):08x}-0000)",
                        onset + 30, last_kill + 25, count=len(kills))
    node_name = world.workloads[root.name].pods[0].node
    pid = rng.randint(1000, 60000)
    oom = f"Memory cgroup out of memory: Killed process {pid} ({process})"
    world.k8s_event("node", node_name, "OOMKilling", f"{oom} total-vm:{rng.randint(2, 9)}123456kB, "
                    f"anon-rss:{int(tl.memory_limit / 1024)}kB, file-rss:0kB", onset, last_kill, count=len(kills))
    texts = {
        "java": Failure("java.lang.OutOfMemoryError", "Java heap space"),
        "python": Failure("MemoryError", ""),
        "node": Failure("Error", "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"),
        "*": Failure("fatal error", "runtime: out of memory"),
    }
    failure = texts.get(root.tech, texts["*"])
    for at in spread(world, onset - 60, onset, 1) + spread(world, onset, 0, rng.randint(1, 2)):
        world.log(root, at, "ERROR" if root.tech != "go" else "FATAL",
                  f"{failure.type}: {failure.message}".rstrip(": "), failure=None)
    return Story("resource.memory", root, onset, "memory_exhaustion_oom", ["memory", "oom", "heap"],
                 ["OOMKilled", oom], "refused" if rng.random() < 0.5 else "errors",
                 anomalous=[{"signal": "memory", "service": root.name, "direction": "up"},
                            {"signal": "restarts", "service": root.name, "direction": "up"}])


def disk(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    i0 = first_sample_at(onset)
    size = rng.choice((10, 20, 50, 100)) * 1024 ** 3
    start_free = size * rng.uniform(0.12, 0.3)
    free = [max(0.0, start_free * (1 - min(1.0, i / max(1, i0)) ** 1.5)) if i < i0 else rng.uniform(0, 2) * 1024 ** 2
            for i in range(SAMPLES)]
    pvc = f"data-{root.name}-0"
    world.series.append(gauge("kubelet_volume_stats_available_bytes",
                              {"namespace": world.namespace, "persistentvolumeclaim": pvc}, free))
    world.series.append(gauge("kubelet_volume_stats_capacity_bytes",
                              {"namespace": world.namespace, "persistentvolumeclaim": pvc}, [float(size)] * SAMPLES))
    file = {"postgres": rng.choice((f'could not extend file "base/{rng.randint(16000, 17000)}/{rng.randint(16000, 99999)}": '
                                    "No space left on device",
                                    f'could not write to file "pg_wal/xlogtemp.{rng.randint(30, 900)}": No space left on device')),
            "mysql": f"Disk is full writing './binlog.{rng.randint(1, 999):06d}' (OS errno 28 - No space left on device).",
            "redis": "Write error saving DB on disk: No space left on device",
            "rabbitmq": "disk resource limit alarm set on node rabbit@" + root.name + "-0. Free disk space is insufficient.",
            "kafka": f"Error while appending records to {root.database}-{rng.randint(0, 11)} in dir /bitnami/kafka/data "
                     "(org.apache.kafka.storage.internals.log.LogDirFailureChannel): No space left on device"}
    text = file.get(root.tech, "ENOSPC: no space left on device, write")
    level = {"postgres": "PANIC" if "extend" not in text else "ERROR", "redis": "WARN"}.get(root.tech, "ERROR")
    for at in spread(world, onset, 0, rng.randint(3, 5)):
        world.log(root, at, level, text, logger=_pg_prefix(world, root) if root.tech == "postgres" else "")
    degrade(world, root, onset, "errors")
    table = world.names.plain((2, 2))
    client = {
        "postgres": {"java": ("could not execute statement", Failure("org.postgresql.util.PSQLException", f"ERROR: {text}")),
                     "*": (f"insert failed: ERROR: {text}", None)},
        "mysql": {"java": ("could not execute statement", Failure("java.sql.SQLException", f"The table '{table}' is full")),
                  "*": (f"Error 1114 (HY000): The table '{table}' is full", None)},
        "redis": {"*": ("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. "
                        "Commands that may modify the data set are disabled", None)},
        "rabbitmq": {"*": ("publish stalled: connection.blocked received from broker (low on disk)", None)},
        "kafka": {"java": ("send failed", Failure("org.apache.kafka.common.errors.KafkaStorageException",
                                                  "Disk error when trying to access log file on the disk.")),
                  "*": ("kafka: KAFKA_STORAGE_ERROR: disk error when trying to access log file", None)},
    }[root.tech]
    direct = client_lines(world, root, onset, client, "errors")
    also = {"datastore": ["dependency.database"], "cache": ["dependency.cache"], "queue": ["dependency.queue"]}
    return Story("resource.disk", root, onset, "disk_full", ["disk", "space", "volume", "enospc"],
                 ["No space left on device" if "No space" in text else "Free disk space is insufficient"],
                 None, direct=direct, also_accepted=also.get(root.role, []),
                 anomalous=[{"metric": "kubelet_volume_stats_available_bytes", "service": root.name,
                             "direction": "down", "query": f'kubelet_volume_stats_available_bytes{{persistentvolumeclaim="{pvc}"}}'}])


def _pg_prefix(world: World, node: Node, client: str | None = None) -> str:
    if client:
        return f"{node.db_user}@{node.database} {client}({world.rng.randint(30000, 60000)}) "
    return ""


def pool(world: World, root: Node, onset: int) -> Story:
    """The root's own connection pool to a healthy database runs dry (connections not returned)."""
    rng = world.rng
    db = rng.choice([n for n in world.graph.callees(root.name) if n.role == "datastore"])
    i0 = first_sample_at(onset)
    size = rng.choice((10, 16, 20, 32, 50))
    prefix = world.names.plain((2, 2))
    style = rng.choice(("hikari", "otel", "custom"))
    labels = {"service": root.name}
    if style == "hikari":
        name_used, name_wait = "hikaricp_connections_active", "hikaricp_connections_pending"
        labels["pool"] = "HikariPool-1"
    elif style == "otel":
        name_used, name_wait = "db_client_connections_usage", "db_client_connections_pending_requests"
        labels["pool_name"] = f"{db.name}-pool"
    else:
        name_used, name_wait = f"{prefix}_db_pool_in_use_connections", rng.choice((
            f"{prefix}_db_pool_waiting_requests", f"{prefix}_db_pool_acquire_wait_seconds_total",
            f"{prefix}_db_pool_utilisation_ratio"))
    used = [size * rng.uniform(0.1, 0.35) if i < i0 else float(size) for i in range(SAMPLES)]
    world.series.append(gauge(name_used, labels, used))
    query = None
    if name_wait.endswith("_seconds_total"):  # seconds spent waiting for a connection, a counter
        world.series.append(counter(name_wait, labels, [rng.uniform(0, 0.5) if i < i0 else rng.uniform(600, 1800)
                                                        for i in range(SAMPLES)], rng.uniform(10, 5000)))
        query = f'rate({name_wait}{{service="{root.name}"}}[5m])'
    elif name_wait.endswith("_ratio"):
        world.series.append(gauge(name_wait, labels, [u / size for u in used]))
    else:
        world.series.append(gauge(name_wait, labels, [0.0 if i < i0 else float(rng.randint(8, 60)) for i in range(SAMPLES)]))
    world.series.append(gauge(f"{prefix}_db_pool_max_connections" if style == "custom" else
                              ("hikaricp_connections_max" if style == "hikari" else "db_client_connections_max"),
                              labels, [float(size)] * SAMPLES))
    conn = world.conn_string(root, db)
    texts = {
        "java": ("HikariPool-1 - Connection is not available, request timed out after 30000ms.",
                 Failure("java.sql.SQLTransientConnectionException",
                         "HikariPool-1 - Connection is not available, request timed out after 30000ms.")),
        "python": (f"QueuePool limit of size {size} overflow 0 reached, connection timed out, timeout 30.00",
                   Failure("sqlalchemy.exc.TimeoutError", f"QueuePool limit of size {size} overflow 0 reached, "
                                                          "connection timed out, timeout 30.00")),
        "node": ("Timeout acquiring a connection. The pool is probably full.",
                 Failure("KnexTimeoutError", "Timeout acquiring a connection. The pool is probably full. "
                                             "Are you missing a .transacting(trx) call?")),
        "*": (f"connection pool exhausted: {size}/{size} in use, waited 30s for a free connection",
              Failure("error", "context deadline exceeded")),
    }
    text, failure = texts.get(root.tech, texts["*"])
    for at in spread(world, onset, 0, rng.randint(3, 5)):
        world.log(root, at, "ERROR", f"{text} ({conn})" if rng.random() < 0.5 else text, failure=failure)
    world.log(root, onset - rng.randint(60, 300), "WARN",
              f"connection leak detection triggered for {conn}, stack trace follows" if root.tech == "java"
              else f"connection to {conn} held for {rng.randint(120, 600)}s without being returned to the pool")
    degrade(world, root, onset, "timeout")
    return Story("resource.pool", root, onset, "connection_pool_exhausted", ["pool", "connection"],
                 [text[:60], name_wait], "timeout", also_accepted=["dependency.database"],
                 anomalous=[{"metric": name_wait, "service": root.name, "direction": "up", **({"query": query} if query else {})}],
                 notes=f"{db.name} itself stays healthy: the pool of {root.name} leaks connections.")


def dns(world: World, root: Node, onset: int) -> Story:
    """The root cannot resolve the names it calls (a resolver or search-domain change on its pods)."""
    rng = world.rng
    target = rng.choice(world.graph.callees(root.name))
    host = target.host if not target.in_cluster else rng.choice(
        (target.name, f"{target.name}.{world.namespace}.svc.cluster.local"))
    resolver = f"10.96.0.{rng.choice((10, 10, 53))}"
    texts = {
        "java": (f"{host}: Name or service not known", Failure("java.net.UnknownHostException", f"{host}: Name or service not known")),
        "python": ("Temporary failure in name resolution", Failure("socket.gaierror", "[Errno -3] Temporary failure in name resolution")),
        "node": (f"getaddrinfo ENOTFOUND {host}", Failure("Error", f"getaddrinfo ENOTFOUND {host}")),
        "*": (rng.choice((f"dial tcp: lookup {host} on {resolver}:53: no such host",
                          f"dial tcp: lookup {host} on {resolver}:53: server misbehaving")), None),
    }
    text, failure = texts.get(root.tech, texts["*"])
    if root.tech == "nginx":
        text = f"{host} could not be resolved (3: Host not found)"
    if root.tech == "envoy":
        text = f"DNS resolution failed for {host}: NXDOMAIN"
    for at in spread(world, onset, 0, rng.randint(3, 6)):
        world.log(root, at, "ERROR", f"call to {target.name} failed: {text}" if failure is None else text, failure=failure)
    world.series.append(counter("coredns_dns_responses_total", {"server": "dns://:53", "zone": ".", "rcode": "NXDOMAIN"},
                                [rng.uniform(5, 20) if i < first_sample_at(onset) else rng.uniform(400, 1500)
                                 for i in range(SAMPLES)], rng.randint(10000, 900000)))
    degrade(world, root, onset, "errors")
    key = {"java": "Name or service not known", "python": "Temporary failure in name resolution",
           "node": "ENOTFOUND"}.get(root.tech, "no such host" if "no such host" in text else
                                    ("Host not found" if root.tech == "nginx" else
                                     ("NXDOMAIN" if "NXDOMAIN" in text else "server misbehaving")))
    return Story("network.dns", root, onset, "dns_resolution_failure", ["dns", "resolv", "nxdomain", "lookup"],
                 [key], "errors", anomalous=[{"signal": "errors", "service": root.name, "direction": "up"}],
                 notes=f"{target.name} is healthy; {root.name} cannot resolve its name.")


def tls(world: World, root: Node, onset: int) -> Story:
    """The root's serving certificate expired: its callers' TLS handshakes fail."""
    rng = world.rng
    expiry_metric = rng.choice(("probe_ssl_earliest_cert_expiry", "certmanager_certificate_expiration_timestamp_seconds"))
    world.series.append(gauge(expiry_metric, {"service": root.name, **({"name": f"{root.name}-tls"}
                                                                       if expiry_metric.startswith("cert") else {})},
                              [1.7e9 + rng.randint(0, 10 ** 7)] * SAMPLES))
    if root.in_cluster:
        for at in spread(world, onset, 0, rng.randint(2, 4)):
            client = world.pod_ip(rng.choice(world.graph.callers(root.name))) if world.graph.callers(root.name)[0].in_cluster \
                else "10.0.0.1"
            world.log(root, at, "INFO" if root.tech == "go" else "WARN",
                      f"http: TLS handshake error from {client}:{rng.randint(30000, 60000)}: remote error: tls: bad certificate")
    direct = {}
    phrases = {"go": "x509: certificate has expired or is not yet valid",
               "java": "PKIX path validation failed: java.security.cert.CertPathValidatorException: validity check failed",
               "python": "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired (_ssl.c:1006)",
               "node": "certificate has expired (CERT_HAS_EXPIRED)",
               "nginx": "SSL_do_handshake() failed (SSL: error:0A000086:SSL routines::certificate verify failed) while SSL handshaking to upstream",
               "envoy": "upstream connect error or disconnect/reset before headers. reset reason: connection failure, transport failure reason: TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED"}
    evidence = []
    for caller in world.graph.callers(root.name):
        c_onset = onset + rng.randint(5, 60)
        phrase = phrases.get(caller.tech, phrases["go"])
        target = world.url(root, "/")
        for at in spread(world, c_onset, 0, rng.randint(2, 3)):
            world.log(caller, at, "ERROR", f"request to {target} failed: {phrase}")
        degrade(world, caller, c_onset, "errors")
        direct[caller.name] = (c_onset, "errors")
        evidence.append(phrase.split(" (")[0][:70])
    world.timelines[root.name].rps = [r if i < first_sample_at(onset) else r * 0.05
                                      for i, r in enumerate(world.timelines[root.name].rps)]
    return Story("network.tls", root, onset, "certificate_expired", ["certificate", "tls", "x509", "ssl", "expired"],
                 evidence[:2], None, direct=direct, anomalous=[{"signal": "traffic", "service": root.name, "direction": "down"}],
                 notes=f"the serving certificate of {root.name} expired")


def refused(world: World, root: Node, onset: int) -> Story:
    """The root stops listening: its pods fail readiness, callers get connection refused."""
    rng = world.rng
    tl = world.timelines[root.name]
    i0 = first_sample_at(onset)
    tl.missing |= set(range(i0, SAMPLES))  # nothing answers the scrape either: its series stop
    world.log(root, onset - rng.uniform(1, 20), "ERROR", rng.choice((
        f"accept tcp [::]:{root.port}: accept4: too many open files; retrying in 1s",
        f"listener on 0.0.0.0:{root.port} closed unexpectedly, server stopped accepting connections",
        f"Stopping ProtocolHandler [\"http-nio-{root.port}\"] after failure: java.net.SocketException: Too many open files")))
    for pod in world.workloads.get(root.name, None).pods if root.in_cluster else []:
        pod.ready = False
        world.k8s_event("pod", pod.name, "Unhealthy", f"Readiness probe failed: dial tcp {pod.ip}:{root.port}: connect: "
                        "connection refused", onset + 10, -rng.randint(5, 60), count=rng.randint(10, 90))
    also = {"datastore": ["dependency.database"], "cache": ["dependency.cache"], "queue": ["dependency.queue"]}
    return Story("network.refused", root, onset, "connection_refused", ["refused", "reset", "not listening"],
                 ["connect: connection refused"], "refused", also_accepted=also.get(root.role, []),
                 anomalous=[{"signal": "up", "service": root.name, "direction": "down"}],
                 notes=f"{root.name} stopped accepting connections; its metrics stop with it")


def timeout(world: World, root: Node, onset: int) -> Story:
    """Packets to the root's pods are silently dropped (a NetworkPolicy or security-group change): callers time out."""
    rng = world.rng
    _drops(world, root, onset, rng.uniform(200, 900))
    world.timelines[root.name].rps = [r if i < first_sample_at(onset) else r * rng.uniform(0.05, 0.2)
                                      for i, r in enumerate(world.timelines[root.name].rps)]
    return Story("network.timeout", root, onset, "network_timeout", ["timeout", "timed out", "deadline"],
                 ["container_network_receive_packets_dropped_total"], "timeout", also_accepted=["network.loss"],
                 anomalous=[{"signal": "traffic", "service": root.name, "direction": "down"},
                            {"signal": "drops", "service": root.name, "direction": "up"}])


def loss(world: World, root: Node, onset: int) -> Story:
    """The root's node drops a share of packets: retransmissions, resets and unreachable hosts."""
    rng = world.rng
    _drops(world, root, onset, rng.uniform(50, 300))
    node = world.workloads[root.name].pods[0].node
    world.series.append(counter("node_netstat_Tcp_RetransSegs", {"instance": f"{node}:9100"},
                                [rng.uniform(2, 10) if i < first_sample_at(onset) else rng.uniform(300, 2000)
                                 for i in range(SAMPLES)], rng.randint(10 ** 5, 10 ** 7)))
    for at in spread(world, onset, 0, rng.randint(2, 3)):
        caller = rng.choice(world.graph.callers(root.name))
        addr = world.address(root, "pod_ip")
        world.log(caller, at, "WARN", rng.choice((f"dial tcp {addr}: connect: no route to host",
                                                  f"connect EHOSTUNREACH {addr}",
                                                  "java.net.NoRouteToHostException: No route to host")))
    return Story("network.loss", root, onset, "packet_loss", ["packet loss", "loss", "retransmi", "unreachable", "no route"],
                 ["node_netstat_Tcp_RetransSegs"], rng.choice(("timeout", "refused")), also_accepted=["network.timeout"],
                 anomalous=[{"signal": "drops", "service": root.name, "direction": "up"}])


def _drops(world: World, root: Node, onset: int, rate: float) -> None:
    rng = world.rng
    i0 = first_sample_at(onset)
    for pod in world.workloads[root.name].pods:
        world.series.append(counter("container_network_receive_packets_dropped_total",
                                    {"namespace": world.namespace, "pod": pod.name, "interface": "eth0"},
                                    [rng.uniform(0, 2) if i < i0 else rate * 60 * rng.uniform(0.8, 1.2)
                                     for i in range(SAMPLES)], rng.randint(0, 500)))
