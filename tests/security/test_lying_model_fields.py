"""Every string field of every API response, enumerated from the OpenAPI schema, keeps its contract
(docs/TRUST.md) against a lying model, and no console page makes a planted token active.

The lying model (the scripted OpenAI-compatible server) plays every attack of `test_lying_model`; each
plants a unique token, wrapped in live markup, where the model controls text. A field's contract says
where such a token may appear:

- ``audit``: the verbatim record of what the model and the tools did (trace steps, tool invocations,
  self-evaluation): it may, and the console shows it escaped;
- ``labelled``: advice shown under "not checked against evidence": it may, as inert Markdown;
- ``answer``: only inside the answer's labelled suggestions section;
- everything else, and **every field the schema gains later**, is held to ``verified``: an
  unverified token may never appear there.

The fields are read from ``/api/schema``, so a field added to any response is checked without a new test.
"""

from __future__ import annotations

import json
import re
import zlib

import pytest
from markdown_it import MarkdownIt
from rest_framework.test import APIClient

from diagnosis import i18n
from diagnosis.answer_render import SUGGESTIONS_HEADING
from diagnosis.selectors import run_events_after
from diagnosis.services.execution import run_execute
from tests.security.test_lying_model import ATTACKS, QUESTION, assert_nowhere, attack_scripts, play
from tests.support.html_checks import active_markup

pytestmark = pytest.mark.django_db

# Longest dotted prefix wins; "[]" stands for any list item. Mirrors the field table of docs/TRUST.md.
CONTRACTS = {
    "RunOutput.suggestions": "labelled",
    "RunOutput.advice": "labelled",
    "RunOutput.answer": "answer",
    "RunListOutput.results[].answer": "answer",
    "TraceOutput.run.answer": "answer",
    "TraceOutput.run.selfEvaluation": "audit",
    "TraceOutput.run.orchestrationTrace": "audit",
    "TraceOutput.run.replayOptions": "audit",
    "TraceOutput.steps": "audit",
    "TraceOutput.toolInvocations": "audit",
}
SUGGESTION_HEADINGS = tuple(i18n.text(SUGGESTIONS_HEADING, language) for language in ("en", "zh"))
PERMISSIVE = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])  # raw HTML on


def hostile(token: str) -> str:
    return token  # the attacks plant the bare token; `test_hostile_rendering` covers markup in every renderer


def contract_of(path: str) -> str:
    best, found = "", "verified"
    for prefix, contract in CONTRACTS.items():
        if (path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")) and len(prefix) > len(best):
            best, found = prefix, contract
    return found


def schema() -> dict:
    return APIClient().get("/api/schema", HTTP_ACCEPT="application/json").json()


def _resolve(node: dict, components: dict) -> dict:
    while isinstance(node, dict) and ("$ref" in node or "allOf" in node):
        node = components[node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node["allOf"][0]
    return node if isinstance(node, dict) else {}


def string_fields(node: dict, components: dict, path: str, seen=()) -> list[str]:
    """The dotted paths of every string field under `node` (free-form JSON counts as one field)."""
    node = _resolve(node, components)
    if node.get("type") == "array":
        return string_fields(node.get("items") or {}, components, f"{path}[]", seen)
    props = node.get("properties")
    if props:
        return [p for name, sub in props.items() for p in string_fields(sub, components, f"{path}.{name}", seen)]
    if node.get("type") in ("string", None, "object"):
        return [path]
    return []


def response_components(api_schema: dict) -> list[str]:
    names = set()
    for ops in api_schema["paths"].values():
        for op in ops.values():
            for response in (op.get("responses") or {}).values():
                ref = ((response.get("content") or {}).get("application/json") or {}).get("schema", {}).get("$ref")
                if ref:
                    names.add(ref.rsplit("/", 1)[1])
    return sorted(names)


def leaks(value, node: dict, components: dict, path: str, token: str) -> list[str]:
    """Every place in a response where `token` sits against its field's contract."""
    node = _resolve(node, components)
    if isinstance(value, dict):
        props = node.get("properties") or {}
        return [p for k, v in value.items()
                for p in leaks(v, props.get(k, {}), components, f"{path}.{k}", token)] if props else \
            _leaf(json.dumps(value, ensure_ascii=False), path, token)
    if isinstance(value, list):
        items = node.get("items") or {}
        return [p for v in value for p in leaks(v, items, components, f"{path}[]", token)]
    return _leaf(value, path, token) if isinstance(value, str) else []


def _leaf(text: str, path: str, token: str) -> list[str]:
    if token not in text:
        return []
    contract = contract_of(path)
    if contract == "audit":
        return []
    if contract == "labelled":
        return [f"{path}: live markup"] if active_markup(PERMISSIVE.render(text)) else []
    if contract == "answer":
        body = text
        for heading in SUGGESTION_HEADINGS:
            body = body.split(heading)[0]
        return [f"{path}: outside the labelled suggestions"] if token in body else []
    return [f"{path}: {contract}"]


def test_the_schema_enumerates_the_reader_facing_fields():
    api = schema()
    components = api["components"]["schemas"]
    fields = {f for name in response_components(api) for f in string_fields(components[name], components, name)}
    # The control: the fields this suite must hold to their contracts are enumerated from the schema.
    assert {"RunOutput.answer", "RunOutput.suggestions[]", "RunOutput.diagnosis.rootCause.service",
            "RunOutput.diagnosis.rootCause.summary", "RunOutput.diagnosis.symptoms[].summary",
            "RunOutput.advice[].text", "TraceOutput.run.diagnosis.rootCause.cause",
            "TraceOutput.toolInvocations[].toolName", "RunListOutput.results[].answer",
            # The localiser's ranking: service names from tool output, held to "verified" like rootCause.service.
            "RunOutput.diagnosis.candidates[].service", "RunOutput.diagnosis.candidates[].explainedBy",
            "RunOutput.diagnosis.candidates[].explains[]", "RunOutput.diagnosis.candidates[].evidence[].rawPath",
            "RunOutput.diagnosis.localisation.subject[]", "RunOutput.diagnosis.agreement",
            "TraceOutput.run.diagnosis.candidates[].kind"} <= fields
    assert contract_of("RunOutput.diagnosis.rootCause.service") == "verified"
    assert contract_of("RunOutput.diagnosis.candidates[].service") == "verified"  # a field added later: strictest
    assert contract_of("TraceOutput.run.diagnosis.localisation.withoutData[]") == "verified"


def _responses(run) -> list[tuple[str, object]]:
    client = APIClient()
    client.force_authenticate(run.session.owner)
    session = run.session.session_id
    bodies = [("RunOutput", client.get(f"/api/runs/{run.run_id}")),
              ("TraceOutput", client.get(f"/api/diagnosis/{session}/trace?runId={run.run_id}")),
              ("RunListOutput", client.get(f"/api/diagnosis/{session}/runs"))]
    for name, response in bodies:
        assert response.status_code == 200, (name, response.content[:300])
    return [(name, response.json()) for name, response in bodies]


@pytest.mark.parametrize("attack", ATTACKS)
def test_every_schema_field_keeps_its_contract_against_a_lying_model(attack, openai_llm, demo_knowledge, make_run,
                                                                      client, support_user):
    token = f"FLD{zlib.crc32(attack.encode()):010d}X"
    play(openai_llm, attack_scripts(token)[attack])
    run = run_execute(run_id=make_run(QUESTION).run_id)
    assert_nowhere(token, run)
    api = schema()
    components = api["components"]["schemas"]
    found = [p for name, body in _responses(run) for p in leaks(body, components[name], components, name, token)]
    # The progress stream: names from closed sets only, so no planted token at all.
    found += [f"events.{e.kind}" for e in run_events_after(run_pk=run.pk, after=0, limit=1000) if token in json.dumps(e.data)]
    # The console: the answer section never carries it, and nothing on the page is an element or attribute of it.
    support_user.is_superuser = True
    support_user.save()
    client.force_login(support_user)
    page = client.get(f"/admin/diagnosis/diagnosisrun/{run.pk}/change/").content.decode()
    answer = re.search(r'<section[^>]*id="answer".*?</section>', page, re.S)
    if answer and token in answer.group(0):
        found.append("console: answer section")
    found += [f"console: {p}" for p in _live_token(page, token)]
    assert found == [], f"{attack}: {found}"


ACTIVE_ATTRIBUTES = frozenset({"href", "src", "srcset", "action", "formaction", "style", "xlink:href", "data",
                               "poster", "background", "ping", "content", "http-equiv"})


def _live_token(page: str, token: str) -> list[str]:
    import html5lib

    document = html5lib.parse(page, treebuilder="etree", namespaceHTMLElements=False)
    live = []
    for element in document.iter():
        tag = element.tag if isinstance(element.tag, str) else ""
        if token.lower() in tag.lower():
            live.append(f"element {tag}")
        # Escaped text in an inert attribute (title, data-*) is text; in one that runs or loads, it is live.
        live += [f"attribute {k} of <{tag}>" for k, v in element.attrib.items()
                 if token in k or (token in v and (k.startswith("on") or k in ACTIVE_ATTRIBUTES))]
    return live


# --------------------------------------------------------------------------- tokens in every tool field

TOOL_TOKEN = "TOOLTOK7731"
MARKUP = f"<img src=x onerror=alert('{TOOL_TOKEN}')> [x](http://evil.example/{TOOL_TOKEN}) ![p](http://evil.example/{TOOL_TOKEN}.png)"


class HostileTelemetry:
    """A backend whose every string field carries the tool token inside live markup."""

    def query_logs(self, **args):
        records = [{"timestamp": "2026-12-01T10:00:0%dZ" % i, "service": f"{TOOL_TOKEN}<b>svc</b>", "level": "ERROR",
                    "message": f"pool exhausted {MARKUP} line {i}"} for i in range(3)]
        return {"backend": "hostile", "records": records, "total": 3, "truncated": False}

    def query_metrics(self, **args):
        return {"backend": "hostile", "series": [{"labels": {"__name__": f"m_{TOOL_TOKEN}", "service": MARKUP},
                                                  "values": [[1764410400, "1"]], "description": MARKUP}]}

    def query_alerts(self):
        return {"backend": "hostile", "alerts": [{"labels": {"alertname": MARKUP, "service": MARKUP, "severity": MARKUP},
                                                  "annotations": {"summary": MARKUP}, "state": "firing",
                                                  "activeAt": "2026-12-01T10:00:00Z"}]}

    def query_kubernetes(self, **args):
        return {"backend": "hostile", "pods": [], "events": [{"type": "Warning", "reason": MARKUP, "message": MARKUP}]}


def test_tool_fields_stay_inert_in_every_field_and_page(openai_llm, demo_knowledge, make_run, client, support_user):
    from diagnosis.services import wiring
    from tests.diagnosis.conftest import tool_outputs
    from tests.security.test_lying_model import Script, evidence
    from tests.support.fake_openai import Reply

    def executor(request):
        logs = next(o for o in tool_outputs(request) if o["tool"] == "query_logs")
        message = logs["result"]["records"][0]["message"]
        return evidence({"claim_id": "c1", "statement": "payment-service cannot get connections.",
                         "evidence": [{"source_invocation_id": logs["invocation_id"], "tool_name": "query_logs",
                                       "raw_path": "$.records[0].message", "evidence_excerpt": message}]})

    play(openai_llm, Script(executor=executor))
    with wiring.telemetry_override(HostileTelemetry()):
        run = run_execute(run_id=make_run(QUESTION).run_id)
    run.refresh_from_db()
    assert run.status == "SUCCESS" and TOOL_TOKEN in run.answer  # the control: the quoted excerpt is served
    assert active_markup(PERMISSIVE.render(run.answer)) == []
    assert run.diagnosis["rootCause"]["service"] is None  # a label that is no service name is never one
    assert "candidates" in run.diagnosis and TOOL_TOKEN not in json.dumps(run.diagnosis["candidates"])  # nor a candidate
    for name, body in _responses(run):
        for path in _token_paths(body, name):
            contract = contract_of(path)
            assert contract in ("audit", "answer", "labelled") or path.endswith((".summary", ".text")), path
    assert not any(TOOL_TOKEN in json.dumps(e.data) for e in run_events_after(run_pk=run.pk, after=0, limit=1000))
    support_user.is_superuser = True
    support_user.save()
    client.force_login(support_user)
    page = client.get(f"/admin/diagnosis/diagnosisrun/{run.pk}/change/").content.decode()
    assert TOOL_TOKEN in page and _live_token(page, TOOL_TOKEN) == []


def _token_paths(value, path: str) -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _token_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for v in value for p in _token_paths(v, f"{path}[]")]
    return [path] if isinstance(value, str) and TOOL_TOKEN in value else []


def test_alert_labels_and_a_model_chosen_task_service_stay_inert(openai_llm, demo_knowledge, client, support_user):
    """An alert analysis whose alert labels and whose planner-chosen task service carry live markup."""
    from diagnosis.services.aiops import aiops_submit
    from diagnosis.services.execution import run_execute
    from tests.support.fake_openai import Reply

    labels = {"alertname": f"X{TOOL_TOKEN}<img src=x onerror=alert(1)>", "service": f"<svg onload=alert(1)>{TOOL_TOKEN}",
              "severity": "critical|<b>x</b>"}
    openai_llm.enqueue(Reply.json({"decision": "PLAN", "plan": [{"task_id": "t1", "alert_ids": ["a1"], "goal": "look",
                                                                 "service": f"![i](http://evil.example/{TOOL_TOKEN}.png)"}]}),
                       Reply.json({"decision": "EXECUTE", "task_id": "t1"}),
                       Reply.json({"status": "COMPLETED", "summary": "s", "evidence": [], "nextHint": ""}),
                       Reply.json({"decision": "FINISH"}), role="aiops")
    openai_llm.always(Reply.json({"status": "FINISH", "report_markdown": f"Check [here](http://evil.example/{TOOL_TOKEN})"}),
                      role="aiops")
    submission = aiops_submit(user=support_user, payload={"alerts": [{"labels": labels, "state": "firing"}]})
    run = run_execute(run_id=submission.run.run_id)
    run.refresh_from_db()
    assert run.status == "SUCCESS" and TOOL_TOKEN in run.answer
    assert f"evil.example/{TOOL_TOKEN}.png" in run.answer  # the control: the task heading is in the report
    for markdown in [run.answer]:
        assert active_markup(PERMISSIVE.render(markdown)) == [], markdown
    support_user.is_superuser = True
    support_user.save()
    client.force_login(support_user)
    page = client.get(f"/admin/diagnosis/diagnosisrun/{run.pk}/change/").content.decode()
    assert _live_token(page, TOOL_TOKEN) == []


def test_no_console_page_makes_a_planted_token_active(openai_llm, demo_knowledge, make_run, client, support_user):
    """Every console page reachable from the admin index (every list, and the change page of every row
    listed), after a run with a token in every tool field, a lying composer and an invented tool name."""
    from diagnosis.services import wiring
    from diagnosis.services.feedback import run_feedback_give
    from tests.security.test_lying_model import Script, evidence
    from tests.support.fake_openai import Reply

    token = "PAGETOK5519"

    def executor(request):
        from tests.diagnosis.conftest import tool_outputs

        logs = next(o for o in tool_outputs(request) if o["tool"] == "query_logs")
        message = logs["result"]["records"][0]["message"]
        return evidence({"claim_id": "c1", "statement": f"payment-service <img src=x onerror=alert(1)> {TOOL_TOKEN}.",
                         "evidence": [{"source_invocation_id": logs["invocation_id"], "tool_name": "query_logs",
                                       "raw_path": "$.records[0].message", "evidence_excerpt": message}]})

    composer = lambda r: Reply.json({"version": "answer_plan_v1", "root_cause": ["c1"],  # noqa: E731
                                     "next_steps": [{"text": f"<svg onload=alert(1)>{token} [x](http://evil.example/{token})"}],
                                     "diagnosis": {"outcome": "root_cause", "service": f"<b>{token}</b>", "cause": token}})
    play(openai_llm, Script(executor=executor, composer=composer))
    with wiring.telemetry_override(HostileTelemetry()):
        run = run_execute(run_id=make_run(QUESTION).run_id)
    run.refresh_from_db()
    assert run.status == "SUCCESS"
    run_feedback_give(user=run.session.owner, run=run, feedback="useful", comment=f"<img src=x onerror=alert(1)>{token}")
    support_user.is_superuser = True
    support_user.save()
    client.force_login(support_user)
    index = client.get("/admin/").content.decode()
    lists = sorted(set(re.findall(r'href="(/admin/[a-z_]+/[a-z_]+/)"', index)))
    assert any("diagnosisrun" in url for url in lists)
    pages, live, seen = list(lists), [], set()
    for url in lists:
        body = client.get(url).content.decode()
        pages += sorted(set(re.findall(rf'href="({re.escape(url)}\d+/change/)"', body)))[:3]
    for url in dict.fromkeys(pages):
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        seen |= {t for t in (token, TOOL_TOKEN) if t in body}
        live += [f"{url}: {p}" for t in (token, TOOL_TOKEN) for p in _live_token(body, t)]
        live += [f"{url}: active markup" for t in (token, TOOL_TOKEN)
                 if re.search(rf"<(img|svg|script|iframe)[^>]*{t}|{t}[^<]*</(?:script|svg)>", body)]
    assert len(pages) > len(lists) and seen == {token, TOOL_TOKEN}  # the control: both reach pages, as text
    assert live == []
