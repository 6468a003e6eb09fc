"""Metric series of a generated incident, in the naming conventions real exporters use: Prometheus client
defaults, Micrometer, OpenTelemetry semantic conventions, prometheus-flask-exporter, ingress-nginx, Envoy,
Istio and Linkerd; cAdvisor and kube-state-metrics; postgres/mysql/redis/rabbitmq/kafka exporters; the
blackbox exporter for outside APIs. Every series is computed from the nodes' timelines."""

from __future__ import annotations

from typing import Any

from diagnosis.evaluation.generator.graph import Node
from diagnosis.evaluation.generator.series import counter, gauge, histogram
from diagnosis.evaluation.generator.world import SAMPLES, World, first_sample_at

CONVENTIONS = {
    "java": ("micrometer", "otel", "prom"), "go": ("prom", "otel"), "python": ("flask", "prom", "otel"),
    "node": ("prom", "otel"), "nginx": ("ingress",), "envoy": ("envoy",),
}
MS_BOUNDS = (5.0, 25.0, 100.0, 250.0, 1000.0, 2500.0, 10000.0)


def _per_step(values: list[float]) -> list[float]:
    return [v * 60 for v in values]


class Telemetry:
    """Writes every series into ``world.series`` and answers where a signal of a node can be queried."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.conventions: dict[str, str] = {}
        self.mesh = world.rng.choice(("none", "none", "istio", "linkerd"))
        self.with_resources: set[str] = set()

    # --- application metrics -------------------------------------------------------------------

    def _app(self, node: Node) -> None:
        rng, tl = self.world.rng, self.world.timelines[node.name]
        conv = rng.choice(CONVENTIONS[node.tech])
        self.conventions[node.name] = conv
        # the OpenTelemetry collector's Prometheus exporter names the service by `job`; kube-prometheus by `service`
        svc = {self.service_label(node.name): node.name}
        ok = _per_step([r * (1 - e) for r, e in zip(tl.rps, tl.err)])
        bad = _per_step([r * e for r, e in zip(tl.rps, tl.err)])
        gone = tl.missing
        start = rng.uniform(1e5, 1e7)
        route = rng.choice(("/api/{id}", "/v1/items", "/orders/{id}", "/", "/graphql", "/v2/{name}"))
        out = self.world.series
        if conv == "prom":
            out.append(counter("http_requests_total", {**svc, "method": "GET", "code": "200"}, ok, start, gone))
            out.append(counter("http_requests_total", {**svc, "method": "GET", "code": "500"}, bad, start * 0.004, gone))
            out += histogram("http_request_duration_seconds", svc, _per_step(tl.rps), tl.latency, start, gone)
        elif conv == "micrometer":
            base = {**svc, "uri": route, "method": "GET"}
            out += histogram("http_server_requests_seconds", {**base, "status": "200", "outcome": "SUCCESS"}, ok,
                             tl.latency, start, gone)
            err_labels = {**base, "status": "500", "outcome": "SERVER_ERROR"}
            out.append(counter("http_server_requests_seconds_count", err_labels, bad, start * 0.004, gone))
            out.append(counter("http_server_requests_seconds_sum", err_labels, [b * l for b, l in zip(bad, tl.latency)],
                               start * 0.0004, gone))
        elif conv == "otel":
            base = {**svc, "http_route": route, "http_request_method": "GET"}
            out += histogram("http_server_request_duration_seconds", {**base, "http_response_status_code": "200"}, ok,
                             tl.latency, start, gone)
            err_labels = {**base, "http_response_status_code": "500"}
            out.append(counter("http_server_request_duration_seconds_count", err_labels, bad, start * 0.004, gone))
            out.append(counter("http_server_request_duration_seconds_sum", err_labels,
                               [b * l for b, l in zip(bad, tl.latency)], start * 0.0004, gone))
        elif conv == "flask":
            out.append(counter("flask_http_request_total", {**svc, "method": "GET", "status": "200"}, ok, start, gone))
            out.append(counter("flask_http_request_total", {**svc, "method": "GET", "status": "500"}, bad, start * 0.004, gone))
            out += histogram("flask_http_request_duration_seconds", {**svc, "method": "GET", "path": route, "status": "200"},
                             ok, tl.latency, start, gone)
        elif conv == "ingress":
            base = {**svc, "ingress": node.name, "namespace": self.world.namespace}
            out.append(counter("nginx_ingress_controller_requests", {**base, "status": "200"}, ok, start, gone))
            out.append(counter("nginx_ingress_controller_requests", {**base, "status": "502"}, bad, start * 0.004, gone))
            out += histogram("nginx_ingress_controller_request_duration_seconds", base, _per_step(tl.rps), tl.latency,
                             start, gone)
        else:  # envoy
            base = {**svc, "envoy_http_conn_manager_prefix": "ingress_http"}
            out.append(counter("envoy_http_downstream_rq_xx", {**base, "envoy_response_code_class": "2"}, ok, start, gone))
            out.append(counter("envoy_http_downstream_rq_xx", {**base, "envoy_response_code_class": "5"}, bad,
                               start * 0.004, gone))
            out += histogram("envoy_http_downstream_rq_time", base, _per_step(tl.rps), tl.latency, start, gone,
                             bounds=MS_BOUNDS, scale=1000.0)

    def service_label(self, name: str) -> str:
        return "job" if self.conventions.get(name) == "otel" else "service"

    def _custom(self, node: Node) -> None:
        """One or two of the application's own series under a random prefix, named by convention."""
        rng, tl = self.world.rng, self.world.timelines[node.name]
        prefix = self.world.names.plain((2, 2))
        for _ in range(rng.randint(1, 2)):
            noun = self.world.names.plain((1, 2))
            suffix = rng.choice(("_total", "_bytes", "_seconds", "_ratio"))
            labels = {"service": node.name}
            if suffix == "_total":
                self.world.series.append(counter(f"{prefix}_{noun}{suffix}", labels,
                                                 _per_step([r * rng.uniform(0.1, 2) for r in tl.rps]), rng.uniform(1e3, 1e7),
                                                 tl.missing))
            else:
                level = {"_bytes": rng.uniform(1e5, 1e9), "_seconds": rng.uniform(0.01, 30), "_ratio": rng.uniform(0.05, 0.9)}[suffix]
                self.world.series.append(gauge(f"{prefix}_{noun}{suffix}", labels,
                                               [level * rng.uniform(0.93, 1.07) for _ in range(SAMPLES)], tl.missing))

    def errors_query(self, name: str) -> tuple[str, str]:
        conv = self.conventions[name]
        sel = {
            "prom": ("http_requests_total", 'code=~"5.."'),
            "micrometer": ("http_server_requests_seconds_count", 'outcome="SERVER_ERROR"'),
            "otel": ("http_server_request_duration_seconds_count", 'http_response_status_code=~"5.."'),
            "flask": ("flask_http_request_total", 'status=~"5.."'),
            "ingress": ("nginx_ingress_controller_requests", 'status=~"5.."'),
            "envoy": ("envoy_http_downstream_rq_xx", 'envoy_response_code_class="5"'),
        }[conv]
        return sel[0], f'sum(rate({sel[0]}{{{self.service_label(name)}="{name}",{sel[1]}}}[5m]))'

    def latency_query(self, name: str) -> tuple[str, str]:
        base = {"prom": "http_request_duration_seconds", "micrometer": "http_server_requests_seconds",
                "otel": "http_server_request_duration_seconds", "flask": "flask_http_request_duration_seconds",
                "ingress": "nginx_ingress_controller_request_duration_seconds",
                "envoy": "envoy_http_downstream_rq_time"}[self.conventions[name]]
        return f"{base}_bucket", (f'histogram_quantile(0.99, sum by (le) (rate({base}_bucket{{{self.service_label(name)}="{name}"}}[5m])))')

    def traffic_query(self, name: str) -> tuple[str, str]:
        node = self.world.graph.by_name[name]
        metric = {"postgres": "pg_stat_database_xact_commit", "mysql": "mysql_global_status_queries",
                  "redis": "redis_commands_processed_total", "kafka": "kafka_topic_partition_current_offset"}.get(node.tech)
        if metric is None:
            metric, _ = self.errors_query(name)
        return metric, f'sum(rate({metric}{{{self.service_label(name)}="{name}"}}[5m]))'

    # --- the mesh ----------------------------------------------------------------------------------

    def _mesh(self) -> None:
        world, rng = self.world, self.world.rng
        for caller_name, callee_name in world.graph.edges:
            caller, callee = world.graph.by_name[caller_name], world.graph.by_name[callee_name]
            if callee.role != "service":
                continue
            tl = world.timelines[callee_name]
            share = 1 / max(1, len(world.graph.callers(callee_name)))
            ok = _per_step([r * share * (1 - e) for r, e in zip(tl.rps, tl.err)])
            bad = _per_step([r * share * e for r, e in zip(tl.rps, tl.err)])
            start = rng.uniform(1e4, 1e6)
            if self.mesh == "istio":
                base = {"reporter": "source", "source_workload": caller_name, "destination_workload": callee_name,
                        "destination_service": f"{callee_name}.{world.namespace}.svc.cluster.local"}
                world.series.append(counter("istio_requests_total", {**base, "response_code": "200"}, ok, start))
                world.series.append(counter("istio_requests_total", {**base, "response_code": "503"}, bad, start * 0.003))
                world.series += histogram("istio_request_duration_milliseconds", base, _per_step([r * share for r in tl.rps]),
                                          tl.latency, start, bounds=MS_BOUNDS, scale=1000.0)
            else:
                base = {"direction": "outbound", "deployment": caller_name, "dst_deployment": callee_name,
                        "namespace": world.namespace}
                world.series.append(counter("response_total", {**base, "classification": "success", "status_code": "200"},
                                            ok, start))
                world.series.append(counter("response_total", {**base, "classification": "failure", "status_code": "503"},
                                            bad, start * 0.003))
                world.series += histogram("response_latency_ms", base, _per_step([r * share for r in tl.rps]), tl.latency,
                                          start, bounds=MS_BOUNDS, scale=1000.0)

    # --- backing components ----------------------------------------------------------------------

    def _backing(self, node: Node) -> None:
        rng, tl, out = self.world.rng, self.world.timelines[node.name], self.world.series
        svc = {"service": node.name}
        gone = tl.missing
        if node.tech == "postgres":
            out.append(gauge("pg_up", svc, [1.0] * SAMPLES, gone))
            out.append(gauge("pg_stat_database_numbackends", {**svc, "datname": node.database},
                             [rng.uniform(8, 30) for _ in range(SAMPLES)], gone))
            out.append(counter("pg_stat_database_xact_commit", {**svc, "datname": node.database}, _per_step(tl.rps),
                               rng.uniform(1e6, 1e9), gone))
        elif node.tech == "mysql":
            out.append(gauge("mysql_up", svc, [1.0] * SAMPLES, gone))
            out.append(gauge("mysql_global_status_threads_connected", svc, [rng.uniform(8, 30) for _ in range(SAMPLES)], gone))
            out.append(counter("mysql_global_status_queries", svc, _per_step(tl.rps), rng.uniform(1e6, 1e9), gone))
        elif node.tech == "redis":
            out.append(gauge("redis_up", svc, [1.0] * SAMPLES, gone))
            out.append(gauge("redis_connected_clients", svc, [float(rng.randint(10, 60)) for _ in range(SAMPLES)], gone))
            out.append(counter("redis_commands_processed_total", svc, _per_step(tl.rps), rng.uniform(1e6, 1e9), gone))
            out.append(gauge("redis_memory_used_bytes", svc, [m * 0.5 for m in tl.memory], gone))
        elif node.tech == "rabbitmq":
            out.append(gauge("rabbitmq_queue_messages_ready", {**svc, "queue": node.database},
                             [rng.uniform(0, 40) for _ in range(SAMPLES)], gone))
            out.append(gauge("rabbitmq_connections", svc, [float(rng.randint(5, 40)) for _ in range(SAMPLES)], gone))
        elif node.tech == "kafka":
            out.append(gauge("kafka_brokers", svc, [3.0] * SAMPLES, gone))
            out.append(counter("kafka_topic_partition_current_offset", {**svc, "topic": node.database, "partition": "0"},
                               _per_step(tl.rps), rng.uniform(1e6, 1e8), gone))
        elif node.role == "external":
            instance = f"https://{node.host}/health"
            failing = [e >= 0.5 for e in tl.err]
            out.append(gauge("probe_success", {**svc, "instance": instance}, [0.0 if f else 1.0 for f in failing]))
            out.append(gauge("probe_http_status_code", {**svc, "instance": instance},
                             [503.0 if f else 200.0 for f in failing]))
            out.append(gauge("probe_duration_seconds", {**svc, "instance": instance}, tl.latency))

    # --- the cluster: cAdvisor, kube-state-metrics, up ---------------------------------------------

    def _resources(self, node: Node) -> None:
        world, rng = self.world, self.world.rng
        tl = world.timelines[node.name]
        for pod in world.workloads[node.name].pods:
            spans: list[tuple[str, int, int]] = []
            if pod.replaced:
                old, at = pod.replaced
                cut = first_sample_at(at)
                spans.append((old, 0, cut))
                if pod.phase == "Running":
                    spans.append((pod.name, cut, SAMPLES))
            elif pod.phase == "Running":
                spans.append((pod.name, 0, SAMPLES))
            for name, lo, hi in spans:
                labels = {"namespace": world.namespace, "pod": name, "container": node.name}
                inside = set(range(lo, hi))
                missing = set(range(SAMPLES)) - inside
                cpu = counter("container_cpu_usage_seconds_total", labels, _per_step(tl.cpu), rng.uniform(1e3, 1e6),
                              missing, resets=pod.restart_samples if name == pod.name else ())
                mem = gauge("container_memory_working_set_bytes", labels, tl.memory, missing)
                restarts = [0.0] * SAMPLES
                count = 0
                for i in range(SAMPLES):
                    count += pod.restart_samples.count(i) if name == pod.name else 0
                    restarts[i] = float(count)
                world.series += [cpu, mem, gauge("kube_pod_container_status_restarts_total", labels, restarts, missing),
                                 gauge("kube_pod_container_resource_limits", {**labels, "resource": "memory", "unit": "byte"},
                                       [tl.memory_limit] * SAMPLES, missing)]

    def _nodes(self) -> None:
        """node-exporter series of every worker node: no service label, only the instance."""
        rng, out = self.world.rng, self.world.series
        for _, host_ip in self.world.nodes:
            instance = {"instance": f"{host_ip}:9100"}
            total = rng.choice((8, 16, 32)) * 1024 ** 3
            out.append(gauge("node_memory_MemAvailable_bytes", instance,
                             [total * rng.uniform(0.35, 0.45) for _ in range(SAMPLES)]))
            size = rng.choice((50, 100, 200)) * 1024 ** 3
            free = size * rng.uniform(0.3, 0.7)
            out.append(gauge("node_filesystem_avail_bytes", {**instance, "device": "/dev/nvme0n1p1", "mountpoint": "/",
                                                             "fstype": "xfs"},
                             [free - i * size * 1e-5 for i in range(SAMPLES)]))
            out.append(counter("node_cpu_seconds_total", {**instance, "cpu": "0", "mode": "idle"},
                               [rng.uniform(35, 50) for _ in range(SAMPLES)], rng.uniform(1e6, 1e7)))

    def _up(self, node: Node) -> None:
        tl = self.world.timelines[node.name]
        pod = self.world.workloads[node.name].pods[0]
        self.world.series.append(gauge("up", {"service": node.name, "job": f"{self.world.namespace}/{node.name}",
                                              "instance": f"{pod.ip}:{node.port}"},
                                       [0.0 if i in tl.missing else 1.0 for i in range(SAMPLES)]))

    def write(self, resource_nodes: set[str]) -> None:
        world = self.world
        for node in world.graph.nodes:
            if node.role in ("frontend", "service"):
                self._app(node)
                if self.world.rng.random() < 0.5:
                    self._custom(node)
            else:
                self._backing(node)
            if node.in_cluster:
                self._up(node)
                if node.name in resource_nodes:
                    self._resources(node)
        if self.mesh != "none":
            self._mesh()
        self._nodes()
        self.with_resources = set(resource_nodes)
        # a fault's own series win over a baseline exporter series with the same labels
        seen: set[tuple] = set()
        unique = []
        for s in world.series:  # the fault's series were written first
            key = tuple(sorted(s["labels"].items()))
            if key not in seen:
                seen.add(key)
                unique.append(s)
        world.series[:] = unique

    def resolve(self, spec: dict[str, Any]) -> dict[str, Any]:
        """A ground-truth hint for a signal (errors, latency, traffic, cpu, memory, restarts, up, drops) as a
        metric and the PromQL query that shows it move."""
        if "signal" not in spec:
            return spec
        name, signal = spec["service"], spec["signal"]
        node = self.world.graph.by_name[name]
        out = {"service": name, "direction": spec["direction"]}
        if signal in ("errors", "latency", "traffic") and node.role == "external":
            return {**out, "metric": "probe_success", "direction": "down"}
        if signal == "errors":
            out["metric"], out["query"] = self.errors_query(name)
        elif signal == "latency":
            out["metric"], out["query"] = self.latency_query(name)
        elif signal == "traffic":
            out["metric"], out["query"] = self.traffic_query(name)
        elif signal == "cpu":
            out["metric"], out["query"] = ("container_cpu_usage_seconds_total",
                                           f'sum(rate(container_cpu_usage_seconds_total{{container="{name}"}}[5m]))')
        elif signal == "memory":
            out["metric"], out["query"] = ("container_memory_working_set_bytes",
                                           f'max(container_memory_working_set_bytes{{container="{name}"}})')
        elif signal == "restarts":
            out["metric"], out["query"] = ("kube_pod_container_status_restarts_total",
                                           f'sum(kube_pod_container_status_restarts_total{{container="{name}"}})')
        elif signal == "up":
            out["metric"], out["query"] = "up", f'up{{service="{name}"}}'
        elif signal == "drops":
            pods = "|".join(p.name for p in self.world.workloads[name].pods)
            out["metric"], out["query"] = ("container_network_receive_packets_dropped_total",
                                           f'sum(rate(container_network_receive_packets_dropped_total{{pod=~"{pods}"}}[5m]))')
        return out
