"""The JSON contract every tool Lambda answers with.

A tool never raises for a business outcome: it returns a ``ToolResponse`` with
``ok`` and either ``resultado`` + ``dados`` or ``erro``. An exception escaping a
handler is a *crash* (Lambda reports ``FunctionError``), which the orchestrator
treats differently from a typed refusal. ``mensagem`` texts are Portuguese: the
model may relay them to the customer.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ErrorCode(StrEnum):
    INVALID_INPUT = "entrada_invalida"
    ORDER_NOT_FOUND = "pedido_nao_encontrado"  # unknown OR someone else's: same error, reveals nothing
    CUSTOMER_NOT_FOUND = "cliente_nao_encontrado"
    AMOUNT_EXCEEDS_BALANCE = "valor_excede_saldo"
    GATEWAY_UNAVAILABLE = "gateway_indisponivel"  # nothing was debited; a later attempt may succeed
    SEAL_REFUSED = "selo_recusado"  # the call's SEAL envelope was refused at the edge (detalhes.codigo)
    TOOL_STOPPED = "ferramenta_desligada"  # a supervisor stopped this tool; the edge ran nothing of it


class ToolError(Exception):
    """A typed refusal: becomes ``{"ok": false, "erro": {...}}``, never a crash."""

    def __init__(self, code: ErrorCode, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details or {}


class ErrorBody(BaseModel):
    codigo: ErrorCode
    mensagem: str
    detalhes: dict[str, Any] = Field(default_factory=dict)


class ToolResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    ferramenta: str
    ok: bool
    resultado: str | None = None
    dados: dict[str, Any] | None = None
    erro: ErrorBody | None = None

    @classmethod
    def success(cls, tool: str, outcome: str, data: dict[str, Any]) -> ToolResponse:
        return cls(ferramenta=tool, ok=True, resultado=outcome, dados=data)

    @classmethod
    def failure(cls, tool: str, error: ToolError) -> ToolResponse:
        return cls(
            ferramenta=tool,
            ok=False,
            erro=ErrorBody(codigo=error.code, mensagem=error.message, detalhes=error.details),
        )

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)
