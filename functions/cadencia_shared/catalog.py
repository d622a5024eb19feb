"""The three tools, in one table: the names the model sees, their Lambdas, their
database users and their handlers. The CDK stack, the orchestrator and the local
stack all read this, so a tool is renamed in exactly one place."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolSpec:
    name: str  # the tool name the model sees
    function_name: str  # the Lambda (Lab 87's names)
    db_user: str  # the PostgreSQL user the Lambda logs in as
    package: str  # the Python package under functions/
    irreversible: bool = False
    subject_field: str | None = "pedidoId"  # which input field scopes the retry ceiling

    @property
    def handler(self) -> str:
        return f"{self.package}.handler.lambda_handler"


CONSULTAR_STATUS_PEDIDO = ToolSpec(
    name="consultar_status_pedido",
    function_name="cadencia-consultar-status-pedido",
    db_user="cadencia_agente_consulta",
    package="consultar_status_pedido",
)
EMITIR_REEMBOLSO = ToolSpec(
    name="emitir_reembolso",
    function_name="cadencia-emitir-reembolso",
    db_user="cadencia_agente_reembolso",
    package="emitir_reembolso",
    irreversible=True,
)
ATUALIZAR_CADASTRO = ToolSpec(
    name="atualizar_cadastro",
    function_name="cadencia-atualizar-cadastro",
    db_user="cadencia_agente_cadastro",
    package="atualizar_cadastro",
    subject_field=None,  # no order: the ceiling is scoped to the customer record
)

TOOLS: dict[str, ToolSpec] = {t.name: t for t in (CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO, ATUALIZAR_CADASTRO)}

# Database users that are not tools: the WhatsApp channel's identity lookup.
WHATSAPP_DB_USER = "cadencia_canal_whatsapp"
CHANNEL_DB_USERS = (WHATSAPP_DB_USER,)
DB_USERS = (*(t.db_user for t in TOOLS.values()), *CHANNEL_DB_USERS)

ORCHESTRATOR_FUNCTION_NAME = "cadencia-orquestrador"
LEDGER_TABLE = "cadencia-agente-execucoes"
GATEWAY_SECRET_NAME = "cadencia/gateway-pagamento"
DATABASE_NAME = "cadencia"
