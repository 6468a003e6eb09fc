"""The typed output contract of every model role, and the JSON Schema sent to the server from it.

One pydantic model per JSON output (framework-free: pydantic comes with `openai`). The schema sent
as ``response_format: {"type": "json_schema", ...}`` is generated from these models, so a server
that enforces it (OpenAI, llama.cpp, vLLM, Ollama) can only produce output of the right shape;
`validate_output` checks the same models locally whatever the server did. The node validators in
``diagnosis.agents`` then apply the product rules (allowed tools, verified ids, limits).

Local validation is deliberately as lenient as the node validators: optional fields have
defaults, unknown keys are ignored, and size limits (``maxItems``) are written only into the wire
schema (to bound what a grammar-constrained server generates), never enforced here.

`strict` is sent as false: plan steps and suggested queries carry free-form tool arguments, which
OpenAI's strict mode cannot express. Servers that compile the schema into a grammar (llama.cpp,
vLLM, Ollama) enforce it regardless of `strict`.
"""
from __future__ import annotations

import copy
import json
from typing import Any, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from diagnosis.contracts import EXECUTOR_EVIDENCE_VERSION, EXECUTOR_SUMMARY_CHARS
from diagnosis.structured_diagnosis import CAUSE_KIND_IDS, CLAIM_ID_PATTERN

from .base import ModelInvalidOutputError

SCHEMA_VERSION = "v1"


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _max(n: int) -> dict[str, Any]:
    return {"maxItems": n}


def _text(n: int, *, required: bool = False) -> Any:
    """A string bounded on the wire only (a grammar stops there); the node validators truncate."""
    return Field(json_schema_extra={"maxLength": n}) if required else Field(default="", json_schema_extra={"maxLength": n})


# --- diagnosis flow -------------------------------------------------------------------------------


class PlanStep(_Out):
    tool: str = _text(64, required=True)
    arguments: dict[str, Any] = Field(default_factory=dict)
    purpose: str = _text(160)


class PlannerPlan(_Out):
    version: Literal["planner_plan_v1"] = "planner_plan_v1"
    goal: str = _text(240)
    services: list[str] = Field(default_factory=list, json_schema_extra=_max(5))
    language: Optional[Literal["en", "zh"]] = None
    # At most 5 steps on the wire: a grammar-constrained small model fills every bound it is given, and
    # must still close the JSON within max_tokens (the node validator accepts up to 12 from any model).
    steps: list[PlanStep] = Field(json_schema_extra={**_max(5), "minItems": 1})


class EvidenceBinding(_Out):
    source_invocation_id: str = _text(32, required=True)
    tool_name: str = _text(64, required=True)
    raw_path: str = _text(200, required=True)
    evidence_excerpt: str = _text(400, required=True)


# The wire schema of the executor's answer. The shape is owned by diagnosis.contracts (`ExecutorEvidence`,
# `EvidenceClaim`: the version, the fields, the parse where it enters the graph); these classes only add
# what a server needs to constrain its output (types, wire bounds), with the same fields
# (tests/architecture/test_single_owners.py compares them). The name sent to the server stays the shape's.
class EvidenceClaimSchema(_Out):
    WIRE_NAME: ClassVar[str] = "EvidenceClaim"
    claim_id: str = _text(32, required=True)
    statement: str = _text(500)
    evidence: list[EvidenceBinding] = Field(json_schema_extra=_max(8))


class ExecutorEvidenceSchema(_Out):
    WIRE_NAME: ClassVar[str] = "ExecutorEvidence"
    version: Literal[EXECUTOR_EVIDENCE_VERSION]  # type: ignore[valid-type] (a constant str)
    summary: str = _text(EXECUTOR_SUMMARY_CHARS)
    claims: list[EvidenceClaimSchema] = Field(json_schema_extra=_max(20))
    open_questions: list[str] = Field(default_factory=list, json_schema_extra=_max(10))


class EvidenceRef(_Out):
    claim_id: str = ""
    source_invocation_id: str = ""
    tool_name: str = ""
    raw_path: str = ""


class ClaimCheck(_Out):
    claim_id: str = _text(32, required=True)
    supported: Optional[bool] = None
    rationale: str = _text(500)
    evidence_refs: list[EvidenceRef] = Field(default_factory=list, json_schema_extra=_max(8))


class FactCheck(_Out):
    fact: str = _text(300)
    consistent: Optional[bool] = None


class SuggestedQuery(_Out):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class EvidenceGap(_Out):
    gap: str = _text(300, required=True)
    suggested_query: Optional[SuggestedQuery] = None


class VerifierVerdict(_Out):
    verdict: Literal["PASS", "LOW_CONFID", "REJECT"]
    score: Optional[float] = Field(default=None, json_schema_extra={"minimum": 0.0, "maximum": 1.0})
    claim_checks: list[ClaimCheck] = Field(default_factory=list, json_schema_extra=_max(10))
    fact_checks: list[FactCheck] = Field(default_factory=list, json_schema_extra=_max(5))
    critical_evidence_gaps: list[EvidenceGap] = Field(default_factory=list, json_schema_extra=_max(3))
    rationale: str = _text(400)


# The composer's output contract: an ``answer_plan_v1`` naming which verified claims go in which
# section, plus next steps (a claim id or plain advice). The server renders the answer from it
# (``diagnosis/answer_render.py``); the composer never writes Markdown.
class NextStep(_Out):
    claim_id: Optional[str] = _text(80)
    text: Optional[str] = _text(400)


# The structured diagnosis as a choice among ids the server offers (diagnosis/structured_diagnosis.py): the
# outcome, a cause-kind id of the payload's ``cause_kinds``, a service among the payload's ``claim_services``
# of the root claims, and the claim ids of the symptoms. The server reads the onset and the summaries from
# the cited records itself; any other value is dropped.
class DiagnosisChoice(_Out):
    outcome: Optional[Literal["root_cause", "nothing_wrong", "undetermined"]] = None
    cause: Optional[str] = Field(default=None, json_schema_extra={"enum": [*CAUSE_KIND_IDS, None]})
    service: Optional[str] = _text(128)
    symptoms: list[str] = Field(default_factory=list, json_schema_extra={**_max(12), "items": {
        "type": "string", "pattern": CLAIM_ID_PATTERN}})


class ComposerAnswer(_Out):
    version: Literal["answer_plan_v1"] = "answer_plan_v1"
    root_cause: list[str] = Field(default_factory=list, json_schema_extra=_max(12))
    evidence: list[str] = Field(default_factory=list, json_schema_extra=_max(12))
    impact: list[str] = Field(default_factory=list, json_schema_extra=_max(12))
    timeline: list[str] = Field(default_factory=list, json_schema_extra=_max(12))
    next_steps: list[Union[NextStep, str]] = Field(default_factory=list, json_schema_extra=_max(12))
    diagnosis: Optional[DiagnosisChoice] = None


# --- alert analysis (AI_OPS) ----------------------------------------------------------------------


class AlertTask(_Out):
    task_id: Optional[str] = None
    service: str = _text(128, required=True)
    alert_ids: Any = Field(default=None, json_schema_extra={"type": "array", "items": {"type": "string"}, **_max(20)})
    goal: str = _text(300)


def _one_of(*values: str) -> Any:
    """A string field whose allowed values are in the wire schema; the node validator normalises case."""
    return Field(json_schema_extra={"enum": list(values)})


class AiOpsDecision(_Out):
    decision: str = _one_of("PLAN", "EXECUTE", "FINISH")
    rationale: str = _text(500)
    plan: list[AlertTask] = Field(default_factory=list, json_schema_extra=_max(10))
    task_id: Optional[str] = None
    tool_budget: Any = Field(default=None, json_schema_extra={"type": "integer", "minimum": 1})


class AiOpsExecution(_Out):
    status: str = _one_of("COMPLETED", "PARTIAL", "FAILED")
    summary: str = _text(2000)
    evidence: list[EvidenceClaimSchema] = Field(default_factory=list, json_schema_extra=_max(20))
    nextHint: str = _text(500)  # noqa: N815 (the wire name)


class AiOpsReport(_Out):
    status: Literal["FINISH"] = "FINISH"
    report_markdown: str = Field(min_length=1, json_schema_extra={"maxLength": 8000})


# --- registry -------------------------------------------------------------------------------------

# (role, node) -> the contract of that call's final JSON answer. `None` as node: any node of the role.
OUTPUTS: dict[tuple[str, str | None], type[BaseModel]] = {
    ("planner", None): PlannerPlan,
    ("executor", None): ExecutorEvidenceSchema,
    ("verifier", None): VerifierVerdict,
    ("composer", None): ComposerAnswer,
    ("aiops", "aiops_planner"): AiOpsDecision,
    ("aiops", "aiops_executor"): AiOpsExecution,
    ("aiops", "aiops_reporter"): AiOpsReport,
}


def output_model(role: str, node: str | None = None) -> type[BaseModel] | None:
    """The typed contract of a role's JSON answer (at `node`, for roles that play several parts);
    None for free-text roles (simple chat)."""
    return OUTPUTS.get((role, node)) or OUTPUTS.get((role, None))


def schema_name(model: type[BaseModel]) -> str:
    """The name sent with a schema: the shape's own (`WIRE_NAME` where the class is only its wire schema)."""
    return f"{getattr(model, 'WIRE_NAME', model.__name__)}_{SCHEMA_VERSION}"


TOOL_NAME_FIELDS = ("tool", "tool_name")


ARGUMENT_TEXT_LIMIT = 100  # maxLength of a string tool argument in a plan (wire schema only)
TOOL_CALL_TEXT_LIMIT = 256  # maxLength of a string argument in the `tools` sent with a call (wire only)
# The largest maxLength written into a wire schema. llama.cpp compiles `maxLength: n` into an n-fold
# repetition and refuses a grammar whose repetitions exceed its threshold (2000 rules): the executor's
# 2000-character summary and the AI_OPS report's 8000 made it answer HTTP 500 to every such request.
# Longer answers are still accepted locally; the node validators truncate.
WIRE_TEXT_LIMIT = 1000


# Generated schemas by (model, tool names, tool parameters as sorted JSON): pydantic takes about a
# millisecond per schema and every model call asks for one. Few distinct keys exist (one per role and
# tool set); the bound only guards against a caller that varies its tools without end. Each is kept as
# its JSON text: decoding it is the fresh copy a caller gets, several times faster than copying the
# dicts in Python (a schema is plain JSON: str keys, no tuples).
_SCHEMAS: dict[tuple[type[BaseModel], tuple[str, ...], str], str] = {}
_SCHEMAS_MAX = 256


def json_schema(model: type[BaseModel], *, tool_names: list[str] | None = None,
                tool_parameters: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The self-contained JSON Schema of `model` (``$defs`` inlined at the root as pydantic writes them).

    With `tool_names`, every tool-name field may only hold one of them; with `tool_parameters`
    (tool name -> its parameters schema), an object holding ``tool`` and ``arguments`` (a plan step, a
    suggested query) becomes one alternative per tool whose arguments follow that tool's schema.
    Every call returns a fresh copy: a caller may change it without changing the next one's.
    """
    key = (model, tuple(sorted(tool_names or ())),
           json.dumps(tool_parameters, sort_keys=True) if tool_parameters else "")
    text = _SCHEMAS.get(key)
    if text is None:
        text = json.dumps(_generate(model, tool_names=tool_names, tool_parameters=tool_parameters))
        if len(_SCHEMAS) < _SCHEMAS_MAX:
            _SCHEMAS[key] = text
    return json.loads(text)


def _generate(model: type[BaseModel], *, tool_names: list[str] | None,
              tool_parameters: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    schema = model.model_json_schema(mode="validation")
    _tidy(schema)
    _cap_lengths(schema)
    if tool_parameters:
        _per_tool_arguments(schema, tool_parameters)
    if tool_names or tool_parameters:
        _restrict_tools(schema, sorted(tool_names or tool_parameters))
    return schema


def response_format(model: type[BaseModel], *, tool_names: list[str] | None = None,
                    tool_parameters: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``response_format`` value asking the server to enforce `model`'s schema."""
    schema = json_schema(model, tool_names=tool_names, tool_parameters=tool_parameters)
    return {"type": "json_schema", "json_schema": {"name": schema_name(model), "schema": schema, "strict": False}}


def _per_tool_arguments(schema: dict[str, Any], tool_parameters: dict[str, dict[str, Any]]) -> None:
    for name, definition in list((schema.get("$defs") or {}).items()):
        props = definition.get("properties") or {}
        if "tool" not in props or "arguments" not in props:
            continue
        variants = []
        for tool in sorted(tool_parameters):
            arguments = _bounded_strings(copy.deepcopy(tool_parameters[tool]))
            variants.append({**definition, "properties": {**props, "tool": {"const": tool, "type": "string"},
                                                            "arguments": arguments},
                             "required": sorted({*definition.get("required", []), "tool", "arguments"})})
        schema["$defs"][name] = {"anyOf": variants}


def bounded_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `tools` of a request as sent: every free string argument gets a ``maxLength``.

    A server that turns a tool's parameters into a grammar (llama.cpp, llama-cpp-python's
    function-calling formats, vLLM, Ollama) then closes the call's arguments after a bounded number
    of tokens, even when it does not apply ``max_tokens`` to them (llama-cpp-python does not). The
    tool itself still validates its arguments; the caller's tool list is not changed.
    """
    return [_bounded_strings(copy.deepcopy(tool), limit=TOOL_CALL_TEXT_LIMIT) for tool in tools]


def _bounded_strings(node: Any, *, limit: int = ARGUMENT_TEXT_LIMIT) -> Any:
    if isinstance(node, dict):
        if node.get("type") == "string" and "enum" not in node and "maxLength" not in node:
            node["maxLength"] = limit
        for value in node.values():
            _bounded_strings(value, limit=limit)
    elif isinstance(node, list):
        for item in node:
            _bounded_strings(item, limit=limit)
    return node


def _restrict_tools(node: Any, names: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop, spec in value.items():
                    if prop in TOOL_NAME_FIELDS and isinstance(spec, dict) and spec.get("type") == "string" \
                            and "const" not in spec:
                        spec["enum"] = names
                    else:
                        _restrict_tools(spec, names)
            else:
                _restrict_tools(value, names)
    elif isinstance(node, list):
        for item in node:
            _restrict_tools(item, names)


def validate_output(model: type[BaseModel], data: Any) -> BaseModel:
    """Check parsed model JSON against the contract; ModelInvalidOutputError names the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in first.get("loc", ())).replace(".[", "[")
        raise ModelInvalidOutputError(
            f"Model output does not match {schema_name(model)}: '{where or '$'}' {first.get('msg', 'is invalid')}",
            code="model_schema_invalid", field=where or None,
        ) from None


def is_valid(model: type[BaseModel], data: Any) -> bool:
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


def _cap_lengths(node: Any) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("maxLength"), int) and node["maxLength"] > WIRE_TEXT_LIMIT:
            node["maxLength"] = WIRE_TEXT_LIMIT
        for value in node.values():
            _cap_lengths(value)
    elif isinstance(node, list):
        for item in node:
            _cap_lengths(item)


def _tidy(node: Any) -> None:
    """Drop pydantic's cosmetic keys (`title`) that only add tokens to every request."""
    if isinstance(node, dict):
        node.pop("title", None)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop in value.values():
                    _tidy(prop)
            else:
                _tidy(value)
    elif isinstance(node, list):
        for item in node:
            _tidy(item)
