"""The incident generator writes demo scenario folders that load, pass the checks every shipped scenario
passes, and tell the story their ground truth records (diagnosis/evaluation/generator/)."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path

import pytest

from diagnosis.demo import load_scenario
from diagnosis.demo.loader import REQUIRED_FILES
from diagnosis.evaluation.generator import HELD_BACK_FROM, QUESTION_KINDS, generate, write_incident
from diagnosis.evaluation.generator.__main__ import main as cli
from diagnosis.localisation.taxonomy import CAUSE_KIND_BY_ID, CAUSE_KINDS
from diagnosis.tools.backends.base import SERVED_LEVELS, format_timestamp, parse_time
from diagnosis.tools.backends.demo import DemoBackend
from diagnosis.tools.backends.demo_traces import DemoTraces
from tests.demo.test_scenarios import NOW, _data_services, _evidence_corpus, _moves, _served

CHECKED_SEEDS = range(200)
KIND_SEEDS = range(500)
HOUR = 3600
CJK = re.compile(r"[\u4e00-\u9fff]")
PROBLEM_LEVELS = ("WARN", "ERROR", "CRITICAL", "FATAL", "PANIC")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Seeds 0..199 written once, loaded by every check below."""
    root = tmp_path_factory.mktemp("generated")
    return {seed: write_incident(generate(seed), root / f"gen-{seed:07d}") for seed in CHECKED_SEEDS}


@pytest.fixture(scope="module")
def incidents():
    return {seed: generate(seed) for seed in KIND_SEEDS}


def _shipped_service_names() -> set[str]:
    repo = Path(__file__).resolve().parents[2]
    names: set[str] = set()
    for base in (repo / "diagnosis" / "demo" / "scenarios", repo / "tests" / "holdout_scenarios"):
        for folder in base.iterdir():
            if (folder / "scenario.json").is_file():
                scenario = load_scenario(folder)
                names |= set(scenario.services) | _data_services(scenario)
    return names


# --- determinism and the API -------------------------------------------------------------------


def test_the_same_seed_gives_the_same_bytes_and_another_seed_does_not(tmp_path):
    def files(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    for seed in (0, 7, 123):
        one = files(write_incident(generate(seed), tmp_path / f"a{seed}"))
        two = files(write_incident(generate(seed), tmp_path / f"b{seed}"))
        assert one == two
    assert files(tmp_path / "a0")["logs.jsonl"] != files(tmp_path / "a7")["logs.jsonl"]


def test_the_bytes_do_not_depend_on_the_process_hash_seed(tmp_path):
    """Set and dict ordering of strings changes between processes; the output must not."""
    script = ("import hashlib, sys, pathlib\n"
              "from diagnosis.evaluation.generator import generate, write_incident\n"
              "digest = hashlib.sha256()\n"
              "for seed in (5, 42, 77):\n"
              "    folder = write_incident(generate(seed, traces=True), pathlib.Path(sys.argv[1]) / str(seed))\n"
              "    for path in sorted(folder.rglob('*')):\n"
              "        digest.update(path.name.encode() + (path.read_bytes() if path.is_file() else b''))\n"
              "print(digest.hexdigest())\n")
    repo = Path(__file__).resolve().parents[2]
    digests = set()
    for hash_seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-c", script, str(tmp_path / hash_seed)], cwd=repo, capture_output=True,
                             text=True, env={**os.environ, "PYTHONHASHSEED": hash_seed}, check=True)
        digests.add(run.stdout.strip())
    assert len(digests) == 1


def test_traces_can_be_forced_on_and_off_without_changing_the_incident():
    for seed in range(12):
        with_traces, without = generate(seed, traces=True), generate(seed, traces=False)
        assert without.traces is None
        assert with_traces.logs == without.logs and with_traces.metrics == without.metrics
        assert with_traces.ground_truth == without.ground_truth
        if with_traces.ground_truth["question_kind"] in ("incident", "healthy"):
            assert with_traces.traces and with_traces.traces["traces"]
    decided = [generate(seed).traces is not None for seed in range(60)]
    assert 0 < sum(decided) < len(decided)  # left to the seed, some carry traces and some do not


def test_a_seed_must_be_a_non_negative_integer():
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="seed"):
            generate(bad)


def test_the_command_line_writes_one_folder_per_seed(tmp_path, capsys):
    assert cli([str(tmp_path), "--seeds", "3:6", "--traces", "off"]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["gen-0000003", "gen-0000004", "gen-0000005"]
    assert not any((tmp_path / name / "traces.json").exists() for name in written)
    assert "wrote 3 incidents" in capsys.readouterr().out


# --- every folder is a valid scenario and passes the shipped scenarios' checks --------------------


@pytest.mark.parametrize("seed", CHECKED_SEEDS)
def test_every_generated_folder_loads_and_passes_the_scenario_checks(seed, folders):
    path = folders[seed]
    for name in REQUIRED_FILES + ("kubernetes.json",):
        json.loads((path / name).read_text(encoding="utf-8")) if name.endswith(".json") else None
    scenario = load_scenario(path)
    truth = scenario.ground_truth
    served = _served(path)
    levels = {r["level"] for r in served["logs"]}
    # realistic amounts, levels as served, one hour at 60 s ending now
    assert scenario.name == path.name
    assert re.search(r"[A-Za-z]", scenario.default_question["en"]) and CJK.search(scenario.default_question["zh"])
    assert 40 <= len(scenario.logs) <= 150
    assert "INFO" in levels and levels <= set(SERVED_LEVELS)
    assert max(r["offset_seconds"] for r in scenario.logs) >= -60
    assert all(s["step_seconds"] == 60 and len(s["values"]) == 60 for s in scenario.series)
    assert 1 <= len(scenario.runbooks) <= 2
    for runbook in scenario.runbooks:
        text = runbook.read_text(encoding="utf-8")
        assert text.startswith("# ") and len(re.findall(r"^## ", text, flags=re.M)) >= 3
    # services, evidence and ground truth
    services = _data_services(scenario)
    assert set(scenario.services) == services
    corpus = _evidence_corpus(scenario)
    for evidence in truth["key_evidence"]:
        assert any(evidence in text for text in corpus), evidence
    if truth["expected_nothing_wrong"]:
        assert truth["root_cause_service"] is None and truth["incident_window"] is None
    else:
        assert truth["root_cause_service"] in services
        assert any(a["state"] == "firing" for a in scenario.alerts)
        assert levels & set(PROBLEM_LEVELS)
    assert set(truth["symptom_services"]) <= services
    backend = DemoBackend([path], now=NOW)
    for spec in truth["anomalous_metrics"]:
        if "query" in spec:
            result = backend.query_metrics(query=spec["query"])["series"]
        else:
            result = backend.query_metrics(metric=spec["metric"], service=spec["service"])["series"]
        assert result, spec
        assert any(_moves([float(v) for _, v in s["values"]], spec["direction"]) for s in result), spec
    # timestamps inside the lines are the records' own
    by_time = {(r["timestamp"], r["service"]) for r in served["logs"]}
    for record in scenario.logs:
        if "{ts:" in record["message"]:
            assert (format_timestamp(NOW + timedelta(seconds=record["offset_seconds"])), record["service"]) in by_time
    for record in served["logs"]:
        assert "{ts:" not in record["message"]
        for stamp in re.findall(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}", record["message"]):
            gap = parse_time(stamp.replace(" ", "T"), argument="t") - parse_time(record["timestamp"], argument="t")
            assert abs(gap) < timedelta(seconds=1), record


def _involved(spans, service):
    return [s for s in spans if s.service == service
            or (s.kind == "client" and s.attributes.get("peer.service") == service)]


def _deviation(spans, service, split_ns):
    before = [s for s in _involved(spans, service) if s.start_ns < split_ns]
    after = [s for s in _involved(spans, service) if s.start_ns >= split_ns]
    assert before and after, service
    errors = sum(s.is_error for s in after) / len(after) - sum(s.is_error for s in before) / len(before)
    slower = statistics.median(s.duration_ns for s in after) / max(1, statistics.median(s.duration_ns for s in before))
    return errors, slower


@pytest.mark.parametrize("seed", CHECKED_SEEDS)
def test_traces_and_changes_tell_the_story_of_the_ground_truth(seed, folders):
    """The checks of tests/demo/test_scenario_traces_changes.py, with the onset taken from the ground truth."""
    scenario = load_scenario(folders[seed])
    truth = scenario.ground_truth
    _check_traces(scenario)
    if truth["expected_nothing_wrong"]:
        assert all(c["offset_seconds"] < -6 * HOUR for c in scenario.changes)
        return
    onset = truth["incident_window"]["start_offset_seconds"]
    before = [c for c in scenario.changes if onset - HOUR <= c["offset_seconds"] <= onset]
    assert {c["service"] for c in before} <= {truth["root_cause_service"]}
    if truth["cause_kind"].startswith("change.") or truth["cause_kind"] == "data.schema":
        assert before, "a change story needs its change before the onset"
    else:
        assert not before


@pytest.mark.parametrize("seed", range(0, 400, 5))
def test_forced_traces_show_the_root_deviate_and_bystanders_stay_healthy(seed, tmp_path):
    incident = generate(seed, traces=True)
    scenario = load_scenario(write_incident(incident, tmp_path / incident.name))
    if incident.ground_truth["question_kind"] in ("incident", "healthy"):
        assert scenario.traces
    _check_traces(scenario)


def _check_traces(scenario) -> None:
    truth = scenario.ground_truth
    if scenario.traces:
        spans = [s for _, _, trace in DemoTraces([scenario])._traces for s in trace]
        assert {s.service for s in spans} <= set(scenario.services)
        assert {s.attributes["peer.service"] for s in spans if "peer.service" in s.attributes} <= set(scenario.services)
        assert all(s.start_ns <= 0 for s in spans if s.parent_span_id is None)
        if truth["question_kind"] == "incident":
            split = truth["incident_window"]["start_offset_seconds"] * 1_000_000_000
            errors, slower = _deviation(spans, truth["root_cause_service"], split)
            assert errors >= 0.5 or slower >= 3, (errors, slower)
            story = {truth["root_cause_service"], *truth["symptom_services"]}
            for service in {s.service for s in spans} - story:
                if [s for s in _involved(spans, service) if s.start_ns >= split]:
                    errors, slower = _deviation(spans, service, split)
                    assert errors <= 0 and slower < 1.5, (service, errors, slower)


# --- the stories: kinds, places, propagation, questions --------------------------------------------


def test_every_kind_appears_at_least_twice_in_different_formats(incidents):
    formats: dict[str, set[str]] = defaultdict(set)
    counts: Counter = Counter()
    for incident in incidents.values():
        truth = incident.ground_truth
        if truth["question_kind"] == "incident":
            counts[truth["cause_kind"]] += 1
            formats[truth["cause_kind"]].add(truth["format"])
    for kind in CAUSE_KINDS:
        assert counts[kind.id] >= 2, kind.id
        assert len(formats[kind.id]) >= 2, (kind.id, formats[kind.id])


def test_the_ground_truth_names_kinds_of_the_taxonomy_and_every_question_kind_occurs(incidents):
    seen = Counter(i.ground_truth["question_kind"] for i in incidents.values())
    assert set(seen) == set(QUESTION_KINDS)
    assert 0.05 <= seen["healthy"] / len(incidents) <= 0.15
    for incident in incidents.values():
        truth = incident.ground_truth
        if truth["question_kind"] == "incident":
            assert truth["cause_kind"] in CAUSE_KIND_BY_ID
            assert truth["root_cause_service"] not in truth["symptom_services"]
        else:
            assert truth["cause_kind"] is None and truth["expected_nothing_wrong"] is True
        assert set(truth["also_accepted_kinds"]) <= set(CAUSE_KIND_BY_ID)
        assert truth["cause_kind"] not in truth["also_accepted_kinds"]
        assert 3 <= truth["size"] <= 30


def test_no_data_questions_ask_about_a_service_with_no_telemetry_and_howto_questions_have_a_runbook(incidents):
    for incident in incidents.values():
        truth = incident.ground_truth
        asked = truth["asked_services"]
        if truth["question_kind"] == "no_data":
            assert not set(asked) & set(incident.scenario["services"])
            assert asked[0] in incident.scenario["default_question"]["en"]
        elif truth["question_kind"] == "howto":
            assert incident.scenario["default_question"]["en"].startswith("How do I")
            assert truth["runbook_claim"] in incident.runbooks
            assert asked[0] in incident.runbooks[truth["runbook_claim"]]
        else:
            assert set(asked) <= set(incident.scenario["services"])
        if truth["question_kind"] == "healthy":
            assert not [a for a in incident.alerts["alerts"] if a["state"] == "firing"]


def test_the_question_is_often_about_a_symptom_rather_than_the_root(incidents):
    asked_root = [i.ground_truth["asked_services"] == [i.ground_truth["root_cause_service"]]
                  for i in incidents.values() if i.ground_truth["question_kind"] == "incident"]
    assert 0.15 <= sum(asked_root) / len(asked_root) <= 0.6


def _references(incident, service: str) -> set[str]:
    """Every way a line can name ``service``: its name, cluster DNS name, cluster IP, pod IPs, outside host."""
    refs = {service}
    world = incident.kubernetes
    for svc in world["services"]:
        if svc["name"] == service:
            refs |= {svc.get("clusterIP"), svc.get("externalName")} - {None, "None"}
    refs |= {p["podIP"] for p in world["pods"] if p.get("podIP") and p["labels"].get("app") == service}
    return refs


def test_symptoms_start_after_the_root_and_direct_callers_name_it(incidents):
    named = 0
    for incident in incidents.values():
        truth = incident.ground_truth
        if truth["question_kind"] != "incident" or not truth["symptom_services"]:
            continue
        onset = truth["incident_window"]["start_offset_seconds"]
        for service in truth["symptom_services"]:
            problems = [r["offset_seconds"] for r in incident.logs if r["service"] == service
                        and (r.get("level") in PROBLEM_LEVELS or re.search(r"\b(ERROR|WARN|error|warn)\b", r["message"]))]
            assert not problems or min(problems) >= onset, (incident.name, service)
        refs = _references(incident, truth["root_cause_service"])
        lines = [r["message"] for r in incident.logs if r["service"] in truth["symptom_services"]]
        named += any(ref in line for line in lines for ref in refs)
    incidents_with_symptoms = sum(1 for i in incidents.values() if i.ground_truth["question_kind"] == "incident"
                                  and i.ground_truth["symptom_services"])
    assert named / incidents_with_symptoms >= 0.8


def test_faults_happen_only_where_they_make_sense(incidents):
    for incident in incidents.values():
        truth = incident.ground_truth
        if truth["question_kind"] != "incident":
            continue
        kind, root = truth["cause_kind"], truth["root_cause_service"]
        names = {s["labels"]["__name__"] for s in incident.metrics["series"] if s["labels"].get("service") == root}
        if kind == "dependency.database":
            assert names & {"pg_up", "mysql_up"}
        elif kind == "dependency.cache":
            assert "redis_up" in names
        elif kind == "dependency.external_api":
            assert "probe_success" in names
        elif kind.startswith("change.") or kind == "data.schema":
            changes = incident.changes["changes"]
            onset = truth["incident_window"]["start_offset_seconds"]
            assert any(c["service"] == root and c["offset_seconds"] <= onset for c in changes)
        elif kind.startswith("scheduling."):
            pods = {p["name"] for p in incident.kubernetes["pods"] if p["labels"].get("app") == root}
            nodes = {p["node"] for p in incident.kubernetes["pods"] if p["labels"].get("app") == root}
            targets = {e["object"].split("/", 1)[1] for e in incident.kubernetes["events"]}
            assert targets & (pods | nodes), incident.name


def test_the_window_is_an_hour_and_the_onset_is_in_its_last_ten_to_thirty_minutes(incidents):
    for incident in incidents.values():
        window = incident.ground_truth["incident_window"]
        if window:
            assert -1800 <= window["start_offset_seconds"] <= -600 and window["end_offset_seconds"] == 0


def test_logs_come_in_many_formats_and_metrics_in_many_conventions(incidents):
    main_formats = Counter(i.ground_truth["format"] for i in incidents.values())
    assert len(main_formats) >= 8
    every_format = set().union(*(i.ground_truth["formats"] for i in incidents.values()))
    assert every_format >= {"json", "logfmt", "logback", "log4j", "zap", "zerolog", "klog", "python", "nginx",
                            "postgres", "mysql", "redis", "rabbitmq"}
    conventions = set().union(*(i.ground_truth["metric_conventions"] for i in incidents.values()))
    assert conventions >= {"prom", "micrometer", "otel", "flask", "ingress", "envoy"}
    names = {s["labels"]["__name__"] for i in list(incidents.values())[:80] for s in i.metrics["series"]}
    assert {"istio_requests_total", "response_total", "container_cpu_usage_seconds_total",
            "container_memory_working_set_bytes", "kube_pod_container_status_restarts_total",
            "http_server_requests_seconds_count", "http_server_request_duration_seconds_bucket"} <= names
    assert any(s["labels"]["__name__"].startswith("node_") and "service" not in s["labels"]
               for i in incidents.values() for s in i.metrics["series"])
    assert any(None in s["values"] for i in incidents.values() for s in i.metrics["series"])


def test_every_incident_carries_noise_on_healthy_services(incidents):
    for incident in incidents.values():
        truth = incident.ground_truth
        noise = truth["noise"]
        involved = {truth["root_cause_service"], *truth["symptom_services"]}
        assert {"routine_warning", "healthy_spike"} <= set(noise) or truth["size"] <= 5, incident.name
        for key in ("healthy_spike", "deploy_restart"):
            if key in noise:
                assert noise[key] not in involved


def test_generated_names_are_drawn_at_random_and_never_those_of_shipped_or_held_out_scenarios(incidents):
    shipped = _shipped_service_names()
    generated = [s for i in incidents.values() for s in i.scenario["services"]]
    assert not set(generated) & shipped
    assert len(set(generated)) / len(generated) >= 0.9


def test_held_back_seeds_generate_and_load(tmp_path):
    """Only that they generate and load: their content is not looked at."""
    for seed in range(HELD_BACK_FROM, HELD_BACK_FROM + 5):
        incident = generate(seed)
        assert incident.ground_truth["held_back"] is True
        DemoBackend([write_incident(incident, tmp_path / incident.name)], now=NOW)
    assert math.isfinite(HELD_BACK_FROM) and HELD_BACK_FROM == 1_000_000


def test_the_generator_imports_no_framework():
    from tests.architecture.test_import_contracts import FRAMEWORKS, _closure, _modules

    modules = [m for m in _modules() if m.startswith("diagnosis.evaluation.generator")]
    assert len(modules) >= 10
    for module in modules:
        frameworks = sorted(name for name in _closure(module) if name.split(".")[0] in FRAMEWORKS)
        assert not frameworks, f"{module} loads {frameworks}"
