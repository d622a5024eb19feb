"""One tool's Lambda, built from its registry row (``cadencia_shared.catalog``):
its security group, its role (its DB user, its ledger actions, its secrets, and
nothing else), its log group and the function. The stack makes one per row; no
line here names a tool."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from cadencia_shared.catalog import ToolSpec

from .base import Flat, FunctionSpec, LambdaFunction, Placement, depends_on, lambda_role
from .config import StackConfig
from .contract import Ids, pascal
from .database import Database
from .ledger import Ledger, ledger_statements
from .network import Network
from .packaging import BuiltAsset
from .payment_gateway import gateway_environment

TOOL_MEMORY_MB = 512


def tool_security_group(scope: Construct, tool: ToolSpec, network: Network, database: Database) -> ec2.SecurityGroup:
    """A tool's security group: PostgreSQL, plus HTTPS when its row's egress says so.

    Made for every row in every teardown phase, in the stack's own scope: it outlives
    the function (Lambda releases a function's network interfaces minutes after the
    function is gone, and a group still in use cannot be deleted), and the database's
    ingress rule is named after the group's construct path."""
    sg = ec2.SecurityGroup(scope, f"{pascal(tool.package)}SecurityGroup", vpc=network.vpc,
                           allow_all_outbound=False, description=f"{tool.function_name}: {tool.egress.value}")
    if tool.egress.https:
        # Through the NAT (gateway, Secrets Manager) or, from isolated subnets, only
        # the DynamoDB gateway endpoint (a prefix list id cannot be resolved offline).
        sg.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS (see the subnet's routes)")
    database.allow_from(sg)
    return sg


class ToolFunction(Flat):
    def __init__(self, scope: Construct, tool: ToolSpec, *, config: StackConfig, assets: Mapping[str, BuiltAsset],
                 ledger: Ledger, network: Network, database: Database, security_group: ec2.SecurityGroup,
                 secrets: Mapping[str, secretsmanager.ISecret]) -> None:
        super().__init__(scope, pascal(tool.package))
        self.tool = tool
        self.security_group = security_group
        parts = LambdaFunction(
            self, role=lambda_role(self, Ids.role(tool.package), tool.role_name,
                                   f"Tool {tool.name}: its DB user, and only what its code calls", in_vpc=True),
            log_group_id=Ids.log_group(tool.package), function_name=tool.function_name)
        database.grant_connect(parts.role, tool.db_user)
        env = database.db_environment(tool.function_name, tool.db_user)
        # Every tool's edge verifies the call's SEAL envelope on the ledger (docs/seal.md); the
        # audit table's PutItem/Query and AUDIT_TABLE: infra.controls.add_audit_table. On the
        # ledger, only the item kinds of its row in infra/ledger_kinds.py.
        statements = ledger_statements(Ids.role(tool.package), ledger.table.table_arn)
        granted = {a for s in statements for a in s.actions}
        if not statements or not tool.egress.https \
                or not granted <= set(tool.ledger_actions) | set(_ANCHOR_ACTIONS) | set(_SEAL_ACTIONS):
            raise ValueError(f"tool {tool.name}: its ledger_actions/appends_audit/egress and its row in "
                             f"infra/ledger_kinds.py disagree ({sorted(granted)} vs {tool.ledger_actions})")
        for statement in statements:
            parts.role.add_to_policy(statement)
        env["LEDGER_TABLE"] = ledger.table.table_name
        for name in tool.secrets:
            parts.allow(["secretsmanager:GetSecretValue"], [_secret(secrets, name, tool).secret_arn])
        if tool.calls_payment_gateway:
            env.update(gateway_environment(config))
        self.function = parts.build(FunctionSpec(
            logical_id=Ids.function(tool.package),
            description=f"Tool {tool.name} (Lab 87)",
            handler=tool.handler,
            timeout=Duration.seconds(tool.timeout_s),  # the orchestrator's per-call budget is the same field
            memory_size=TOOL_MEMORY_MB,
            environment=env,
            placement=Placement(network.vpc, network.with_egress if tool.egress.through_nat else network.isolated,
                                (self.security_group,)),
            reserved_concurrency=config.tool_concurrency[tool.name] if config.reserved_concurrency else None,
            # Tools are invoked synchronously by the orchestrator, which counts every
            # attempt. An asynchronous invoke must never be retried by Lambda behind
            # the ceiling's back (for a refund that would be a second debit attempt).
            retry_attempts=0,
        ), assets)
        depends_on(self.function, database.users)

    @property
    def function_arn(self) -> str:
        return self.function.function_arn


# The chain's head anchor (``cadencia_shared.audit_chain``: a GetItem and a conditional
# UpdateItem of ``auditoria-cabeca#{chain}``), what appends_audit alone asks of the ledger.
_ANCHOR_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem")
# SEAL's edge, every tool: GetItem of the call's session, PutItem of its used envelope's jti.
_SEAL_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem")


def _secret(secrets: Mapping[str, secretsmanager.ISecret], name: str, tool: ToolSpec) -> secretsmanager.ISecret:
    if name not in secrets:
        raise ValueError(f"tool {tool.name} reads secret {name!r}, which the stack does not create: "
                         f"add it where the stack makes its secrets (known: {sorted(secrets)})")
    return secrets[name]


