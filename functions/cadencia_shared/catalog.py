"""The tool registry: one row per tool, read by the orchestrator (what the model
sees, the per-call time budget, the retry ceiling's scope, the approval policy)
and by infra (the Lambda, its role, environment, concurrency and network).

A tool is added by adding its row here (docs/architecture.md, "How to add a
tool"); nothing else branches on a tool's name. ``infra/contract.py`` does NOT
read this table: it spells every role's grants by hand, so a row that asks for
more than the contract allows fails tests/infra/test_contract.py.

The rest of the module names the stack's other fixed resources (the reconciler,
the decision Lambda, the orchestrator, the ledger, the gateway secret)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

from pydantic import BaseModel

from .models import OrderStatusArguments, ProfileArguments, RefundArguments


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


class Egress(Enum):
    """What a tool's Lambda reaches besides PostgreSQL (it always runs in the VPC,
    as its own DB user). The value is the security group's description; it is part
    of the deployed group's identity (CloudFormation replaces a group whose
    description changes), so it is written once, here."""

    POSTGRES_ONLY = "egress to PostgreSQL only"
    # Isolated subnets: the only HTTPS route is the DynamoDB gateway endpoint.
    LEDGER_ENDPOINT = "egress to PostgreSQL and HTTPS to DynamoDB (gateway endpoint)"
    # Subnets with a NAT: the payment gateway and Secrets Manager, and the DynamoDB endpoint.
    INTERNET = "egress to PostgreSQL and HTTPS (gateway, Secrets Manager, DynamoDB)"

    @property
    def https(self) -> bool:
        return self is not Egress.POSTGRES_ONLY

    @property
    def through_nat(self) -> bool:
        return self is Egress.INTERNET


@dataclass(frozen=True)
class ToolSpec:
    """One tool: everything the orchestrator and infra need to know about it."""

    name: str  # the tool name the model sees
    description: str  # what the model reads about it (pt-BR, like everything the model reads)
    # The arguments the model sends, strictly typed. The schema the model sees is
    # derived from it (orchestrator/tools.py), and the tool's own request model
    # subclasses it (with the identity the orchestrator injects). It lives in the
    # shared schema module, since the orchestrator's asset ships without tool packages.
    arguments: type[BaseModel]
    function_name: str  # the Lambda (Lab 87's names)
    db_user: str  # the PostgreSQL user the Lambda logs in as (sql/grants.sql)
    package: str  # the Python package under functions/
    # The Lambda's timeout, and so the orchestrator's per-call time budget: a call is
    # not started with less time left than this, since one cut short by the
    # orchestrator's own deadline would leave an unknown outcome. Infra sets the
    # Lambda's timeout from this field (tests/infra/test_tool_timeouts.py).
    timeout_s: int
    reserved_concurrency: int  # default; -c toolConcurrency='{"name": n}' overrides it
    egress: Egress = Egress.POSTGRES_ONLY
    # The ledger table's item actions its role gets (exactly these, on the table's ARN).
    ledger_actions: tuple[str, ...] = ()
    # Appends to the audit hash chain (cadencia_shared.audit_chain): PutItem/Query on the
    # audit table and its head's anchor in the ledger (``auditoria-cabeca#`` keys only).
    appends_audit: bool = False
    secrets: tuple[str, ...] = ()  # Secrets Manager names it may read (GetSecretValue)
    calls_payment_gateway: bool = False  # gets the gateway's URL, timeouts and claim lease
    # Irreversible: the confirmation gate applies ``approval``, and the orchestrator
    # names the call's claim with the ledger's per-(conversation, subject) refund key
    # (orchestrator/tools.py ``ToolCall.idempotency_key``) — the refund is the only
    # irreversible tool; a second one needs a key kind of its own in the ledger.
    irreversible: bool = False
    subject_field: str | None = "pedidoId"  # which input field scopes the retry ceiling
    approval: ApprovalPolicy | None = None  # None: the confirmation gate lets every call through

    def __post_init__(self) -> None:
        # A row whose network cannot reach what it asks for would deploy and then time
        # out at run time: refuse it when the registry is read.
        if (self.ledger_actions or self.appends_audit) and not self.egress.https:
            raise ValueError(f"{self.name}: ledger_actions and appends_audit need HTTPS egress (the DynamoDB "
                             "endpoint)")
        if (self.secrets or self.calls_payment_gateway) and not self.egress.through_nat:
            raise ValueError(f"{self.name}: secrets and the payment gateway are reached through the NAT "
                             "(Egress.INTERNET)")
        if self.approval is not None and not self.irreversible:
            raise ValueError(f"{self.name}: an approval policy applies to irreversible tools only")

    @property
    def handler(self) -> str:
        return f"{self.package}.handler.lambda_handler"

    @property
    def role_name(self) -> str:
        """Lab 87's role names: cadencia-agente-{consulta,reembolso,cadastro}-role."""
        return f"cadencia-agente-{self.db_user.removeprefix('cadencia_agente_')}-role"


LEDGER_ITEM_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
LEDGER_TABLE = "cadencia-agente-execucoes"
GATEWAY_SECRET_NAME = "cadencia/gateway-pagamento"

CONSULTAR_STATUS_PEDIDO = ToolSpec(
    name="consultar_status_pedido",
    description="Consulta o status de um pedido do cliente desta conversa (somente leitura).",
    arguments=OrderStatusArguments,
    function_name="cadencia-consultar-status-pedido",
    db_user="cadencia_agente_consulta",
    package="consultar_status_pedido",
    timeout_s=5,
    reserved_concurrency=10,
)
EMITIR_REEMBOLSO = ToolSpec(
    name="emitir_reembolso",
    description=(
        "Emite um reembolso de um pedido do cliente desta conversa. IRREVERSÍVEL: movimenta dinheiro. "
        "Um reembolso por pedido por conversa; repetir a chamada não gera um novo reembolso."
    ),
    arguments=RefundArguments,
    function_name="cadencia-emitir-reembolso",
    db_user="cadencia_agente_reembolso",
    package="emitir_reembolso",
    timeout_s=8,
    # Refunds are irreversible: 5 concurrent at most caps what a runaway loop
    # could do per second, and keeps DB connections bounded.
    reserved_concurrency=5,
    egress=Egress.INTERNET,
    ledger_actions=LEDGER_ITEM_ACTIONS,  # claim (conditional PutItem), read and settle it
    secrets=(GATEWAY_SECRET_NAME,),
    calls_payment_gateway=True,
    irreversible=True,
    approval=ApprovalPolicy(),
)
ATUALIZAR_CADASTRO = ToolSpec(
    name="atualizar_cadastro",
    description="Atualiza endereço, telefone e/ou e-mail do cadastro do cliente desta conversa.",
    arguments=ProfileArguments,
    function_name="cadencia-atualizar-cadastro",
    db_user="cadencia_agente_cadastro",
    package="atualizar_cadastro",
    timeout_s=5,
    reserved_concurrency=5,
    egress=Egress.LEDGER_ENDPOINT,
    appends_audit=True,  # the profile change's record, on the hash chain (no other ledger access)
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
DATABASE_NAME = "cadencia"
