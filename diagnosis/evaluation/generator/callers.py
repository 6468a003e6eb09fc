"""What a caller writes when a service it calls fails: the wording of its own stack (Go net/http,
Spring RestTemplate/Feign, Python requests, Node axios, nginx, Envoy), naming the callee by host,
cluster DNS name, cluster IP or pod IP.

Effects: ``errors`` (the callee answers 5xx), ``timeout``, ``refused`` (connections refused or
reset) and ``slow`` (answers, late).
"""

from __future__ import annotations

import json

from dataclasses import dataclass

from diagnosis.evaluation.generator.formats import Failure
from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.world import World

EFFECTS = ("errors", "timeout", "refused", "slow")


@dataclass(frozen=True)
class Line:
    """One line a caller writes: level, text, optional error, and whether the text is a whole access line."""

    level: str
    text: str
    failure: Failure | None = None
    raw: bool = False


def api_path(world: World, node: Node) -> str:
    """A route a caller uses on ``node``, stable per node."""
    seed = sum(map(ord, node.name))
    verbs = ("items", "records", "sessions", "quotes", "lookups", "batches", "entries", "tokens")
    return f"/{('api', 'v1', 'v2', 'internal')[seed % 4]}/{verbs[seed % len(verbs)]}"


def caller_lines(world: World, caller: Node, callee: Node, effect: str) -> list[Line]:
    """(level, text, failure) lines ``caller`` writes once ``callee`` shows ``effect``."""
    rng = world.rng
    path = api_path(world, callee)
    if callee.is_leaf and callee.in_cluster:
        return [_client_library(world, caller, callee, effect)]
    if caller.tech == "nginx":
        return [_nginx(world, callee, effect, path)]
    if caller.tech == "envoy" and effect != "slow":
        return [Line("ERROR", _envoy(world, callee, effect, path), raw=True)]
    url = world.url(callee, path)
    addr = world.address(callee)
    method = rng.choice(("GET", "POST"))
    if effect == "slow":
        ms = rng.randint(2500, 9000)
        return [Line("WARN", rng.choice((f"slow call to {url} took {ms}ms", f"{method} {url} completed in {ms} ms (slow)",
                                     f"upstream {callee.name} responded after {ms / 1000:.1f}s")))]
    if caller.tech == "go":
        text = {
            "errors": f"unexpected status 503 Service Unavailable from {method} {url}",
            "timeout": rng.choice((f'{method} "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
                                   f"dial tcp {addr}: i/o timeout")),
            "refused": rng.choice((f"dial tcp {addr}: connect: connection refused",
                                   f'{method} "{url}": read tcp {world.pod_ip(caller) if caller.in_cluster else "10.0.0.1"}:'
                                   f'{rng.randint(32768, 60999)}->{addr}: read: connection reset by peer')),
        }[effect]
        return [Line("ERROR", f"request to {callee.name} failed", Failure("error", text))]
    if caller.tech == "java":
        failure = {
            "errors": Failure("org.springframework.web.client.HttpServerErrorException$ServiceUnavailable",
                              f'503 Service Unavailable: "{{"status":503,"path":"{path}"}}"'),
            "timeout": Failure("java.net.SocketTimeoutException", "Read timed out"),
            "refused": Failure("java.net.ConnectException", "Connection refused"),
        }[effect]
        text = f'I/O error on {method} request for "{url}": {failure.message}' if effect != "errors" else \
            f"[{rng.choice(('503', '500'))}] during [{method}] to [{url}] [{callee.name.title().replace('-', '')}Client#call()]"
        return [Line("ERROR", text, failure)]
    if caller.tech == "python":
        host, _, port = addr.rpartition(":")
        failure = {
            "errors": Failure("requests.exceptions.HTTPError", f"503 Server Error: Service Unavailable for url: {url}"),
            "timeout": Failure("requests.exceptions.ReadTimeout",
                               f"HTTPConnectionPool(host='{host}', port={port}): Read timed out. (read timeout=5)"),
            "refused": Failure("requests.exceptions.ConnectionError",
                               f"HTTPConnectionPool(host='{host}', port={port}): Max retries exceeded with url: {path} "
                               f"(Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at "
                               f"0x7f{rng.randint(1000000, 9999999):x}>: Failed to establish a new connection: "
                               f"[Errno 111] Connection refused'))"),
        }[effect]
        return [Line("ERROR", f"call to {callee.name} failed", failure)]
    # node (axios / undici) and the rest
    failure = {
        "errors": Failure("AxiosError", f"Request failed with status code 503 ({method} {url})"),
        "timeout": Failure("AxiosError", f"timeout of 5000ms exceeded ({method} {url})"),
        "refused": Failure("Error", f"connect ECONNREFUSED {addr}"),
    }[effect]
    return [Line("ERROR", f"upstream request failed: {failure.message}", failure)]


def _nginx(world: World, callee: Node, effect: str, path: str) -> Line:
    rng = world.rng
    client = f"10.{rng.randint(0, 9)}.{rng.randint(0, 9)}.{rng.randint(2, 250)}"
    upstream = f"http://{world.address(callee, rng.choice(('ip', 'pod_ip', 'fqdn')))}{path}"
    request = f'"{rng.choice(("GET", "POST"))} {path} HTTP/1.1"'
    what = {
        "errors": "upstream prematurely closed connection while reading response header from upstream",
        "timeout": "upstream timed out (110: Connection timed out) while reading response header from upstream",
        "refused": "connect() failed (111: Connection refused) while connecting to upstream",
        "slow": "upstream response is buffered to a temporary file /var/cache/nginx/proxy_temp/4/01/0000000014 while reading upstream",
    }[effect]
    level = "WARN" if effect == "slow" else "ERROR"
    return Line(level, f"*{rng.randint(1000, 99999)} {what}, client: {client}, server: _, request: {request}, "
                   f'upstream: "{upstream}", host: "{world.namespace}.example"')


def _envoy(world: World, callee: Node, effect: str, path: str) -> str:
    rng = world.rng
    flags = {"errors": "-", "timeout": "UT", "refused": "UF,URX"}[effect]
    code = {"errors": 503, "timeout": 504, "refused": 503}[effect]
    host = world.address(callee, "pod_ip") if callee.in_cluster else f"{callee.host}:443"
    cluster = f"outbound|{callee.port}||{callee.name}.{world.namespace}.svc.cluster.local" if callee.in_cluster \
        else f"outbound|443||{callee.host}"
    return json.dumps({"start_time": "{ts:iso}", "method": rng.choice(("GET", "POST")), "path": path,
                       "protocol": "HTTP/1.1", "response_code": code, "response_flags": flags,
                       "upstream_host": host, "upstream_cluster": cluster,
                       "duration": rng.randint(5, 30) if effect != "timeout" else 15000}, separators=(",", ":"))


def _client_library(world: World, caller: Node, callee: Node, effect: str) -> Line:
    """A database, cache or broker client's own words for a callee it cannot reach or that answers late,
    naming it by connection string or address."""
    rng = world.rng
    conn = world.conn_string(caller, callee)
    addr = world.address(callee, rng.choice(("ip", "pod_ip", "host")))
    host = addr.rpartition(":")[0]
    if effect == "slow":
        ms = rng.randint(1500, 9000)
        return Line("WARN", rng.choice((f"slow {callee.tech} call to {conn}: {ms}ms",
                                        f"{callee.tech} round trip to {addr} took {ms} ms")))
    timeout = effect in ("timeout", "slow")
    if caller.tech == "java":
        failure = {
            "postgres": Failure("org.postgresql.util.PSQLException", "The connection attempt failed."),
            "mysql": Failure("com.mysql.cj.jdbc.exceptions.CommunicationsException",
                             "Communications link failure. The last packet sent successfully to the server was 0 "
                             "milliseconds ago."),
            "redis": Failure("io.lettuce.core.RedisConnectionException", f"Unable to connect to {addr}"),
        }.get(callee.tech, Failure("java.net.SocketTimeoutException" if timeout else "java.net.ConnectException",
                                   "connect timed out" if timeout else "Connection refused"))
        cause = "java.net.SocketTimeoutException: connect timed out" if timeout else "java.net.ConnectException: Connection refused"
        return Line("ERROR", f"cannot reach {conn} ({cause})", failure)
    if caller.tech == "python":
        text = {"postgres": f'connection to server at "{host}", port {callee.port} failed: '
                            + ("timeout expired" if timeout else "Connection refused"),
                "mysql": f"(2003, \"Can't connect to MySQL server on '{host}' ({'timed out' if timeout else '111'})\")",
                "redis": f"Error {'110 connecting to ' + addr + '. Connection timed out' if timeout else '111 connecting to ' + addr + '. Connection refused'}.",
                }.get(callee.tech, f"[Errno {110 if timeout else 111}] {'Connection timed out' if timeout else 'Connection refused'}: {addr}")
        kind = {"postgres": "psycopg2.OperationalError", "mysql": "pymysql.err.OperationalError",
                "redis": "redis.exceptions.ConnectionError"}.get(callee.tech, "ConnectionError")
        return Line("ERROR", f"{callee.tech} unavailable ({conn})", Failure(kind, text))
    if caller.tech == "node":
        code = "ETIMEDOUT" if timeout else "ECONNREFUSED"
        return Line("ERROR", f"connect {code} {addr} ({conn})", Failure("Error", f"connect {code} {addr}"))
    verb = "i/o timeout" if timeout else "connect: connection refused"
    return Line("ERROR", f"{callee.tech}: dial tcp {addr}: {verb} ({conn})")
