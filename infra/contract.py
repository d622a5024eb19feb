"""The least-privilege contract: every role of the stack and its exact grants.

One table, in one place. ``tests/infra/test_contract.py`` reads the synthesized
template and asserts that each role's (action, resource) pairs, and its managed
policies, equal this table exactly; ``render_markdown`` turns it into the access
matrix in README.md (a test keeps the two equal). The stack does not read this
module to build its policies: the statements in ``infra/constructs/`` are written
independently, from the tool registry (``cadencia_shared.catalog``), which this
module does NOT read either: the tools' roles are spelled out here by hand
(``TOOL_ROLES``), so a registry row that asks for more than its contract row
shows up as a difference, not as a wider contract.

Resources are written the way the template spells them after intrinsic
functions are flattened (``policy_check.render``): ``${LogicalId}`` for a Ref,
``${LogicalId.Attr}`` for a GetAtt, ``${AWS::Region}`` for a pseudo parameter.
The stack pins the logical ids named here (``Ids``) so they are stable.
"""

from __future__ import annotations

from dataclasses import dataclass

from cadencia_shared.catalog import (
    DATABASE_NAME,
    DECISION_FUNCTION_NAME,
    ORCHESTRATOR_FUNCTION_NAME,
    RECONCILER_DB_USER,
    RECONCILER_FUNCTION_NAME,
    WHATSAPP_DB_USER,
)
from cadencia_shared.ledger import GSI_UNSETTLED

from .config import StackConfig

# Re-exported (the `X as X` form says so to ruff and mypy): the contract's vocabulary, used as
# `contract.Grant` etc., and `from infra.contract import Ids` keeps working.
from .grants import LEADING_KEYS as LEADING_KEYS
from .grants import LEADING_KEYS_CONDITION as LEADING_KEYS_CONDITION
from .grants import LOG_ACTIONS as LOG_ACTIONS
from .grants import WILDCARD as WILDCARD
from .grants import XRAY_ACTIONS as XRAY_ACTIONS
from .grants import Grant as Grant
from .grants import ManagedPolicy as ManagedPolicy
from .grants import RoleContract as RoleContract
from .grants import platform
from .grants import scoped as scoped
from .grants import unscoped as unscoped
from .ledger_kinds import ledger_grants
from .logical_ids import Ids as Ids
from .logical_ids import pascal as pascal
from .operator_contract import console_authorizer_role

DB_USERS_FUNCTION_NAME = "cadencia-db-users"
RECONCILER_ROLE_NAME = "cadencia-conciliar-reembolsos-role"
DECISION_ROLE_NAME = "cadencia-decidir-aprovacao-role"
WHATSAPP_CONSUMER_FUNCTION_NAME = "cadencia-orquestrador-whatsapp"
WHATSAPP_INGRESS_ROLE_NAME = "cadencia-canal-whatsapp-role"
WHATSAPP_CONSUMER_ROLE_NAME = "cadencia-orquestrador-whatsapp-role"
WHATSAPP_HUMAN_REPLY_ROLE_NAME = "cadencia-resposta-atendente-role"
STACK_NAME = "CadenciaAgente"


def ref(logical_id: str) -> str:
    return "${" + logical_id + "}"


def att(logical_id: str, attribute: str) -> str:
    return "${" + logical_id + "." + attribute + "}"


ARN_PREFIX = "arn:${AWS::Partition}"
REGION_ACCOUNT = "${AWS::Region}:${AWS::AccountId}"


def dbuser_arn(config: StackConfig, db_user: str) -> str:
    cluster_resource_id = (
        config.imported.cluster_resource_id if config.imported else att(Ids.CLUSTER, "DBClusterResourceId")
    )
    return f"{ARN_PREFIX}:rds-db:{REGION_ACCOUNT}:dbuser:{cluster_resource_id}/{db_user}"


def cluster_arn() -> str:
    return f"{ARN_PREFIX}:rds:{REGION_ACCOUNT}:cluster:{ref(Ids.CLUSTER)}"


def bedrock_model_arns(config: StackConfig) -> tuple[str, ...]:
    """The model's ARNs: the inference profile (when the id names one) and the
    foundation model in every region the profile may route to."""
    arns = []
    if config.model_is_inference_profile:
        arns.append(f"{ARN_PREFIX}:bedrock:{REGION_ACCOUNT}:inference-profile/{config.model_id}")
        regions = config.bedrock_regions
    else:
        regions = ("${AWS::Region}",)
    arns += [f"{ARN_PREFIX}:bedrock:{region}::foundation-model/{config.foundation_model_id}" for region in regions]
    return tuple(arns)


ENI_MANAGEMENT = ManagedPolicy(
    name="service-role/AWSLambdaENIManagementAccess",
    grants=("ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
            "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"),
    why="Lambda creates the function's VPC network interfaces with its role. These EC2 actions do not take "
        "resource ARNs that the function could name in advance (Describe* accepts only \"*\"); this AWS policy "
        "holds exactly those five and no CloudWatch Logs wildcard (unlike AWSLambdaVPCAccessExecutionRole).",
)


def _platform(log_group_id: str) -> tuple[Grant, ...]:
    return platform(att(log_group_id, "Arn"))


LEDGER = att(Ids.LEDGER, "Arn")
AUDIT_TABLE = att(Ids.AUDIT_TABLE, "Arn")


def _audit_append(purpose: str) -> Grant:
    """What appending to the audit hash chain needs on its table (``cadencia_shared.audit_chain``):
    the conditional PutItem of the record and the Query of the chain's last link."""
    return Grant(("dynamodb:PutItem", "dynamodb:Query"), (AUDIT_TABLE,),
                 f"{purpose} on the audit hash chain (PutItem; Query reads its last link); never "
                 "UpdateItem/DeleteItem")


# Every ledger grant comes from infra/ledger_kinds.py: per role, the item kinds
# (key prefixes) and the actions on each, scoped by ``dynamodb:LeadingKeys``. The
# profile tool's row is the chain's head anchor (auditoria-cabeca#{chain}); the refund's, its
# claims and the approval a SEAL envelope names; and every tool's, SEAL's edge (GetItem of the
# call's session, PutItem of its used envelope). ``tool_role`` renders a tool's row before its grants.


@dataclass(frozen=True)
class ToolRole:
    """One tool's role, written by hand (never read from the registry): its Lambda,
    its DB user, and what it may do beyond logging in to PostgreSQL as that user and
    its ledger row (``infra/ledger_kinds.py``, which gives every tool SEAL's edge)."""

    package: str  # names its resources' logical ids (Ids.function/role/log_group)
    tool: str
    function_name: str
    role_name: str
    db_user: str
    grants: tuple[Grant, ...] = ()
    # What its DB user may do, as "PRIVILEGE (columns) ON table" (column grants only):
    # tests/test_db_privileges.py checks the catalog of a real PostgreSQL against it.
    db_privileges: tuple[str, ...] = ()


TOOL_ROLES: tuple[ToolRole, ...] = (
    ToolRole("consultar_status_pedido", "consultar_status_pedido", "cadencia-consultar-status-pedido",
             "cadencia-agente-consulta-role", "cadencia_agente_consulta", db_privileges=(
                 "SELECT (id, cliente_id, status, valor_pedido, status_reembolso, valor_reembolsado, "
                 "previsao_entrega, codigo_rastreio) ON pedidos",)),
    ToolRole("emitir_reembolso", "emitir_reembolso", "cadencia-emitir-reembolso",
             "cadencia-agente-reembolso-role", "cadencia_agente_reembolso", (
                 Grant(("secretsmanager:GetSecretValue",), (ref(Ids.GATEWAY_SECRET),),
                       "read the payment-gateway token, only after the claim succeeded (only this role and the "
                       "reconciler's can)"),
             ), db_privileges=(
                 "SELECT (id, cliente_id, valor_pedido, valor_reembolsado) ON pedidos",
                 "UPDATE (status_reembolso, valor_reembolsado) ON pedidos",
                 "SELECT (chave_idempotencia, pedido_id, valor, status) ON reembolsos",
                 "INSERT (chave_idempotencia, pedido_id, valor, status) ON reembolsos",
                 "UPDATE (valor, status, atualizado_em) ON reembolsos")),
    ToolRole("atualizar_cadastro", "atualizar_cadastro", "cadencia-atualizar-cadastro",
             "cadencia-agente-cadastro-role", "cadencia_agente_cadastro", (
                 _audit_append("append the profile change's record (field names only)"),
             ), db_privileges=("SELECT (id) ON clientes", "UPDATE (endereco, telefone, email) ON clientes")),
)
TOOL_FUNCTION_ARNS = tuple(att(Ids.function(t.package), "Arn") for t in TOOL_ROLES)


def tool_role(config: StackConfig, tool: ToolRole) -> RoleContract:
    connect = Grant(("rds-db:connect",), (dbuser_arn(config, tool.db_user),),
                    f"log in to PostgreSQL as {tool.db_user} only (IAM auth token), never as another tool's user")
    return RoleContract(
        logical_id=Ids.role(tool.package),
        role_name=tool.role_name,
        service="lambda.amazonaws.com",
        purpose=f"Lambda {tool.function_name} (tool {tool.tool})",
        # Its ledger row (infra/ledger_kinds.py; every tool's includes SEAL's edge), then its own grants.
        grants=(connect, *ledger_grants(Ids.role(tool.package)), *tool.grants) + _platform(Ids.log_group(tool.package)),
        managed_policies=(ENI_MANAGEMENT,),
    )


def orchestrator_role(config: StackConfig) -> RoleContract:
    grants = [
        *ledger_grants(Ids.ORCHESTRATOR_ROLE),
        Grant(("lambda:InvokeFunction",), TOOL_FUNCTION_ARNS,
              "invoke exactly the tool Lambdas of TOOL_ROLES (unqualified ARNs), nothing else"),
        Grant(("sqs:SendMessage",), (att(Ids.ORCHESTRATOR_DLQ, "Arn"),),
              "dead-letter queue of failed asynchronous invocations (a customer message is never dropped)"),
        Grant(("events:PutEvents",), (att(Ids.HANDOFF_BUS, "Arn"),),
              "publish hand-offs and approval requests (masked) on the stack's own bus only"),
        Grant(("sqs:SendMessage",), (att(Ids.WHATSAPP_RESEND_QUEUE, "Arn"),),
              "a decided approval's message to a WhatsApp customer: recorded in the outbox, sent by the "
              "WhatsApp consumer (this role never holds the Cloud API token)"),
        _audit_append("append every decision of the loop's controls"),
    ]
    grants.append(_model_grant(config))
    return RoleContract(
        logical_id=Ids.ORCHESTRATOR_ROLE,
        role_name="cadencia-orquestrador-role",
        service="lambda.amazonaws.com",
        purpose=f"Lambda {ORCHESTRATOR_FUNCTION_NAME} (the loop and its gates; outside the VPC)",
        grants=tuple(grants) + _platform(Ids.ORCHESTRATOR_LOG_GROUP),
    )


def reconciler_role(config: StackConfig) -> RoleContract:
    ledger = LEDGER
    return RoleContract(
        logical_id=Ids.RECONCILER_ROLE,
        role_name=RECONCILER_ROLE_NAME,
        service="lambda.amazonaws.com",
        purpose=f"Lambda {RECONCILER_FUNCTION_NAME} (scheduled refund reconciler; not a tool)",
        grants=(
            Grant(("dynamodb:Query",), (f"{ledger}/index/{GSI_UNSETTLED}",),
                  "list unsettled refund claims from the ledger's sparse index (never a Scan)"),
            # Each listed claim by key (the index holds keys only): take it over and
            # settle it, fenced on its owner (never creates one).
            *ledger_grants(Ids.RECONCILER_ROLE),
            Grant(("secretsmanager:GetSecretValue",), (ref(Ids.GATEWAY_SECRET),),
                  "the gateway token, to re-send an unsettled refund's own request"),
            Grant(("rds-db:connect",), (dbuser_arn(config, RECONCILER_DB_USER),),
                  f"log in to PostgreSQL as {RECONCILER_DB_USER} only (settle reservations)"),
        ) + _platform(Ids.RECONCILER_LOG_GROUP),
        managed_policies=(ENI_MANAGEMENT,),
    )


def decision_role() -> RoleContract:
    ledger = att(Ids.LEDGER, "Arn")
    return RoleContract(
        logical_id=Ids.DECISION_ROLE,
        role_name=DECISION_ROLE_NAME,
        service="lambda.amazonaws.com",
        purpose=f"Lambda {DECISION_FUNCTION_NAME} (approval decisions; operators invoke it; outside the VPC)",
        grants=(
            Grant(("dynamodb:Query",), (f"{ledger}/index/{GSI_UNSETTLED}",),
                  "list pending approval requests from the ledger's sparse index (never a Scan)"),
            # An approval (each listed one by key: the index holds keys only), one decision
            # (conditional write on its status); never a request of its own (no PutItem on it).
            *ledger_grants(Ids.DECISION_ROLE),
            Grant(("lambda:InvokeFunction",), (att(Ids.ORCHESTRATOR_FUNCTION, "Arn"),),
                  "resume the conversation: the orchestrator runs the approved call (this role runs no tool)"),
            _audit_append("append decisions and refused decisions"),
        ) + _platform(Ids.DECISION_LOG_GROUP),
    )


def _model_grant(config: StackConfig) -> Grant:
    if config.uses_bedrock:
        return Grant(("bedrock:InvokeModel",), bedrock_model_arns(config),
                     f"call the configured model {config.model_id} and nothing else")
    return Grant(("secretsmanager:GetSecretValue",), (ref(Ids.ANTHROPIC_SECRET),), "read the Anthropic API key")


def whatsapp_ingress_role(config: StackConfig) -> RoleContract:
    return RoleContract(
        logical_id=Ids.WHATSAPP_INGRESS_ROLE,
        role_name=WHATSAPP_INGRESS_ROLE_NAME,
        service="lambda.amazonaws.com",
        purpose="Lambda cadencia-canal-whatsapp-entrada (the webhook behind the Function URL; in the VPC)",
        grants=(
            Grant(("rds-db:connect",), (dbuser_arn(config, WHATSAPP_DB_USER),),
                  f"log in to PostgreSQL as {WHATSAPP_DB_USER} only: SELECT (wa_id, cliente_id) on canais_whatsapp"),
            Grant(("sqs:SendMessage",), (att(Ids.WHATSAPP_QUEUE, "Arn"),),
                  "enqueue a verified message on the FIFO queue (group = customer, dedup = wamid)"),
            Grant(("secretsmanager:GetSecretValue",), (ref(Ids.WHATSAPP_APP_SECRET), ref(Ids.WHATSAPP_VERIFY_TOKEN),
                                                       ref(Ids.WHATSAPP_QUEUE_KEY)),
                  "the App Secret (signature), the verify token (handshake), the queue key (signs what it enqueues)"),
        ) + _platform(Ids.WHATSAPP_INGRESS_LOG_GROUP),
        managed_policies=(ENI_MANAGEMENT,),
    )


def whatsapp_consumer_role(config: StackConfig) -> RoleContract:
    return RoleContract(
        logical_id=Ids.WHATSAPP_CONSUMER_ROLE,
        role_name=WHATSAPP_CONSUMER_ROLE_NAME,
        service="lambda.amazonaws.com",
        purpose=f"Lambda {WHATSAPP_CONSUMER_FUNCTION_NAME} (the orchestrator fed by the WhatsApp queue; outside "
                "the VPC)",
        grants=(
            *ledger_grants(Ids.WHATSAPP_CONSUMER_ROLE),  # the loop's kinds, plus the outbox and contacts
            Grant(("lambda:InvokeFunction",), TOOL_FUNCTION_ARNS,
                  "invoke exactly the tool Lambdas of TOOL_ROLES (unqualified ARNs), nothing else"),
            Grant(("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"),
                  (att(Ids.WHATSAPP_QUEUE, "Arn"),), "what the event source mapping needs to consume the queue"),
            Grant(("sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"),
                  (att(Ids.WHATSAPP_RESEND_QUEUE, "Arn"),),
                  "defer a reply the Cloud API refused for a temporary reason, and consume those resends "
                  "(a second event source mapping)"),
            Grant(("secretsmanager:GetSecretValue",), (ref(Ids.WHATSAPP_ACCESS_TOKEN), ref(Ids.WHATSAPP_QUEUE_KEY)),
                  "the Cloud API access token (sends the reply), the queue key (verifies each queued body)"),
            Grant(("events:PutEvents",), (att(Ids.HANDOFF_BUS, "Arn"),),
                  "publish hand-offs and approval requests (masked) on the stack's own bus only"),
            _audit_append("append every decision of the loop's controls"),
            _model_grant(config),
        ) + _platform(Ids.WHATSAPP_CONSUMER_LOG_GROUP),
    )


def whatsapp_human_reply_role() -> RoleContract:
    return RoleContract(
        logical_id=Ids.WHATSAPP_HUMAN_REPLY_ROLE,
        role_name=WHATSAPP_HUMAN_REPLY_ROLE_NAME,
        service="lambda.amazonaws.com",
        purpose="Lambda cadencia-resposta-atendente (a person's reply to a handed-off conversation; the "
                "attendant's tooling invokes it; outside the VPC)",
        grants=(
            # The reply once in the conversation (its inbound claim, the fenced commit), the
            # conversation's WhatsApp address, the reply's outbox record.
            *ledger_grants(Ids.WHATSAPP_HUMAN_REPLY_ROLE),
            Grant(("secretsmanager:GetSecretValue",), (ref(Ids.WHATSAPP_ACCESS_TOKEN),),
                  "the Cloud API access token, to send the reply (the person never holds it)"),
            _audit_append("append the reply"),
        ) + _platform(Ids.WHATSAPP_HUMAN_REPLY_LOG_GROUP),
    )


def db_users_role() -> RoleContract:
    return RoleContract(
        logical_id=Ids.DB_USERS_ROLE,
        role_name=None,
        service="lambda.amazonaws.com",
        purpose=f"custom resource {DB_USERS_FUNCTION_NAME}: applies sql/schema.sql + sql/grants.sql on "
                "create/update and sql/revoke.sql on delete (statements shipped in its code, never taken from "
                "the event), through the RDS Data API (demo cluster only)",
        grants=(
            Grant(("rds-data:ExecuteStatement",), (cluster_arn(),),
                  "run one SQL statement per call on the demo cluster"),
            Grant(("secretsmanager:GetSecretValue",), (ref(Ids.CLUSTER_SECRET_ATTACHMENT),),
                  f"the Data API authenticates to database {DATABASE_NAME} with the cluster's master secret"),
            Grant(("cloudformation:DescribeStackResource", "cloudformation:DescribeStacks"), (ref("AWS::StackId"),),
                  "act only while CloudFormation is working on its resource in this stack (a Delete only while "
                  "it deletes it: the resource's status, and the stack's for a failed create)"),
            Grant(LOG_ACTIONS, (att(Ids.DB_USERS_LOG_GROUP, "Arn"),), "write its own log group"),
        ),
    )


def flow_log_role() -> RoleContract:
    return RoleContract(
        logical_id=Ids.FLOW_LOG_ROLE,
        role_name=None,
        service="vpc-flow-logs.amazonaws.com",
        purpose="VPC flow logs (demo VPC) delivered to CloudWatch Logs",
        grants=(
            Grant(("logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"),
                  (att(Ids.FLOW_LOG_GROUP, "Arn"),), "deliver flow records to its own log group"),
        ),
    )


def build(config: StackConfig) -> list[RoleContract]:
    """The contract of the stack synthesized with ``config``."""
    roles: list[RoleContract] = []
    if config.deploy_functions:
        roles += [tool_role(config, t) for t in TOOL_ROLES]
        roles.append(orchestrator_role(config))
        roles.append(reconciler_role(config))
        roles.append(decision_role())
        roles += [whatsapp_ingress_role(config), whatsapp_consumer_role(config), whatsapp_human_reply_role()]
        roles.append(console_authorizer_role())
    if config.demo_database and config.deploy_database_users:
        roles.append(db_users_role())
    if config.demo_database:
        roles.append(flow_log_role())
    return roles


def render_markdown() -> str:
    """The access matrix of docs/access-matrix.md (infra/access_matrix.py renders it from ``build``)."""
    from .access_matrix import render_markdown as render

    return render()


def doc_block(doc_text: str) -> str:
    from .access_matrix import doc_block as block

    return block(doc_text)


if __name__ == "__main__":  # `python -m infra.contract [--write-doc]` (docs/access-matrix.md)
    from .access_matrix import main

    main()
