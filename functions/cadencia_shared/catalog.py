"""The three tools, in one table: the names the model sees, their Lambdas, their
database users and their handlers. The CDK stack, the orchestrator and the local
stack all read this, so a tool is renamed in exactly one place."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class ApprovalPolicy:
    """When a call of an irreversible tool needs a person's approval (issue 10).

    Decided by code and configuration, never by the model: a call needs approval
    when ``amount_field`` is above the threshold (``APROVACAO_LIMITE_REAIS``,
    default ``default_threshold``) or, with ``second_refund``, when the order was
    already (partly) refunded by someone else. The orchestrator's confirmation
    gate (orchestrator/approval_gate.py) applies it."""

    amount_field: str = "valor"
    default_threshold: Decimal = Decimal("500")
    second_refund: bool = True


@dataclass(frozen=True)
class ToolSpec:
    name: str  # the tool name the model sees
    function_name: str  # the Lambda (Lab 87's names)
    db_user: str  # the PostgreSQL user the Lambda logs in as
    package: str  # the Python package under functions/
    # The Lambda's timeout, and so the orchestrator's per-call time budget: a call is
    # not started with less time left than this, since one cut short by the
    # orchestrator's own deadline would leave an unknown outcome. infra/stack.py's
    # TOOL_TIMEOUTS_S must equal it (tests/infra/test_tool_timeouts.py) until infra reads it here.
    timeout_s: int
    irreversible: bool = False
    subject_field: str | None = "pedidoId"  # which input field scopes the retry ceiling
    approval: ApprovalPolicy | None = None  # None: the confirmation gate lets every call through

    @property
    def handler(self) -> str:
        return f"{self.package}.handler.lambda_handler"


CONSULTAR_STATUS_PEDIDO = ToolSpec(
    name="consultar_status_pedido",
    function_name="cadencia-consultar-status-pedido",
    db_user="cadencia_agente_consulta",
    package="consultar_status_pedido",
    timeout_s=5,
)
EMITIR_REEMBOLSO = ToolSpec(
    name="emitir_reembolso",
    function_name="cadencia-emitir-reembolso",
    db_user="cadencia_agente_reembolso",
    package="emitir_reembolso",
    timeout_s=8,
    irreversible=True,
    approval=ApprovalPolicy(),
)
ATUALIZAR_CADASTRO = ToolSpec(
    name="atualizar_cadastro",
    function_name="cadencia-atualizar-cadastro",
    db_user="cadencia_agente_cadastro",
    package="atualizar_cadastro",
    timeout_s=5,
    subject_field=None,  # no order: the ceiling is scoped to the customer record
)

TOOLS: dict[str, ToolSpec] = {t.name: t for t in (CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO, ATUALIZAR_CADASTRO)}

# The scheduled reconciler of refunds (not a tool: the model never sees it).
RECONCILER_FUNCTION_NAME = "cadencia-conciliar-reembolsos"
RECONCILER_DB_USER = "cadencia_agente_conciliacao"
RECONCILER_PACKAGE = "conciliar_reembolsos"
# The WhatsApp channel's identity lookup (not a tool either).
WHATSAPP_DB_USER = "cadencia_canal_whatsapp"
CHANNEL_DB_USERS = (WHATSAPP_DB_USER,)
# Every PostgreSQL user the agent's Lambdas log in as (one per Lambda).
DB_USERS: tuple[str, ...] = (*(t.db_user for t in TOOLS.values()), RECONCILER_DB_USER, *CHANNEL_DB_USERS)

# The approval decisions Lambda (not a tool: operators invoke it, scripts/aprovar.py).
DECISION_FUNCTION_NAME = "cadencia-decidir-aprovacao"
DECISION_PACKAGE = "decidir_aprovacao"

ORCHESTRATOR_FUNCTION_NAME = "cadencia-orquestrador"
# Hand-offs and approval requests (issue 10): the stack's own bus, and the queue its
# default rule delivers them to (a helpdesk may add rules of its own).
HANDOFF_BUS_NAME = "cadencia-agente"
HANDOFF_QUEUE_NAME = "cadencia-encaminhamentos"
HANDOFF_EVENT_SOURCE = "cadencia.agente"
LEDGER_TABLE = "cadencia-agente-execucoes"
GATEWAY_SECRET_NAME = "cadencia/gateway-pagamento"
DATABASE_NAME = "cadencia"
