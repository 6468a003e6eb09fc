"""What the tools returned, read into typed observations (log lines, series, alerts, runbook chunks, per-service profiles)."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Iterable, Mapping

from diagnosis.llm.offline.anomalies import _analyse_profile, _analyse_series
from diagnosis.llm.offline.leads import leads_in, stated_symptom
from diagnosis.llm.offline.lexicon import _canonical, _json, _parse_ts, _short, _suspicious
from diagnosis.llm.offline.observed import (Alert, KnowledgeChunk, LogLine, Profile, Series, _binding, kubernetes_lines,
                                           pair_limits)


class Observations:
    """The successful tool results of a run, parsed once, with per-service profiles."""

    def __init__(self, tool_results: Iterable[Mapping[str, Any]], question: str = ""):
        self.symptom = stated_symptom(question)
        self.lines: list[LogLine] = []
        self.series: list[Series] = []
        self.alerts: list[Alert] = []
        self.knowledge: list[KnowledgeChunk] = []
        self.failed: list[str] = []
        self.suspicious: Counter = Counter()
        self.queried: list[str] = []  # services asked for by name, in order
        self.calls: set[str] = set()
        self.declared: dict[str, None] = {}  # the names of the cluster's Services, in order
        # A service's log or metric query that answered with nothing: the empty answer, as a citation.
        self.unanswered: dict[str, list[dict[str, str]]] = {}
        seen_lines, seen_series, seen_alerts = set(), set(), set()
        for item in tool_results or ():
            tool, args = item.get("tool_name"), item.get("arguments") or {}
            self.calls.add(_canonical(str(tool), args))
            result = item.get("result")
            if item.get("status") != "SUCCESS" or not isinstance(result, Mapping):
                self.failed.append(f"{tool}({_short(_json(args), 80)}): {_short(item.get('error') or item.get('status'), 120)}")
                continue
            inv = str(item.get("invocation_id"))
            if tool in ("query_logs", "query_metrics") and isinstance(args.get("service"), str):
                if args["service"] not in self.queried:
                    self.queried.append(args["service"])
                key = "records" if tool == "query_logs" else "series"
                if result.get(key) == []:
                    self.unanswered.setdefault(args["service"], []).append(_binding(inv, tool, "$", f'"{key}": []'))
            if tool == "query_logs":
                for j, rec in enumerate(result.get("records") or []):
                    if not isinstance(rec, Mapping) or not isinstance(rec.get("message"), str):
                        continue
                    key = (rec.get("service"), rec.get("timestamp"), rec.get("message"))
                    if key in seen_lines:
                        continue
                    seen_lines.add(key)
                    service = str(rec.get("service") or args.get("service") or "")
                    if _suspicious(rec["message"]):
                        self.suspicious[service] += 1
                        continue
                    self.lines.append(LogLine(inv, j, str(rec.get("timestamp", "")), _parse_ts(rec.get("timestamp")),
                                              service, str(rec.get("level", "INFO")).upper(), rec["message"]))
            elif tool == "query_metrics":
                self._add_series(inv, result, seen_series)
            elif tool == "query_kubernetes":
                self._add_kubernetes(inv, result, seen_lines)
            elif tool == "query_alerts":
                self._add_alerts(inv, result, seen_alerts)
            elif tool == "lookup_knowledge":
                self.knowledge += [KnowledgeChunk(inv, i, str(raw.get("title", "")), str(raw.get("path", "")),
                                                  raw["content"], str(raw.get("source_type", "runbook")))
                                   for i, raw in enumerate(result.get("results") or [])
                                   if isinstance(raw, Mapping) and isinstance(raw.get("content"), str)]
        pair_limits(self.series)
        self.profiles: dict[str, Profile] = {}
        self._build_profiles()

    def _add_alerts(self, inv: str, result: Mapping[str, Any], seen: set) -> None:
        for k, raw in enumerate(result.get("alerts") or []):
            if not isinstance(raw, Mapping):
                continue
            labels = {str(a): str(b) for a, b in (raw.get("labels") or {}).items()}
            notes = raw.get("annotations") or {}
            summary = notes.get("summary")
            key = (labels.get("alertname"), labels.get("service"), summary)
            if key in seen or not isinstance(summary, str) or _suspicious(summary):
                continue
            seen.add(key)
            self.alerts.append(Alert(inv, k, labels, summary, str(notes.get("description", "")),
                                     str(raw.get("state", "firing")), str(raw.get("activeAt", ""))))

    def _add_kubernetes(self, inv: str, result: Mapping[str, Any], seen: set) -> None:
        """Events and container states as lines; the names of the cluster's Services as services it declares."""
        self.lines += kubernetes_lines(inv, result, seen)
        self.declared.update(dict.fromkeys(str(s["name"]) for s in result.get("services") or ()
                                           if isinstance(s, Mapping) and isinstance(s.get("name"), str)))

    def _add_series(self, inv: str, result: Mapping[str, Any], seen: set) -> None:
        for i, raw in enumerate(result.get("series") or []):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("description"), str):
                continue
            labels = {str(a): str(b) for a, b in (raw.get("labels") or {}).items()}
            key = tuple(sorted(labels.items()))
            if key in seen:
                continue
            seen.add(key)
            points = []
            for pair in raw.get("values") or []:
                try:
                    t, v = float(pair[0]), float(pair[1])
                except (TypeError, ValueError, IndexError):
                    continue
                if math.isfinite(v):
                    points.append((t, v))
            if points:
                self.series.append(_analyse_series(Series(inv, i, labels, points, raw["description"])))

    def _build_profiles(self) -> None:
        for line in self.lines:
            self.profile(line.service).lines.append(line)
        for series in self.series:
            self.profile(series.service).series.append(series)
        for alert in self.alerts:
            if alert.service:
                self.profile(alert.service).alerts.append(alert)
        for profile in self.profiles.values():
            _analyse_profile(profile, self.symptom.slow_threshold_s)

    def profile(self, service: str) -> Profile:
        if service not in self.profiles:
            self.profiles[service] = Profile(service)
        return self.profiles[service]

    def has(self, service: str) -> bool:
        profile = self.profiles.get(service)
        return bool(profile and (profile.lines or profile.series))

    def alerting_services(self, question: str) -> list[str]:
        """Firing services: those whose name shares a word with the question first, then those the runbooks
        retrieved for the question name (a Chinese question names no ASCII service), then by severity and age."""
        words = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", question or "")}
        retrieved = " ".join(f"{c.title} {c.content}" for c in self.knowledge)
        ranked = sorted((a for a in self.alerts if a.state == "firing" and a.service),
                        key=lambda a: (-len(words & set(a.service.lower().split("-"))), -retrieved.count(a.service),
                                       a.priority))
        return list(dict.fromkeys(a.service for a in ranked))

    def services_named_in(self, question: str) -> list[str]:
        """The services this run's evidence knows (alerts, logs, series, hosts its errors name, the cluster's
        Services) that the question names as a whole word, in the question's order: a name without a hyphen
        ("checkout", "payments") is read only when the evidence has a service of that name, never guessed from
        the wording."""
        text = question or ""
        found = []
        # The services the evidence knows: its own records' services, the Services the cluster declares, and the
        # hosts their warnings and errors name.
        known = dict.fromkeys(self.profiles) | self.declared
        for line in self.lines:
            if line.level in ("WARN", "WARNING", "ERROR", "FATAL", "CRITICAL"):
                known.update(dict.fromkeys(lead.service for lead in leads_in(line.message, line.service)))
        for name in known:
            if len(name) >= 3 and not name.startswith("node:"):
                match = re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE)
                if match:
                    found.append((match.start(), name))
        return [name for _at, name in sorted(found)]
