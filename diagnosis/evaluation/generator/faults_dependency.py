"""Dependency and data faults: a database, cache, queue or outside API that fails or slows down; a schema
that no longer matches the code; a message the consumer cannot process."""

from __future__ import annotations

from diagnosis.evaluation.generator.faults_change import record_change, roll_out
from diagnosis.evaluation.generator.formats import Failure
from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.series import counter, gauge
from diagnosis.evaluation.generator.story import Story, client_lines, degrade, spread
from diagnosis.evaluation.generator.world import SAMPLES, World, first_sample_at


def _step(world: World, onset: int, before: tuple[float, float], after: tuple[float, float]) -> list[float]:
    i0 = first_sample_at(onset)
    return [world.rng.uniform(*before) if i < i0 else world.rng.uniform(*after) for i in range(SAMPLES)]


def database(world: World, root: Node, onset: int) -> Story:
    """Why it is long: one branch per variant of the fault (connections, locks, slow), each writing its metric
    and the server's and clients' lines together, from the one rng in a fixed order (a seed always gives the
    same incident)."""
    rng = world.rng
    variant = rng.choice(("connections", "locks", "slow"))
    pg = root.tech == "postgres"
    svc = {"service": root.name}
    clients = [world.pod_ip(c) for c in world.graph.callers(root.name) if c.in_cluster] or ["10.0.0.9"]
    if variant == "connections":
        limit = rng.choice((100, 150, 200))
        name = "pg_stat_activity_count" if pg else "mysql_global_status_threads_connected"
        world.series.append(gauge(name, {**svc, **({"datname": root.database, "state": "active"} if pg else {})},
                                  _step(world, onset, (limit * 0.2, limit * 0.4), (limit - 3, limit))))
        server = ("sorry, too many clients already", "FATAL") if pg else ("Too many connections", "ERROR")
        client = {"java": ("Unable to acquire JDBC Connection", Failure(
                      "org.postgresql.util.PSQLException" if pg else "java.sql.SQLNonTransientConnectionException",
                      f"FATAL: {server[0]}" if pg else "Data source rejected establishment of connection, message "
                                                       "from server: Too many connections")),
                  "*": (f"failed to connect: {'FATAL: ' if pg else 'Error 1040: '}{server[0]}", None)}
        keywords, cause = ["too many", "connections", "max_connections", "clients"], "db_too_many_connections"
        effect = "errors"
    elif variant == "locks":
        name = "pg_locks_count" if pg else "mysql_global_status_innodb_row_lock_waits"
        labels = {**svc, **({"datname": root.database, "mode": "exclusivelock"} if pg else {})}
        if pg:
            world.series.append(gauge(name, labels, _step(world, onset, (0, 3), (60, 240))))
        else:
            world.series.append(counter(name, labels, _step(world, onset, (0, 2), (300, 900)), rng.randint(100, 9000)))
        table = world.names.plain((2, 2))
        server = ((f"process {rng.randint(100, 9999)} still waiting for ShareLock on transaction {rng.randint(10 ** 6, 10 ** 7)} "
                   f"after 1000.052 ms", "INFO") if pg else
                  (f"InnoDB: Lock wait timeout exceeded; try restarting transaction (table `{root.database}`.`{table}`)", "WARN"))
        client = {"java": ("could not execute statement", Failure(
                      "org.postgresql.util.PSQLException" if pg else "com.mysql.cj.jdbc.exceptions.MySQLTransactionRollbackException",
                      "ERROR: canceling statement due to lock timeout" if pg else "Lock wait timeout exceeded; try restarting transaction")),
                  "*": ("canceling statement due to lock timeout" if pg else "Error 1205: Lock wait timeout exceeded", None)}
        keywords, cause, effect = ["lock", "contention", "deadlock", "blocking"], "db_lock_contention", "timeout"
    else:
        name = "pg_stat_activity_max_tx_duration" if pg else "mysql_global_status_slow_queries"
        if pg:
            world.series.append(gauge(name, {**svc, "datname": root.database, "state": "active"},
                                      _step(world, onset, (0.01, 0.4), (20, 240))))
        else:
            world.series.append(counter(name, svc, _step(world, onset, (0, 1), (40, 200)), rng.randint(10, 5000)))
        ms = rng.randint(4000, 30000)
        table = world.names.plain((2, 2))
        server = ((f"duration: {ms}.{rng.randint(100, 999)} ms  statement: SELECT * FROM {table} WHERE updated_at > $1 "
                   f"ORDER BY id", "INFO") if pg else
                  (f"Slow query: {ms / 1000:.1f}s SELECT * FROM {table} (Rows_examined: {rng.randint(10 ** 6, 10 ** 8)})", "WARN"))
        client = {"java": ("query timed out", Failure("org.springframework.dao.QueryTimeoutException",
                                                      "PreparedStatementCallback; SQL [select ...]; Query timed out")),
                  "*": ("query timed out: context deadline exceeded", None)}
        keywords, cause, effect = ["slow", "query", "database"], "db_slow_queries", "timeout"
    text, level = server
    for at in spread(world, onset, 0, rng.randint(3, 6)):
        prefix = f"{root.db_user}@{root.database} {rng.choice(clients)}({rng.randint(30000, 60000)}) " if pg else ""
        world.log(root, at, level, text, logger=prefix)
    direct = client_lines(world, root, onset, client, effect)
    for caller_name in direct:  # callers' pools saturate: a symptom, not the cause
        if rng.random() < 0.5:
            world.series.append(gauge("hikaricp_connections_pending", {"service": caller_name, "pool": "HikariPool-1"},
                                      _step(world, onset + 60, (0, 0), (5, 40))))
    evidence = {"connections": server[0][:40], "locks": "still waiting for ShareLock" if pg else "Lock wait timeout exceeded",
                "slow": "duration:" if pg else "Slow query"}[variant]
    return Story("dependency.database", root, onset, cause, keywords + ["database", "db"], [evidence, name], None,
                 direct=direct, anomalous=[{"metric": name, "service": root.name, "direction": "up",
                                            **({"query": f"rate({name}{{service=\"{root.name}\"}}[5m])"}
                                               if name.endswith(("_waits", "_queries")) else {})}],
                 also_accepted=["resource.pool"] if variant == "connections" else [],
                 trace="slow" if effect == "timeout" else "error")


def cache(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    svc = {"service": root.name}
    variant = rng.choice(("maxmemory", "slow"))
    maxmem = rng.choice((256, 512, 1024)) * 1024 * 1024
    if variant == "maxmemory":
        world.series.append(gauge("redis_memory_used_bytes", svc, _step(world, onset, (maxmem * 0.5, maxmem * 0.7),
                                                                        (maxmem * 0.999, maxmem))))
        world.series.append(gauge("redis_memory_max_bytes", svc, [float(maxmem)] * SAMPLES))
        world.series.append(counter("redis_evicted_keys_total", svc, [0.0] * SAMPLES, 0))
        for at in spread(world, onset, 0, rng.randint(1, 2)):
            world.log(root, at, "WARN", f"WARNING: used memory {maxmem // 1024 // 1024}mb reached maxmemory and the "
                                        "policy is noeviction: writes are refused")
        err = "OOM command not allowed when used memory > 'maxmemory'."
        client = {"java": ("Redis write failed", Failure("redis.clients.jedis.exceptions.JedisDataException", err)),
                  "python": ("cache write failed", Failure("redis.exceptions.ResponseError", err)),
                  "*": (f"cache set failed: {err}", None)}
        metric, evidence, effect = "redis_memory_used_bytes", ["OOM command not allowed"], "errors"
        keywords, cause = ["maxmemory", "memory", "oom", "cache"], "redis_maxmemory"
    else:
        world.series.append(gauge("redis_slowlog_length", svc, _step(world, onset, (0, 2), (100, 128))))
        for at in spread(world, onset, 0, rng.randint(2, 4)):
            world.log(root, at, "WARN", "Asynchronous AOF fsync is taking too long (disk is busy?). Writing the AOF buffer "
                                        "without waiting for fsync to complete, this may slow down Redis.")
        client = {"java": ("cache read failed", Failure("io.lettuce.core.RedisCommandTimeoutException",
                                                        "Command timed out after 1 minute(s)")),
                  "python": ("cache read failed", Failure("redis.exceptions.TimeoutError", "Timeout reading from socket")),
                  "*": ("redis: i/o timeout", None)}
        metric, evidence, effect = "redis_slowlog_length", ["AOF fsync is taking too long"], "timeout"
        keywords, cause = ["slow", "redis", "cache", "fsync", "latency"], "redis_slow"
    direct = client_lines(world, root, onset, client, effect)
    return Story("dependency.cache", root, onset, cause, keywords, evidence, None, direct=direct,
                 anomalous=[{"metric": metric, "service": root.name, "direction": "up"}],
                 trace="slow" if effect == "timeout" else "error")


def queue(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    svc = {"service": root.name}
    if root.tech == "rabbitmq":
        world.series.append(gauge("rabbitmq_alarms_memory_used_watermark", svc, _step(world, onset, (0, 0), (1, 1))))
        world.series.append(gauge("rabbitmq_queue_messages_ready", {**svc, "queue": root.database},
                                  _step(world, onset, (0, 40), (5000, 90000))))
        for at in spread(world, onset, 0, 2):
            world.log(root, at, "WARN", f"memory resource limit alarm set on node rabbit@{root.name}-0. "
                                        "*** Publishers will be blocked until this alarm clears ***")
        client = {"java": ("AMQP publish blocked", Failure("com.rabbitmq.client.AlreadyClosedException",
                                                           "connection is blocked: low on memory")),
                  "*": ("amqp connection.blocked: low on memory, publish stalled", None)}
        metric, evidence = "rabbitmq_alarms_memory_used_watermark", ["memory resource limit alarm set"]
        keywords = ["rabbitmq", "broker", "alarm", "blocked", "queue"]
    else:
        topic = root.database
        world.series.append(gauge("kafka_topic_partition_under_replicated_partition",
                                  {**svc, "topic": topic, "partition": str(rng.randint(0, 11))},
                                  _step(world, onset, (0, 0), (1, 1))))
        for at in spread(world, onset, 0, 3):
            world.log(root, at, "ERROR", f"[ReplicaManager broker=1] Error processing append operation on partition "
                                         f"{topic}-{rng.randint(0, 11)} (kafka.server.ReplicaManager) "
                                         f"org.apache.kafka.common.errors.NotEnoughReplicasException: The size of the "
                                         f"current ISR Set(1) is insufficient to satisfy the min.isr requirement of 2")
        client = {"java": ("send failed", Failure("org.apache.kafka.common.errors.NotEnoughReplicasException",
                                                  "Messages are rejected since there are fewer in-sync replicas than required.")),
                  "go": ("kafka: client has run out of available brokers to talk to", None),
                  "*": ("KafkaJSNumberOfRetriesExceeded: NOT_ENOUGH_REPLICAS", None)}
        metric, evidence = "kafka_topic_partition_under_replicated_partition", ["NotEnoughReplicasException"]
        keywords = ["kafka", "broker", "replica", "isr", "queue"]
    direct = client_lines(world, root, onset, client, "errors")
    return Story("dependency.queue", root, onset, "broker_failure", keywords, evidence, None, direct=direct,
                 anomalous=[{"metric": metric, "service": root.name, "direction": "up"}])


def external_api(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    effect = rng.choice(("errors", "timeout"))
    i0 = first_sample_at(onset)
    world.timelines[root.name].err = [e if i < i0 else 1.0 for i, e in enumerate(world.timelines[root.name].err)]
    if effect == "timeout":
        degrade(world, root, onset, "slow", 60)
    return Story("dependency.external_api", root, onset, "external_api_failure",
                 ["external", "third-party", "provider", root.host, "upstream"], [root.host], effect,
                 anomalous=[{"metric": "probe_success", "service": root.name, "direction": "down"}],
                 trace="slow" if effect == "timeout" else "error")


def schema(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    db = rng.choice([n for n in world.graph.callees(root.name) if n.role == "datastore"])
    at = onset - rng.randint(30, 600)
    old, new = roll_out(world, root, at)
    record_change(world, root, at, "helm", f"upgrade {root.name} {old.rpartition(':')[2]} -> {new.rpartition(':')[2]} "
                                           "(pre-upgrade hook: db migrate)", f"deployment/{root.name}",
                  revision=str(world.workloads[root.name].revision), status="deployed")
    column = f"{world.names.plain((2, 2))}_{rng.choice(('id', 'at', 'code', 'ref'))}"
    table = world.names.plain((2, 2))
    pg = db.tech == "postgres"
    phrase = f'column "{column}" does not exist' if pg else f"Unknown column '{column}' in 'field list'"
    lines = {"java": Failure("org.postgresql.util.PSQLException" if pg else "java.sql.SQLSyntaxErrorException",
                             f"ERROR: column {table[:1]}.{column} does not exist" if pg else phrase),
             "python": Failure("sqlalchemy.exc.ProgrammingError", f"(psycopg2.errors.UndefinedColumn) {phrase}" if pg else
                               f"(pymysql.err.OperationalError) (1054, \"{phrase}\")"),
             "*": Failure("error", f"pq: {phrase}" if pg else f"Error 1054 (42S22): {phrase}")}
    failure = lines.get(root.tech, lines["*"])
    for at2 in spread(world, onset, 0, rng.randint(3, 5)):
        world.log(root, at2, "ERROR", f"query on {table} failed: {failure.message}")
    if pg:
        ip = world.pod_ip(root)
        for at2 in spread(world, onset, 0, 2):
            world.log(db, at2, "ERROR", phrase + f" at character {rng.randint(8, 90)}",
                      logger=f"{db.db_user}@{db.database} {ip}({rng.randint(30000, 60000)}) ")
    degrade(world, root, onset, "errors")
    return Story("data.schema", root, onset, "schema_mismatch", ["schema", "column", "migration"],
                 ["does not exist" if pg else "Unknown column", column], "errors", also_accepted=["change.deploy"],
                 anomalous=[{"signal": "errors", "service": root.name, "direction": "up"}],
                 notes=f"the migration shipped with {new} and the code disagree about {table}.{column}")


def poison(world: World, root: Node, onset: int) -> Story:
    rng = world.rng
    q = rng.choice([n for n in world.graph.callees(root.name) if n.role == "queue"])
    offset = rng.randint(10 ** 4, 10 ** 7)
    partition = rng.randint(0, 11)
    where = f"{q.database}-{partition}@{offset}" if q.tech == "kafka" else f"delivery tag {offset} on queue {q.database}"
    errors = {"java": Failure("com.fasterxml.jackson.core.JsonParseException",
                              "Unexpected character ('<' (code 60)): expected a valid value"),
              "python": Failure("json.decoder.JSONDecodeError", "Expecting value: line 1 column 1 (char 0)"),
              "node": Failure("SyntaxError", "Unexpected token < in JSON at position 0"),
              "*": Failure("error", "proto: cannot parse invalid wire-format data")}
    failure = errors.get(root.tech, errors["*"])
    for at in spread(world, onset, 0, rng.randint(4, 6)):
        world.log(root, at, "ERROR", f"failed to process message {where}, redelivering (attempt {rng.randint(2, 60)})",
                  failure=failure)
    lag_name = "kafka_consumergroup_lag" if q.tech == "kafka" else "rabbitmq_queue_messages_unacked"
    labels = {"service": q.name, **({"consumergroup": root.name, "topic": q.database, "partition": str(partition)}
                                     if q.tech == "kafka" else {"queue": q.database})}
    i0 = first_sample_at(onset)
    world.series.append(gauge(lag_name, labels, [rng.uniform(0, 30) if i < i0 else 200.0 * (i - i0 + 1) * rng.uniform(5, 10)
                                                 for i in range(SAMPLES)]))
    prefix = world.names.plain((2, 2))
    world.series.append(counter(f"{prefix}_messages_processed_total", {"service": root.name, "outcome": "success"},
                                [rng.uniform(200, 900) if i < i0 else 0.0 for i in range(SAMPLES)], rng.randint(10 ** 5, 10 ** 7)))
    return Story("data.poison_message", root, onset, "poison_message", ["poison", "message", "deserializ", "malformed", "parse"],
                 [where], None, anomalous=[{"metric": lag_name, "service": q.name, "direction": "up",
                                            "query": f"{lag_name}{{service=\"{q.name}\"}}"}],
                 notes=f"one malformed message blocks the consumer {root.name}; {q.name} only shows the backlog")
