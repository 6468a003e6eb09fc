"""One generated incident end to end: graph, cluster, fault, propagation, noise, telemetry, question and
ground truth, as the files of a demo scenario folder (diagnosis/demo/README.md)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnosis.evaluation.generator.faults import BUILDERS, candidates
from diagnosis.evaluation.generator.formats import render
from diagnosis.evaluation.generator.graph import Graph, Node, build_graph
from diagnosis.evaluation.generator.kube import render_kubernetes
from diagnosis.evaluation.generator.names import NameBook
from diagnosis.evaluation.generator.noise import add_noise, older_change, routine_line
from diagnosis.evaluation.generator.questions import ask, ask_howto, howto_runbook, symptom_runbook
from diagnosis.evaluation.generator.story import Story, propagate
from diagnosis.evaluation.generator.telemetry import Telemetry
from diagnosis.evaluation.generator.traces import render_traces
from diagnosis.evaluation.generator.world import WINDOW, World, build_world
from diagnosis.localisation.taxonomy import CAUSE_KINDS

HELD_BACK_FROM = 1_000_000  # seeds at or above are held back: generated and loaded in tests, never inspected
QUESTION_KINDS = ("incident", "healthy", "no_data", "howto")
MAX_LOG_RECORDS = 148  # the scenario checks allow 40-150 records
MIN_LOG_RECORDS = 45
ALERT_NAMES = {
    "errors": ("HighErrorRate", "HTTP5xxRatioHigh", "ErrorBudgetBurn"),
    "timeout": ("HighLatencyP99", "UpstreamTimeouts", "LatencySLOBreach"),
    "slow": ("HighLatencyP99", "SlowResponses", "LatencySLOBreach"),
}
ROOT_ALERTS = {
    "resource.cpu": "CPUThrottlingHigh", "resource.memory": "KubePodCrashLooping", "resource.disk": "KubePersistentVolumeFillingUp",
    "network.tls": "SSLCertificateExpired", "network.refused": "TargetDown", "change.config": "KubePodCrashLooping",
    "change.image": "KubeDeploymentReplicasMismatch", "dependency.external_api": "BlackboxProbeFailed",
    "scheduling.pending": "KubeDeploymentReplicasMismatch", "scheduling.eviction": "KubePodNotReady",
}


@dataclass
class Incident:
    """A generated incident: its seed and the content of every file of its scenario folder."""

    seed: int
    name: str
    scenario: dict[str, Any]
    logs: list[dict[str, Any]]
    metrics: dict[str, Any]
    alerts: dict[str, Any]
    kubernetes: dict[str, Any]
    ground_truth: dict[str, Any]
    runbooks: dict[str, str]
    traces: dict[str, Any] | None = None
    changes: dict[str, Any] | None = None


def _graph_for(rng: random.Random, size: int, kind: str | None) -> tuple[Graph, list[Node]]:
    """A graph where ``kind`` can happen (larger graphs are drawn if a small one has no place for it)."""
    for attempt in range(200):
        graph = build_graph(rng, min(30, size + attempt // 10))
        if kind is None:
            return graph, []
        places = candidates(graph, kind)
        if places:
            return graph, places
    raise RuntimeError(f"no graph could host {kind}")  # pragma: no cover - 200 draws always find one


def _render_logs(world: World) -> list[dict[str, Any]]:
    records = []
    for name, event in sorted(world.events, key=lambda e: e[1].offset):
        node = world.graph.by_name[name]
        message, level = render(node, event, world.rng)
        record: dict[str, Any] = {"offset_seconds": event.offset, "service": name}
        if level:
            record["level"] = level
        record["message"] = message
        records.append(record)
    return records


def _fill_logs(world: World) -> None:
    """Routine lines so every in-cluster node speaks, the story reaches "now", and the volume is realistic."""
    rng = world.rng
    cluster = [n for n in world.graph.nodes if n.in_cluster]
    spoken = {name for name, _ in world.events}
    for node in cluster:
        if node.name not in spoken:
            routine_line(world, node, rng.uniform(-WINDOW, -1))
    target = rng.randint(max(MIN_LOG_RECORDS, len(world.events) + 10), MAX_LOG_RECORDS)
    while len(world.events) < target - 1:
        routine_line(world, rng.choice(cluster), round(rng.uniform(-WINDOW, -1), 3))
    routine_line(world, rng.choice(cluster), round(rng.uniform(-55, -1), 3))
    if len(world.events) > MAX_LOG_RECORDS:  # keep the story's own lines, thin the routine ones
        del world.events[MAX_LOG_RECORDS:]


def _alert(service: str, name: str, severity: str, summary: str, description: str, state: str, offset: int,
           value: str) -> dict[str, Any]:
    return {"labels": {"alertname": name, "service": service, "severity": severity},
            "annotations": {"summary": summary, "description": description}, "state": state,
            "offset_seconds": int(min(0, offset)), "value": value}


def generate(seed: int, *, traces: bool | None = None) -> Incident:
    """The incident of ``seed`` (the same seed always gives the same incident). ``traces`` None lets the
    seed decide whether it carries traces.json; True or False forces it.

    Why it is long: the incident's parts (question, world, fault, alerts, ground truth, log format) draw from
    one rng in a fixed order, so a seed always gives the same incident; its sections are marked by comments."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    rng = random.Random(seed)
    roll = rng.random()
    question_kind = "healthy" if roll < 0.1 else "no_data" if roll < 0.15 else "howto" if roll < 0.2 else "incident"
    with_traces = rng.random() < 0.4 if traces is None else bool(traces)
    kind: str | None = CAUSE_KINDS[rng.randrange(len(CAUSE_KINDS))].id
    if question_kind in ("no_data", "howto"):
        background = [k.id for k in CAUSE_KINDS if not k.id.startswith(("change.", "data.schema"))]
        kind = rng.choice(background) if rng.random() < 0.3 else None
    elif question_kind == "healthy":
        kind = None
    size = rng.randint(3, 30)
    graph, places = _graph_for(rng, size, kind)
    world = build_world(rng, graph)
    onset = -rng.randint(600, 1800)
    story: Story | None = None
    if kind is not None:
        root = rng.choice(places)
        story = BUILDERS[kind](world, root, onset)
        lines = 3 if len(graph.nodes) <= 8 else 2 if len(graph.nodes) <= 18 else 1
        propagate(world, story, lines)
    involved = set()
    if story:
        involved = {story.root.name, *story.affected, *(a["service"] for a in story.anomalous)}
    healthy = [n for n in graph.nodes if n.name not in involved]
    noise = add_noise(world, healthy, onset if story else None)
    write_changes = bool(world.changes) or rng.random() < 0.5
    if write_changes:
        older_change(world, healthy)
    telemetry = Telemetry(world)
    resource_nodes = {n.name for n in graph.nodes if n.in_cluster and n.role in ("frontend", "service")
                      and rng.random() < 0.4}
    if story and story.root.in_cluster:
        resource_nodes.add(story.root.name)
    if "deploy_restart" in noise:
        resource_nodes.add(noise["deploy_restart"])
    telemetry.write(resource_nodes)
    _fill_logs(world)
    logs = _render_logs(world)

    # the question
    symptoms: list[str] = []
    if story:
        symptoms = list(story.affected) + [a["service"] for a in story.anomalous
                                           if a["service"] != story.root.name and a["service"] not in story.affected]
    minutes = max(1, round(-onset / 60))
    asked: list[str]
    runbooks: dict[str, str] = {}
    howto_topic = None
    if question_kind == "incident":
        assert story is not None
        fronts = [s for s in symptoms if graph.by_name[s].role == "frontend"]
        pool = fronts if fronts and rng.random() < 0.6 else symptoms
        subject = rng.choice(pool) if pool and rng.random() < 0.75 else story.root.name
        asked = [subject]
        question = ask(rng, "incident", subject, minutes)
    elif question_kind == "healthy":
        subject = rng.choice([n.name for n in graph.nodes if n.role in ("frontend", "service")])
        asked = [subject]
        question = ask(rng, "healthy", subject, minutes)
    elif question_kind == "no_data":
        names = NameBook(rng)
        names._taken |= set(graph.by_name)
        subject = names.service()
        asked = [subject]
        question = ask(rng, rng.choice(("incident", "healthy")), subject, minutes)
    else:
        howto_topic = rng.choice(("rotate", "scale", "flush"))
        pick = {"rotate": [n for n in graph.nodes if n.role == "service"
                           and any(c.role == "datastore" for c in graph.callees(n.name))],
                "flush": [n for n in graph.nodes if n.role == "service"
                          and any(c.role == "cache" for c in graph.callees(n.name))]}.get(howto_topic) or \
            [n for n in graph.nodes if n.role == "service"]
        if howto_topic == "flush" and not any(c.role == "cache" for n in pick for c in graph.callees(n.name)):
            howto_topic = "scale"
        subject_node = rng.choice(pick)
        asked = [subject_node.name]
        question = ask_howto(howto_topic, subject_node.name)
        name, text = howto_runbook(howto_topic, subject_node, rng.random() < 0.25)
        runbooks[name] = text
    for_runbook = graph.by_name.get(asked[0]) or rng.choice(graph.of_role("frontend", "service"))
    name, text = symptom_runbook(rng, graph, for_runbook, rng.random() < 0.25)
    runbooks[name] = text

    # alerts
    alerts: list[dict[str, Any]] = []
    if story:
        top = [s for s in story.affected if graph.by_name[s].role in ("frontend", "service")]
        target = asked[0] if asked[0] in story.affected else (rng.choice(top) if top else None)
        if target:
            at, effect = story.affected[target]
            alertname = rng.choice(ALERT_NAMES[effect if effect in ALERT_NAMES else "errors"])
            alerts.append(_alert(target, alertname, "critical", f"{target}: {alertname}",
                                 f"{target} is above its {'error' if effect == 'errors' else 'latency'} objective.",
                                 "firing", at + rng.randint(60, 240), f"{rng.uniform(0.1, 0.9):.2f}"))
        root_alert = ROOT_ALERTS.get(story.kind)
        if root_alert and (not alerts or rng.random() < 0.5):
            alerts.append(_alert(story.root.name, root_alert, "warning", f"{story.root.name}: {root_alert}",
                                 f"{root_alert} on {story.root.name}.", "firing", story.onset + rng.randint(60, 200),
                                 f"{rng.uniform(1, 9):.0f}"))
        if not alerts:
            subject = story.root.name if not symptoms else symptoms[0]
            alerts.append(_alert(subject, "ServiceDegraded", "warning", f"{subject} degraded",
                                 f"{subject} deviates from its baseline.", "firing", story.onset + rng.randint(60, 300),
                                 "1"))
    if "healthy_spike" in noise:
        spike = noise["healthy_spike"]
        alerts.append(_alert(spike, "HighRequestRate", "info", f"{spike}: request rate above usual",
                             "Traffic is higher than the weekly pattern.", "pending", -rng.randint(300, 3000), "1.9"))
    alerts.sort(key=lambda a: a["offset_seconds"])

    # ground truth
    truth: dict[str, Any]
    if question_kind == "incident":
        assert story is not None
        evidence = [e for e in story.evidence if e]
        truth = {"root_cause_service": story.root.name, "root_cause": story.root_cause,
                 "cause_keywords": story.keywords, "key_evidence": evidence, "expected_nothing_wrong": False,
                 "symptom_services": symptoms,
                 "anomalous_metrics": [telemetry.resolve(a) for a in story.anomalous],
                 "incident_window": {"start_offset_seconds": story.onset, "end_offset_seconds": 0}}
        if story.notes:
            truth["notes"] = story.notes
    else:
        calm = [e.text for name, e in world.events if e.level == "INFO" and not e.raw and '"' not in e.text
                and "\\" not in e.text and (story is None or name not in involved)]
        evidence = [rng.choice(calm)] if calm else [graph.nodes[0].name]
        truth = {"root_cause_service": None,
                 "root_cause": {"healthy": "no_anomaly", "no_data": "no_data", "howto": "howto_question"}[question_kind],
                 "cause_keywords": {"healthy": ["no anomaly", "healthy", "nothing wrong", "no evidence", "未发现异常", "正常"],
                                    "no_data": ["no data", "not found", "no telemetry", "unknown service", "没有数据", "未找到"],
                                    "howto": ["runbook", "step", "kubectl", "步骤"]}[question_kind],
                 "key_evidence": evidence, "expected_nothing_wrong": True, "symptom_services": [],
                 "anomalous_metrics": [], "incident_window": None}
        if story:
            truth["distractor"] = {"service": story.root.name, "cause_kind": story.kind,
                                   "note": "an incident elsewhere that the question is not about"}
        if howto_topic:
            truth["runbook_claim"] = next(n for n in runbooks if n.startswith("howto-"))
    # the main log format: the root's own, or for a backing component the first caller that reports it
    main = story.root if story and not story.root.is_leaf else (
        graph.callers(story.root.name)[0] if story else graph.by_name.get(asked[0]) or graph.nodes[0])
    truth |= {"cause_kind": story.kind if story and question_kind == "incident" else None,
              "also_accepted_kinds": story.also_accepted if story and question_kind == "incident" else [],
              "question_kind": question_kind, "asked_services": asked, "format": main.format or "nginx",
              "size": len(graph.nodes), "seed": seed,
              "formats": sorted({graph.by_name[r["service"]].format for r in logs}), "held_back": seed >= HELD_BACK_FROM, "noise": noise,
              "metric_conventions": sorted(set(telemetry.conventions.values())), "mesh": telemetry.mesh}

    data_services = sorted({r["service"] for r in logs} | {s["labels"]["service"] for s in world.series
                                                           if "service" in s["labels"]}
                           | {a["labels"]["service"] for a in alerts})
    name = f"gen-{seed:07d}"
    scenario = {"name": name, "title": f"Generated incident {seed}",
                "services": data_services,
                "description": f"A generated incident: {len(graph.nodes)} components in namespace {world.namespace}.",
                "default_question": question}
    return Incident(
        seed=seed, name=name, scenario=scenario, logs=logs, metrics={"series": world.series}, alerts={"alerts": alerts},
        kubernetes=render_kubernetes(world), ground_truth=truth, runbooks=runbooks,
        traces=render_traces(world, story) if with_traces and (story is None or question_kind == "incident") else None,
        changes={"changes": sorted(world.changes, key=lambda c: c["offset_seconds"])} if write_changes and world.changes else None,
    )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1) + "\n"


def write_incident(incident: Incident, folder: Path | str) -> Path:
    """Write ``incident`` as a scenario folder at ``folder`` (created); returns the folder."""
    folder = Path(folder)
    (folder / "runbooks").mkdir(parents=True, exist_ok=True)
    files = {
        "scenario.json": _dump(incident.scenario),
        "logs.jsonl": "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in incident.logs),
        "metrics.json": json.dumps(incident.metrics, ensure_ascii=False, separators=(",", ":")) + "\n",
        "alerts.json": _dump(incident.alerts),
        "kubernetes.json": _dump(incident.kubernetes),
        "ground_truth.json": _dump(incident.ground_truth),
    }
    if incident.traces is not None:
        files["traces.json"] = _dump(incident.traces)
    if incident.changes is not None:
        files["changes.json"] = _dump(incident.changes)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    for name, text in incident.runbooks.items():
        (folder / "runbooks" / name).write_text(text, encoding="utf-8")
    return folder
