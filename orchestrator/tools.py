"""The tools as the model sees them, and what the code does with what it asks.

Input schemas are strict (``additionalProperties: false``) and never contain
``conversaId`` or ``clienteId``: the orchestrator injects both from the inbound
event, so the model cannot act for another customer or another conversation.
The schemas use only keywords the Messages API accepts for strict tools; the
tool Lambdas' own pydantic models re-validate everything (amount precision,
phone and e-mail formats): the code, not the schema, holds authority.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from cadencia_shared.catalog import ATUALIZAR_CADASTRO, CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO, TOOLS, ToolSpec
from cadencia_shared.ledger import refund_idempotency_key

_ORDER_ID = {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$", "description": "Número do pedido, por exemplo 4821."}

INPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    CONSULTAR_STATUS_PEDIDO.name: {
        "type": "object",
        "properties": {"pedidoId": _ORDER_ID},
        "required": ["pedidoId"],
        "additionalProperties": False,
    },
    EMITIR_REEMBOLSO.name: {
        "type": "object",
        "properties": {
            "pedidoId": _ORDER_ID,
            "valor": {"type": "number", "description": "Valor do reembolso em reais, com até duas casas decimais."},
        },
        "required": ["pedidoId", "valor"],
        "additionalProperties": False,
    },
    ATUALIZAR_CADASTRO.name: {
        "type": "object",
        "properties": {
            "campos": {
                "type": "object",
                "properties": {
                    "endereco": {"type": "string", "description": "Endereço completo."},
                    "telefone": {"type": "string", "description": "Telefone brasileiro em E.164, ex.: +5511987654321."},
                    "email": {"type": "string", "format": "email"},
                },
                "additionalProperties": False,
            }
        },
        "required": ["campos"],
        "additionalProperties": False,
    },
}

DESCRIPTIONS = {
    CONSULTAR_STATUS_PEDIDO.name: "Consulta o status de um pedido do cliente desta conversa (somente leitura).",
    EMITIR_REEMBOLSO.name: (
        "Emite um reembolso de um pedido do cliente desta conversa. IRREVERSÍVEL: movimenta dinheiro. "
        "Um reembolso por pedido por conversa; repetir a chamada não gera um novo reembolso."
    ),
    ATUALIZAR_CADASTRO.name: "Atualiza endereço, telefone e/ou e-mail do cadastro do cliente desta conversa.",
}

_VALIDATORS = {name: Draft202012Validator(schema) for name, schema in INPUT_SCHEMAS.items()}


def definitions(*, strict: bool) -> list[dict[str, Any]]:
    """The ``tools`` parameter of the Messages API."""
    out = []
    for name in TOOLS:
        tool: dict[str, Any] = {"name": name, "description": DESCRIPTIONS[name], "input_schema": INPUT_SCHEMAS[name]}
        if strict:
            tool["strict"] = True
        out.append(tool)
    return out


def validation_errors(tool: str, tool_input: Any) -> list[str]:
    return sorted(
        f"{'/'.join(str(p) for p in e.absolute_path) or '(entrada)'}: {e.message}"
        for e in _VALIDATORS[tool].iter_errors(tool_input)
    )


@dataclass(frozen=True)
class ToolCall:
    """A validated request of the model, scoped for the ledger."""

    spec: ToolSpec
    tool_use_id: str
    arguments: dict[str, Any]
    conversa_id: str
    cliente_id: int

    @property
    def pedido_id(self) -> str | None:
        return self.arguments.get("pedidoId")

    @property
    def subject(self) -> str:
        """What the retry ceiling is counted per: the order, or (for the profile
        tool, which has no order) the customer's record, ``cliente-{id}``."""
        if self.spec.subject_field:
            return str(self.arguments[self.spec.subject_field])
        return f"cliente-{self.cliente_id}"

    @property
    def idempotency_key(self) -> str | None:
        if self.spec is EMITIR_REEMBOLSO:
            return refund_idempotency_key(self.conversa_id, str(self.pedido_id))
        return None

    def event(self) -> dict[str, Any]:
        # Identity comes last: whatever the model sent, these two win.
        return {**self.arguments, "conversaId": self.conversa_id, "clienteId": self.cliente_id}
