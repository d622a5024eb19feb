"""The tools as the model sees them, and what the code does with what it asks.

Each tool's row in the registry (``cadencia_shared.catalog``) names its typed
arguments model (in ``cadencia_shared.models``: the same types the tool Lambdas
validate with) and its description; the input schema the model sees is derived
from that model here, so a pattern or a field exists once. The schema never
contains ``conversaId`` or ``clienteId``: the orchestrator injects both from the inbound event, so the model
cannot act for another customer or another conversation.

The derived schema keeps only keywords the Messages API accepts for strict tools
(type, properties, required, additionalProperties, pattern, format, description);
bounds the API does not enforce (lengths, amount range, cents) are checked here
with the same pydantic models before anything runs, and again by the tool: the
code, not the schema, holds authority.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from cadencia_shared.catalog import TOOLS, ToolSpec
from cadencia_shared.handler import describe
from cadencia_shared.ledger import refund_idempotency_key
from cadencia_shared.models import json_schema_pattern

ARGUMENTS: dict[str, type[BaseModel]] = {name: spec.arguments for name, spec in TOOLS.items()}

_SCHEMA_KEYWORDS = {"type", "properties", "required", "additionalProperties", "pattern", "format", "description"}


def _for_the_model(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """pydantic's JSON schema → what the model sees: ``$ref`` inlined, an optional
    field shown as its type (the model omits it rather than sending null),
    patterns in their JSON Schema spelling, other keywords dropped."""
    if "$ref" in node:
        return _for_the_model(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in node:
        (present,) = [s for s in node["anyOf"] if s.get("type") != "null"]
        return _for_the_model({**present, **{k: v for k, v in node.items() if k == "description"}}, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _SCHEMA_KEYWORDS:
            continue
        if key == "properties":
            value = {name: _for_the_model(sub, defs) for name, sub in value.items()}
        elif key == "pattern":
            value = json_schema_pattern(value)
        out[key] = value
    return out


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    return _for_the_model(schema, schema.get("$defs", {}))


INPUT_SCHEMAS: dict[str, dict[str, Any]] = {name: input_schema(model) for name, model in ARGUMENTS.items()}

def definitions(*, strict: bool) -> list[dict[str, Any]]:
    """The ``tools`` parameter of the Messages API."""
    out = []
    for name, spec in TOOLS.items():
        tool: dict[str, Any] = {"name": name, "description": spec.description, "input_schema": INPUT_SCHEMAS[name]}
        if strict:
            tool["strict"] = True
        out.append(tool)
    return out


def validation_errors(tool: str, tool_input: Any) -> list[str]:
    """What is wrong with the model's arguments (strictly, by the tool's own types)."""
    if not isinstance(tool_input, dict):
        return ["(entrada): deve ser um objeto JSON"]
    try:
        ARGUMENTS[tool].model_validate(tool_input, strict=True)
    except ValidationError as err:
        return describe(err)
    return []


def tool_version(tool: str, release: str) -> str:
    """A tool's version for approvals: its input schema (as the model sees it) and
    the release. A new schema or release names a new version, so approvals given
    for the old one are never found again (they are bound to the version)."""
    material = json.dumps(INPUT_SCHEMAS[tool], sort_keys=True, separators=(",", ":")) + "\x00" + release
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def canonical_input(tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the tool's own types read them (strictly), optional fields
    left out: the form that is hashed, shown to the approver and executed."""
    return ARGUMENTS[tool].model_validate(tool_input, strict=True).model_dump(exclude_none=True)


@dataclass(frozen=True)
class ToolCall:
    """A validated request of the model, scoped for the ledger."""

    spec: ToolSpec
    tool_use_id: str
    arguments: dict[str, Any]
    conversation_id: str
    customer_id: int

    @property
    def order_id(self) -> str | None:
        return self.arguments.get("pedidoId")

    @property
    def subject(self) -> str:
        """What the retry ceiling is counted per: the order, or (for the profile
        tool, which has no order) the customer's record, ``cliente-{id}``."""
        if self.spec.subject_field:
            return str(self.arguments[self.spec.subject_field])
        return f"cliente-{self.customer_id}"

    @property
    def idempotency_key(self) -> str | None:
        """The key an irreversible call is claimed under (one per conversation and
        subject): what the tool's own claim and the confirmation gate agree on."""
        if self.spec.irreversible:
            return refund_idempotency_key(self.conversation_id, self.subject)
        return None

    def event(self) -> dict[str, Any]:
        # Identity comes last: whatever the model sent, these two win.
        return {**self.arguments, "conversaId": self.conversation_id, "clienteId": self.customer_id}
