"""The Cadência agent on AWS, composed of constructs: the ledger, the network, the
database (a demo Aurora cluster or an imported ERP cluster), one tool function
per registry row (``cadencia_shared.catalog.TOOLS``), the orchestrator, the
hand-off bus, the refund reconciler, the WhatsApp channel, approvals, the
controls' audit table, and monitoring.

Policies are written statement by statement (no grant helper that adds actions
or index wildcards); ``infra/contract.py`` lists what they must add up to, and the
tests compare the two on the synthesized template. The constructs are ``Flat``
(infra/base.py): splitting the stack renamed no deployed resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnElement, CfnOutput, CustomResource, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cadencia_shared.catalog import (
    DECISION_FUNCTION_NAME,
    GATEWAY_SECRET_NAME,
    ORCHESTRATOR_FUNCTION_NAME,
    TOOLS,
    ToolSpec,
)
from canal_whatsapp.settings import HUMAN_REPLY_FUNCTION_NAME

from . import base, contract
from .approvals import add_approval_decisions
from .base import ARCHITECTURE, L1_REASON, RUNTIME, flat_path, unique_id
from .channel import add_whatsapp_channel
from .config import StackConfig
from .controls import add_audit_table, add_control_alarms
from .database import Database
from .handoffs import add_handoff_bus
from .ledger import Ledger
from .monitoring import DASHBOARD_NAME, Monitoring, tool_metric
from .network import Network
from .operator_api import add_operator_api
from .orchestrator_function import ORCHESTRATOR_TIMEOUT_S, RETRY_CEILING, Orchestrator, bedrock_arns
from .packaging import BuiltAsset
from .payment_gateway import gateway_secret
from .reconciler import add_refund_reconciler
from .secret_policies import restrict_secret_readers
from .tool_function import ToolFunction, tool_security_group


class CadenciaStack(Stack):
    # Set by add_whatsapp_channel (infra/channel.py), which builds them on this stack.
    whatsapp_consumer: lambda_.Function
    whatsapp_human_reply: lambda_.Function

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig,
                 assets: dict[str, BuiltAsset], **kwargs: Any) -> None:
        super().__init__(scope, construct_id,
                         description="Cadência support agent (Lab 87): tools, ledger, orchestrator",
                         **kwargs)
        self.config = config
        self.assets = assets
        self.ledger_construct = Ledger(self, "LedgerTable", deletion_protection=config.ledger_deletion_protection,
                                       keep_retired_indexes=config.keep_retired_indexes)
        self.ledger = self.ledger_construct.table
        self.gateway_secret = gateway_secret(self)
        self.network = Network(self, config=config)
        self.database = Database(self, config=config, network=self.network, assets=assets)
        self.tool_security_groups = {tool.name: tool_security_group(self, tool, self.network, self.database)
                                     for tool in TOOLS.values()}
        self.monitoring = Monitoring(self, "Monitoring", alarm_email=config.alarm_email)
        self.tools: dict[str, ToolFunction] = {}
        self.orchestrator_construct: Orchestrator | None = None
        if config.deploy_functions:
            self._functions()
            restrict_secret_readers(self, contract.build(config))
        tables = {contract.LEDGER: self.ledger.table_arn}
        if config.deploy_functions:
            tables[contract.AUDIT_TABLE] = self.audit_table.table_arn
        self.network.restrict_dynamodb_endpoint(tables)
        self.monitoring.finish(self.orchestrator_construct.dlq if self.orchestrator_construct else None)
        self._outputs()

    def _functions(self) -> None:
        cfg = self.config
        secrets = {GATEWAY_SECRET_NAME: self.gateway_secret}  # what a registry row may name in ``secrets``
        for tool in TOOLS.values():
            self.tools[tool.name] = ToolFunction(
                self, tool, config=cfg, assets=self.assets, ledger=self.ledger_construct, network=self.network,
                database=self.database, security_group=self.tool_security_groups[tool.name], secrets=secrets)
        self.orchestrator_construct = Orchestrator(self, "Orchestrator", config=cfg, assets=self.assets,
                                                   ledger=self.ledger_construct, tools=list(self.tools.values()))
        self.orchestrator = self.orchestrator_construct.function
        self.handoff_bus = add_handoff_bus(self, self.orchestrator, self.orchestrator_construct.role)
        self.reconciler = add_refund_reconciler(self)
        add_whatsapp_channel(self)
        self.decisions = add_approval_decisions(self)
        # The operators' HTTP API in front of the decisions and the person's reply (JWT authorizer).
        self.operator_api = add_operator_api(self, {DECISION_FUNCTION_NAME: self.decisions,
                                                    HUMAN_REPLY_FUNCTION_NAME: self.whatsapp_human_reply})
        add_control_alarms(self)
        # every turn runner, the approval decisions and each tool that audits append to the same hash chain
        self.audit_table = add_audit_table(self, self.orchestrator, self.whatsapp_consumer,
                                           self.whatsapp_human_reply, self.decisions,
                                           *(t.function for t in self.tools.values() if t.tool.appends_audit))

    def _allocate_logical_id(self, cfn_element: CfnElement) -> str:
        """CDK's own rule over the construct path, with ``Flat`` constructs left out
        (infra/base.py says why: no deployed resource is renamed by the split)."""
        return unique_id(flat_path(cfn_element, self))

    def _outputs(self) -> None:
        CfnOutput(self, "LedgerTableName", value=self.ledger.table_name)
        CfnOutput(self, "OrchestratorFunctionName", value=ORCHESTRATOR_FUNCTION_NAME)
        CfnOutput(self, "GatewaySecretArn", value=self.gateway_secret.secret_arn)
        CfnOutput(self, "DatabaseMode", value=self.config.database)
        CfnOutput(self, "DbEndpoint", value=self.database.endpoint)
        cluster = self.database.cluster
        if cluster is not None:
            assert cluster.secret is not None
            CfnOutput(self, "DbClusterArn", value=cluster.cluster_arn)
            CfnOutput(self, "DbSecretArn", value=cluster.secret.secret_arn)
        CfnOutput(self, "ModelProvider", value=self.config.model_provider)
        CfnOutput(self, "TeardownPhase", value=self.config.teardown or "none")
        CfnOutput(self, "DashboardName", value=DASHBOARD_NAME)
        CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn)

    # --- what the other constructs (reconciler, approvals, channel, controls) build with ----
    runtime, architecture, l1_reason = RUNTIME, ARCHITECTURE, L1_REASON
    orchestrator_timeout_s, retry_ceiling = ORCHESTRATOR_TIMEOUT_S, str(RETRY_CEILING)
    pin = staticmethod(base.pin)

    @staticmethod
    def ack(construct: Construct, rule: str, reason: str) -> None:
        base.acknowledge(construct, rule, reason)

    @property
    def extra_alarms(self) -> list[cw.Alarm]:
        return self.monitoring.extra_alarms

    @property
    def alarm_topic(self) -> sns.Topic:
        return self.monitoring.topic

    @property
    def vpc(self) -> ec2.IVpc:
        return self.network.vpc

    @property
    def with_egress(self) -> ec2.SubnetSelection:
        return self.network.with_egress

    @property
    def isolated(self) -> ec2.SubnetSelection:
        return self.network.isolated

    @property
    def db_users(self) -> CustomResource | None:
        return self.database.users

    @property
    def cluster_for_grants(self) -> rds.IDatabaseCluster:
        return self.database.cluster_for_grants

    @property
    def tool_functions(self) -> Mapping[str, lambda_.Function]:
        return {name: tool.function for name, tool in self.tools.items()}

    @property
    def anthropic_key_arn(self) -> str:
        assert self.orchestrator_construct is not None and self.orchestrator_construct.anthropic_key is not None
        return self.orchestrator_construct.anthropic_key.secret_arn

    def role(self, logical_id: str, role_name: str, description: str, *, in_vpc: bool) -> iam.Role:
        return base.lambda_role(self, logical_id, role_name, description, in_vpc=in_vpc)

    def log_group(self, logical_id: str, function_name: str) -> logs.LogGroup:
        return base.log_group(self, logical_id, function_name)

    def code(self, name: str) -> lambda_.Code:
        return base.code(self.assets, name)

    def alarm(self, construct_id: str, metric: cw.IMetric, description: str, threshold: float = 1) -> cw.Alarm:
        return self.monitoring.alarm(construct_id, metric, description, threshold)

    def tool_metric(self, name: str, tool: ToolSpec, label: str | None = None) -> cw.Metric:
        return tool_metric(name, tool, label)

    def bedrock_arns(self) -> tuple[str, ...]:
        return bedrock_arns(self, self.config)

    def db_environment(self, function_name: str, db_user: str) -> dict[str, str]:
        return self.database.db_environment(function_name, db_user)

    def allow_database_from(self, sg: ec2.SecurityGroup) -> None:
        self.database.allow_from(sg)

    # Names the stack had before it was split, for code written against them (other branches).
    _role, _log_group, _code, _alarm, _tool_metric = role, log_group, code, alarm, tool_metric

    @property
    def cluster(self) -> rds.DatabaseCluster | None:
        return self.database.cluster

    @property
    def db_endpoint(self) -> str:
        return self.database.endpoint

    @property
    def db_port(self) -> str:
        return self.database.port

    @property
    def orchestrator_dlq(self) -> sqs.Queue | None:  # None in a teardown phase
        return self.orchestrator_construct.dlq if self.orchestrator_construct else None
