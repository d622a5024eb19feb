"""The Cadência agent on AWS: ledger, secrets, three tool Lambdas, the orchestrator,
the database (a demo Aurora cluster or an imported ERP cluster), the network
and the observability.

Policies are written statement by statement (no grant helper that adds actions
or index wildcards); ``infra/contract.py`` lists what they must add up to, and the
tests compare the two on the synthesized template.
"""

from __future__ import annotations

import json

from aws_cdk import (
    Acknowledgment,
    AssetHashType,
    Aws,
    CfnOutput,
    CustomResource,
    Duration,
    RemovalPolicy,
    Stack,
    Validations,
)
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cadencia_shared import ledger as ledger_schema
from cadencia_shared.catalog import (
    ORCHESTRATOR_FUNCTION_NAME,
    ATUALIZAR_CADASTRO,
    DATABASE_NAME,
    EMITIR_REEMBOLSO,
    GATEWAY_SECRET_NAME,
    LEDGER_TABLE,
    TOOLS,
    ToolSpec,
)
from cadencia_shared.observability import NAMESPACE, TOOL_DIMENSION, Metric

from . import contract, db_users
from .config import ANTHROPIC_KEY_SECRET_NAME, StackConfig
from .contract import Ids
from .channel import add_whatsapp_channel
from .packaging import RDS_CA_BUNDLE_NAME, BuiltAsset
from .approvals import add_approval_decisions, approval_environment
from .handoffs import add_handoff_bus
from .controls import add_audit_table, add_control_alarms
from .reconciler import add_refund_reconciler

RUNTIME = lambda_.Runtime.PYTHON_3_12  # must match packaging.LAMBDA_PYTHON_VERSION
ARCHITECTURE = lambda_.Architecture.ARM_64
LOG_RETENTION = logs.RetentionDays.ONE_MONTH
TOOL_TIMEOUTS_S = {"consultar_status_pedido": 5, "emitir_reembolso": 8, "atualizar_cadastro": 5}
ORCHESTRATOR_TIMEOUT_S = 90
GATEWAY_TIMEOUT_S = 3
# Longer than the refund's own timeout: a claim in progress is never taken over
# while the invocation that holds it may still be running.
REFUND_CLAIM_LEASE_S = 30
# Hours a claim may be re-sent with its Idempotency-Key after its first possible send:
# under Stripe's 24 h (keys may be pruned after that), so a re-send is never a new debit.
GATEWAY_IDEMPOTENCY_WINDOW_H = 23
RETRY_CEILING = 4
DB_ADMIN_USER = "cadencia_admin"
DEMO_CLUSTER_IDENTIFIER = "cadencia-erp-demo"
AURORA_VERSION = rds.AuroraPostgresEngineVersion.VER_17_7
DASHBOARD_NAME = "Cadencia-AgenteAtendimento"


def _pin(construct: Construct, logical_id: str) -> None:
    """Give a construct's CloudFormation resource the contract's logical id."""
    construct.node.default_child.override_logical_id(logical_id)  # type: ignore[union-attr]


def _ack(construct: Construct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


L1_REASON = ("python3.12 is a supported Lambda runtime (Amazon Linux 2023) chosen on purpose: the code is tested "
             "on Python 3.11 and every bundled wheel is built for cp312; moving to a newer runtime is a deliberate "
             "change of packaging.LAMBDA_PYTHON_VERSION together with the project's Python, not a silent bump.")


class CadenciaStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        assets: dict[str, BuiltAsset],
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, description="Cadência support agent (Lab 87): tools, ledger, orchestrator",
                         **kwargs)
        self.config = config
        self.assets = assets

        self.ledger = self._ledger()
        self.gateway_secret = self._gateway_secret()
        self._network_and_database()
        self.db_users = self._database_users() if config.demo_database and config.deploy_database_users else None
        self.alarm_topic = self._alarm_topic()
        # Alarms made by other constructs (reconciler, channel): the topic policy lets
        # CloudWatch publish for exactly these and the stack's own.
        self.extra_alarms: list[cw.Alarm] = []
        self.tool_functions: dict[str, lambda_.Function] = {}
        if config.deploy_functions:
            for tool in TOOLS.values():
                self.tool_functions[tool.name] = self._tool_function(tool)
            self.orchestrator = self._orchestrator()
            self.handoff_bus = add_handoff_bus(self, self.orchestrator, self.orchestrator.role)
            self.reconciler = add_refund_reconciler(self)
            add_whatsapp_channel(self)
            self.decisions = add_approval_decisions(self)
            add_control_alarms(self)
            # every turn runner and the approval decisions audit on the same hash chain
            self.audit_table = add_audit_table(self, self.orchestrator, self.whatsapp_consumer,
                                               self.whatsapp_human_reply, self.decisions)
        self._observability()
        self._outputs()

    # --- ledger and secrets -------------------------------------------------------

    def _ledger(self) -> dynamodb.Table:
        # Mirrors cadencia_shared.ledger.table_definition(), the module that owns the keys.
        definition = ledger_schema.table_definition(LEDGER_TABLE)
        types = {a["AttributeName"]: dynamodb.AttributeType(
            {"S": "STRING", "N": "NUMBER", "B": "BINARY"}[a["AttributeType"]])
            for a in definition["AttributeDefinitions"]}
        (hash_key,) = [k["AttributeName"] for k in definition["KeySchema"] if k["KeyType"] == "HASH"]
        table = dynamodb.Table(
            self, "Ledger",
            table_name=definition["TableName"],
            partition_key=dynamodb.Attribute(name=hash_key, type=types[hash_key]),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            time_to_live_attribute=ledger_schema.TTL_ATTRIBUTE,
            # A ledger of real refunds outlives the stack: `cdk destroy` leaves it,
            # scripts/limpeza.sh deletes it explicitly and checks it is gone.
            removal_policy=RemovalPolicy.RETAIN,
            deletion_protection=self.config.ledger_deletion_protection,
        )
        for gsi in definition["GlobalSecondaryIndexes"]:
            keys = {k["KeyType"]: k["AttributeName"] for k in gsi["KeySchema"]}
            table.add_global_secondary_index(
                index_name=gsi["IndexName"],
                partition_key=dynamodb.Attribute(name=keys["HASH"], type=types[keys["HASH"]]),
                sort_key=dynamodb.Attribute(name=keys["RANGE"], type=types[keys["RANGE"]]) if "RANGE" in keys else None,
                projection_type=dynamodb.ProjectionType(gsi["Projection"]["ProjectionType"]),
            )
        _pin(table, Ids.LEDGER)
        return table

    def _gateway_secret(self) -> secretsmanager.Secret:
        # The deployer replaces the generated token with the gateway's real one
        # (docs/infrastructure.md); the JSON shape {"token": ...} is what the refund reads.
        secret = secretsmanager.Secret(
            self, "GatewaySecretResource",
            secret_name=GATEWAY_SECRET_NAME,
            description="Payment gateway bearer token, read only by cadencia-emitir-reembolso",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template="{}", generate_string_key="token", exclude_punctuation=True, password_length=48),
            removal_policy=RemovalPolicy.DESTROY,
        )
        _pin(secret, Ids.GATEWAY_SECRET)
        _ack(secret, "AwsSolutions-SMG4", "The token is issued by the payment gateway; it is rotated in the "
             "gateway's console and then written here (put-secret-value). Secrets Manager cannot mint it.")
        return secret

    # --- network and database -------------------------------------------------------

    def _network_and_database(self) -> None:
        cfg = self.config
        self.tool_security_groups: dict[str, ec2.SecurityGroup] = {}
        if cfg.demo_database:
            self.vpc = self._demo_vpc()
            self.isolated = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
            self.with_egress = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        else:
            imported = cfg.imported
            assert imported is not None
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self, "Vpc", vpc_id=imported.vpc_id, availability_zones=list(imported.availability_zones),
                private_subnet_ids=list(imported.private_subnet_ids))
            self.isolated = self.with_egress = ec2.SubnetSelection(subnets=self.vpc.private_subnets)

        for tool in TOOLS.values():
            sg = ec2.SecurityGroup(
                self, f"{contract.pascal(tool.package)}SecurityGroup", vpc=self.vpc, allow_all_outbound=False,
                description=f"{tool.function_name}: egress to PostgreSQL" + (
                    " and HTTPS (gateway, Secrets Manager, DynamoDB)" if tool is EMITIR_REEMBOLSO else
                    " and HTTPS to DynamoDB (gateway endpoint)" if tool is ATUALIZAR_CADASTRO else " only"))
            if tool in (EMITIR_REEMBOLSO, ATUALIZAR_CADASTRO):
                # Refund: via the NAT to the gateway and Secrets Manager, and the DynamoDB
                # endpoint. Profile: its subnets are isolated, so the only HTTPS route is the
                # DynamoDB gateway endpoint (a prefix list id cannot be resolved offline).
                # The status tool gets no HTTPS at all: PostgreSQL only.
                sg.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS (see the subnet's routes)")
            self.tool_security_groups[tool.name] = sg

        if cfg.demo_database:
            self.cluster = self._demo_cluster()
            self.db_endpoint = self.cluster.cluster_endpoint.hostname
            self.db_port = "5432"
            self.db_peer: ec2.IConnectable = self.cluster
            for sg in self.tool_security_groups.values():
                sg.connections.allow_to(self.cluster, ec2.Port.tcp(5432), "PostgreSQL (IAM auth, TLS)")
            self.cluster_for_grants: rds.IDatabaseCluster = self.cluster
        else:
            imported = cfg.imported
            assert imported is not None
            db_sg = ec2.SecurityGroup.from_security_group_id(
                self, "ErpDbSecurityGroup", imported.security_group_id, mutable=imported.manage_ingress)
            self.cluster_for_grants = rds.DatabaseCluster.from_database_cluster_attributes(
                self, "ErpCluster", cluster_identifier=imported.cluster_identifier,
                cluster_resource_identifier=imported.cluster_resource_id,
                cluster_endpoint_address=imported.endpoint, port=imported.port, security_groups=[db_sg])
            self.db_endpoint = imported.endpoint
            self.db_port = str(imported.port)
            self.db_peer = db_sg
            for sg in self.tool_security_groups.values():
                sg.connections.allow_to(db_sg, ec2.Port.tcp(imported.port), "PostgreSQL (IAM auth, TLS)")

    def _demo_vpc(self) -> ec2.Vpc:
        flow_group = logs.LogGroup(self, "FlowLogGroup", retention=logs.RetentionDays.TWO_WEEKS,
                                   removal_policy=RemovalPolicy.DESTROY)
        _pin(flow_group, Ids.FLOW_LOG_GROUP)
        flow_role = iam.Role(self, "FlowLogRole", assumed_by=iam.ServicePrincipal("vpc-flow-logs.amazonaws.com"),
                             description="VPC flow logs to their log group")
        _pin(flow_role, Ids.FLOW_LOG_ROLE)
        vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.87.0.0/16"),
            max_azs=2,
            # One NAT gateway: only the refund Lambda needs the internet (the payment
            # gateway, Secrets Manager). A second one (+$32.85/month) removes the
            # single-AZ dependency; docs/infrastructure.md costs both.
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="publica", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24,
                                        map_public_ip_on_launch=False),
                ec2.SubnetConfiguration(name="saida", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=24),
                ec2.SubnetConfiguration(name="isolada", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24),
            ],
            # Nothing uses the default security group; restricting it takes a
            # custom-resource Lambda whose role carries a managed-policy wildcard.
            restrict_default_security_group=False,
            flow_logs={"todos": ec2.FlowLogOptions(
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_group, flow_role),
                traffic_type=ec2.FlowLogTrafficType.ALL)},
        )
        # Free, and it keeps ledger traffic off the NAT (and the isolated subnets
        # need it at all: the profile tool writes its audit record from there).
        endpoint = vpc.add_gateway_endpoint(
            "DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                     ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
        # Endpoint policy: through this VPC, DynamoDB answers only the ledger's three item calls.
        endpoint.add_to_policy(iam.PolicyStatement(
            principals=[iam.AnyPrincipal()],
            actions=["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
            resources=[self.ledger.table_arn]))
        # ... and the refund reconciler's Query on the sparse index of unsettled claims.
        endpoint.add_to_policy(iam.PolicyStatement(
            principals=[iam.AnyPrincipal()], actions=["dynamodb:Query"],
            resources=[f"{self.ledger.table_arn}/index/{ledger_schema.GSI_UNSETTLED}"]))
        _pin(endpoint, Ids.DYNAMODB_ENDPOINT)
        return vpc

    def _demo_cluster(self) -> rds.DatabaseCluster:
        cfg = self.config
        sg = ec2.SecurityGroup(self, "DbSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
                               description="Demo Aurora cluster: PostgreSQL from the three tool Lambdas only")
        engine = rds.DatabaseClusterEngine.aurora_postgres(version=AURORA_VERSION)
        # Every connection must be TLS, the master's included (the tools also verify
        # the server: sslmode=verify-full with the RDS CA bundle).
        parameters = rds.ParameterGroup(self, "DbClusterParameters", engine=engine,
                                        description="Cadencia demo cluster: TLS only",
                                        parameters={"rds.force_ssl": "1"})
        cluster = rds.DatabaseCluster(
            self, "Db",
            engine=engine,
            parameter_group=parameters,
            cluster_identifier=DEMO_CLUSTER_IDENTIFIER,
            writer=rds.ClusterInstance.serverless_v2("writer", publicly_accessible=False,
                                                     auto_minor_version_upgrade=True),
            serverless_v2_min_capacity=cfg.db_min_capacity,
            serverless_v2_max_capacity=cfg.db_max_capacity,
            serverless_v2_auto_pause_duration=Duration.minutes(10) if cfg.db_min_capacity == 0 else None,
            vpc=self.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            security_groups=[sg],
            credentials=rds.Credentials.from_generated_secret(DB_ADMIN_USER, secret_name="cadencia/db-admin"),
            default_database_name=DATABASE_NAME,
            iam_authentication=True,
            # The Data API stays on: it is how the DB-users custom resource reaches the
            # cluster (isolated subnets) at deploy AND at destroy. Switching it off after
            # the deploy would make `cdk destroy` (and a rollback) fail to revoke the
            # users; replacing it by a psycopg connection from a Lambda in the VPC means
            # bundling psycopg, an ENI and Secrets Manager egress for a function that runs
            # twice per stack lifetime. What closes the standing path instead: the function
            # runs only the SQL it ships (the event names a digest), only for this stack
            # while CloudFormation works on the resource, and answers only CloudFormation's
            # response bucket; the master secret rotates every 30 days; only this role and
            # the rotation function are granted to read it (docs/infrastructure.md).
            enable_data_api=True,
            storage_encrypted=True,
            backup=rds.BackupProps(retention=Duration.days(7)),
            deletion_protection=False,
            removal_policy=RemovalPolicy.DESTROY,
        )
        _pin(cluster, Ids.CLUSTER)
        assert cluster.secret is not None
        _pin(cluster.secret, Ids.CLUSTER_SECRET_ATTACHMENT)  # the SecretTargetAttachment
        _ack(cluster, "AwsSolutions-RDS10", "Demo cluster with synthetic data, removed by scripts/limpeza.sh; "
             "production uses the imported ERP cluster (database=imported), whose protection the ERP owns.")
        # The master secret rotates (single user: the master's own password) every 30
        # days; the rotation Lambda runs in the subnets with egress (it must reach
        # Secrets Manager) and gets ingress to the cluster.
        cluster.add_rotation_single_user(automatically_after=Duration.days(30), vpc_subnets=self.with_egress)
        return cluster

    def _database_users(self) -> CustomResource:
        role = iam.Role(self, "DbUsersRoleResource", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="Applies the repository's DB users and GRANTs through the RDS Data API")
        _pin(role, Ids.DB_USERS_ROLE)
        log_group = self._log_group(Ids.DB_USERS_LOG_GROUP, contract.DB_USERS_FUNCTION_NAME)
        assert self.cluster.secret is not None
        role.add_to_policy(iam.PolicyStatement(actions=["rds-data:ExecuteStatement"],
                                               resources=[self.cluster.cluster_arn]))
        role.add_to_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"],
                                               resources=[self.cluster.secret.secret_arn]))
        # Acts only while CloudFormation is working on this very resource (handler.py).
        role.add_to_policy(iam.PolicyStatement(actions=["cloudformation:DescribeStackResource"],
                                               resources=[Aws.STACK_ID]))
        role.add_to_policy(iam.PolicyStatement(actions=list(contract.LOG_ACTIONS),
                                               resources=[log_group.log_group_arn]))
        asset = db_users.build_asset(seed_demo_data=self.config.seed_demo_data)
        fn = lambda_.Function(
            self, "DbUsersFunctionResource",
            function_name=contract.DB_USERS_FUNCTION_NAME,
            description="Custom resource: the repository's schema.sql + grants.sql on create/update, revoke.sql on "
                        "delete (shipped in its code; the event names only their SHA-256)",
            runtime=RUNTIME, architecture=ARCHITECTURE,
            handler="handler.on_event",
            code=lambda_.Code.from_asset(str(asset.path)),
            role=role, log_group=log_group, timeout=Duration.minutes(5), memory_size=256,
            environment={
                # Where and for whom it acts comes from here, never from the event.
                "STACK_ID": Aws.STACK_ID,
                "LOGICAL_RESOURCE_ID": Ids.DB_USERS,
                "CLUSTER_ARN": self.cluster.cluster_arn,
                "SECRET_ARN": self.cluster.secret.secret_arn,
                "DATABASE": DATABASE_NAME,
            },
            # CloudFormation invokes it asynchronously; a retry after a crash could send a
            # second, different answer. It answers once or CloudFormation times out.
            retry_attempts=0,
        )
        _pin(fn, Ids.DB_USERS_FUNCTION)
        _ack(fn, "AwsSolutions-L1", L1_REASON)
        fn.node.add_dependency(role)
        resource = CustomResource(
            self, "DbUsersResource",
            service_token=fn.function_arn,
            resource_type="Custom::CadenciaDbUsers",
            # Only the digest: a changed SQL file changes it and re-runs the grants on update.
            properties={"SqlSha256": asset.sql_sha256},
            service_timeout=Duration.minutes(10),
        )
        _pin(resource, Ids.DB_USERS)
        # After the writer instance exists (the Data API needs it), not just the cluster.
        # Secrets Manager rotates once as soon as the schedule exists, and a Data API call
        # made while it swaps the master password fails: the schedule comes after the users
        # (and, on destroy, goes before they are revoked).
        for child in self.cluster.node.find_all():
            if isinstance(child, (rds.CfnDBCluster, rds.CfnDBInstance, secretsmanager.CfnSecretTargetAttachment)):
                resource.node.add_dependency(child)
            elif isinstance(child, secretsmanager.CfnRotationSchedule):
                child.node.add_dependency(resource)
        return resource

    # --- functions ---------------------------------------------------------------

    def _log_group(self, logical_id: str, function_name: str) -> logs.LogGroup:
        group = logs.LogGroup(self, logical_id + "Resource", log_group_name=f"/aws/lambda/{function_name}",
                              retention=LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY)
        _pin(group, logical_id)
        return group

    def _role(self, logical_id: str, role_name: str, description: str, *, in_vpc: bool) -> iam.Role:
        role = iam.Role(
            self, logical_id + "Resource",
            role_name=role_name,
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=description,
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(contract.ENI_MANAGEMENT.name)]
            if in_vpc else [],
        )
        _pin(role, logical_id)
        if in_vpc:
            _ack(role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{contract.ENI_MANAGEMENT.name}]",
                 contract.ENI_MANAGEMENT.why)
        _ack(role, "AwsSolutions-IAM5[Resource::*]", "Only xray:PutTraceSegments and xray:PutTelemetryRecords "
             "(active tracing), which have no resource-level permissions; every other statement names its ARN "
             "(tests/infra/test_contract.py).")
        return role

    def _code(self, name: str) -> lambda_.Code:
        asset = self.assets[name]
        return lambda_.Code.from_asset(str(asset.path), asset_hash=asset.asset_hash,
                                       asset_hash_type=AssetHashType.CUSTOM)

    def db_environment(self, function_name: str, db_user: str) -> dict[str, str]:
        """How a function reaches PostgreSQL as its own user: IAM auth over TLS that
        verifies the server (the RDS CA bundle ships in its asset)."""
        env = {
            "DB_HOST": self.db_endpoint,
            "DB_PORT": self.db_port,
            "DB_NAME": DATABASE_NAME,
            "DB_USER": db_user,
            "DB_AUTH": "iam",
            "POWERTOOLS_LOG_LEVEL": "INFO",
        }
        if self.assets[function_name].ca_bundle:
            env.update(DB_SSL_MODE="verify-full", DB_SSL_ROOT_CERT=f"/var/task/{RDS_CA_BUNDLE_NAME}")
        else:  # only reachable with -c allowUnverifiedDbTls=true (packaging fails otherwise)
            env["DB_SSL_MODE"] = "require"
        return env

    def _tool_function(self, tool: ToolSpec) -> lambda_.Function:
        cfg = self.config
        role = self._role(Ids.role(tool), contract.role_name_for(tool),
                          f"Tool {tool.name}: its DB user, and only what its code calls", in_vpc=True)
        log_group = self._log_group(Ids.log_group(tool), tool.function_name)
        role.add_to_policy(iam.PolicyStatement(actions=list(contract.LOG_ACTIONS), resources=[log_group.log_group_arn]))
        # rds-db:connect on dbuser:{cluster resource id}/{this tool's user}, nothing wider.
        self.cluster_for_grants.grant_connect(role, tool.db_user)

        env = self.db_environment(tool.function_name, tool.db_user)
        if tool is EMITIR_REEMBOLSO:
            role.add_to_policy(iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                resources=[self.ledger.table_arn]))
            role.add_to_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"],
                                                   resources=[self.gateway_secret.secret_arn]))
            env.update(LEDGER_TABLE=self.ledger.table_name, GATEWAY_URL=cfg.gateway_url,
                       GATEWAY_SECRET_NAME=GATEWAY_SECRET_NAME, GATEWAY_TIMEOUT_S=str(GATEWAY_TIMEOUT_S),
                       REFUND_CLAIM_LEASE_S=str(REFUND_CLAIM_LEASE_S),
                       GATEWAY_IDEMPOTENCY_WINDOW_H=str(GATEWAY_IDEMPOTENCY_WINDOW_H))
        elif tool is ATUALIZAR_CADASTRO:
            role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:PutItem"], resources=[self.ledger.table_arn]))
            env["LEDGER_TABLE"] = self.ledger.table_name

        fn = lambda_.Function(
            self, Ids.function(tool) + "Resource",
            function_name=tool.function_name,
            description=f"Tool {tool.name} (Lab 87)",
            runtime=RUNTIME, architecture=ARCHITECTURE,
            handler=tool.handler,
            code=self._code(tool.function_name),
            role=role,
            log_group=log_group,
            timeout=Duration.seconds(TOOL_TIMEOUTS_S[tool.name]),
            memory_size=512,
            environment=env,
            tracing=lambda_.Tracing.ACTIVE,
            vpc=self.vpc,
            vpc_subnets=self.with_egress if tool is EMITIR_REEMBOLSO else self.isolated,
            security_groups=[self.tool_security_groups[tool.name]],
            reserved_concurrent_executions=cfg.tool_concurrency[tool.name] if cfg.reserved_concurrency else None,
            # Tools are invoked synchronously by the orchestrator, which counts every
            # attempt. An asynchronous invoke must never be retried by Lambda behind
            # the ceiling's back (for a refund that would be a second debit attempt).
            retry_attempts=0,
        )
        _pin(fn, Ids.function(tool))
        _ack(fn, "AwsSolutions-L1", L1_REASON)
        if self.db_users is not None:
            # Created after the DB users exist; deleted (with the role) before they are revoked.
            fn.node.add_dependency(self.db_users)
            role.node.add_dependency(self.db_users)
        return fn

    def _orchestrator(self) -> lambda_.Function:
        cfg = self.config
        role = self._role(Ids.ORCHESTRATOR_ROLE, "cadencia-orquestrador-role",
                          "Orchestrator: ledger items, the three tools, the model", in_vpc=False)
        log_group = self._log_group(Ids.ORCHESTRATOR_LOG_GROUP, ORCHESTRATOR_FUNCTION_NAME)
        role.add_to_policy(iam.PolicyStatement(actions=list(contract.LOG_ACTIONS), resources=[log_group.log_group_arn]))
        role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                                               resources=[self.ledger.table_arn]))
        # Unqualified ARNs only (grant_invoke would add "<arn>:*" for every version/alias).
        role.add_to_policy(iam.PolicyStatement(
            actions=["lambda:InvokeFunction"],
            resources=[self.tool_functions[t.name].function_arn for t in TOOLS.values()]))

        env = {
            "MODEL_PROVIDER": cfg.model_provider,
            "MODEL_ID": cfg.model_id,
            "LEDGER_TABLE": self.ledger.table_name,
            "TETO_TENTATIVAS": str(RETRY_CEILING),
            "TOOL_INVOKER": "aws",
            "TOOL_FUNCTIONS": json.dumps({t.name: t.function_name for t in TOOLS.values()}, sort_keys=True),
            "POWERTOOLS_LOG_LEVEL": "INFO",
            **approval_environment(self),  # the confirmation gate's policy
        }
        if cfg.uses_bedrock:
            role.add_to_policy(iam.PolicyStatement(actions=["bedrock:InvokeModel"],
                                                   resources=list(self._bedrock_arns())))
        else:
            key = secretsmanager.Secret(
                self, "AnthropicApiKeySecretResource",
                secret_name=ANTHROPIC_KEY_SECRET_NAME,
                description="Anthropic API key (plain text) for cadencia-orquestrador",
                generate_secret_string=secretsmanager.SecretStringGenerator(exclude_punctuation=True,
                                                                           password_length=48),
                removal_policy=RemovalPolicy.DESTROY,
            )
            _pin(key, Ids.ANTHROPIC_SECRET)
            _ack(key, "AwsSolutions-SMG4", "An Anthropic API key is issued in the Anthropic console; it is rotated "
                 "there and written here. Secrets Manager cannot mint it.")
            role.add_to_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"],
                                                   resources=[key.secret_arn]))
            env["ANTHROPIC_API_KEY_SECRET_NAME"] = ANTHROPIC_KEY_SECRET_NAME

        dlq = sqs.Queue(
            self, "OrchestratorDlqResource",
            queue_name="cadencia-orquestrador-dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        _pin(dlq, Ids.ORCHESTRATOR_DLQ)
        self.orchestrator_dlq = dlq

        fn = lambda_.Function(
            self, Ids.ORCHESTRATOR_FUNCTION + "Resource",
            function_name=ORCHESTRATOR_FUNCTION_NAME,
            description="Orchestrator: the model proposes, the code decides (Lab 87)",
            runtime=RUNTIME, architecture=ARCHITECTURE,
            handler="orchestrator.handler.lambda_handler",
            code=self._code(ORCHESTRATOR_FUNCTION_NAME),
            role=role,
            log_group=log_group,
            timeout=Duration.seconds(ORCHESTRATOR_TIMEOUT_S),
            memory_size=1024,
            environment=env,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=cfg.orchestrator_concurrency if cfg.reserved_concurrency else None,
            # Outside the VPC: it needs DynamoDB, Lambda and the model API only, and
            # this way needs no NAT for the model's traffic.
            dead_letter_queue=dlq,
            retry_attempts=2,  # the inbound-message record makes a redelivery idempotent
            max_event_age=Duration.hours(1),
        )
        _pin(fn, Ids.ORCHESTRATOR_FUNCTION)
        _ack(fn, "AwsSolutions-L1", L1_REASON)
        return fn

    def _bedrock_arns(self) -> tuple[str, ...]:
        cfg = self.config
        arns = []
        if cfg.model_is_inference_profile:
            arns.append(self.format_arn(service="bedrock", resource="inference-profile", resource_name=cfg.model_id))
            regions: tuple[str, ...] = cfg.bedrock_regions
        else:
            regions = (self.region,)
        for region in regions:
            arns.append(self.format_arn(service="bedrock", region=region, account="", resource="foundation-model",
                                        resource_name=cfg.foundation_model_id))
        return tuple(arns)

    # --- observability ------------------------------------------------------------

    def _alarm_topic(self) -> sns.Topic:
        topic = sns.Topic(self, "AlarmTopic", topic_name="cadencia-alarmes", enforce_ssl=True,
                          display_name="Cadencia agent alarms")
        if self.config.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(self.config.alarm_email))
        return topic

    def _allow_alarms_to_publish(self, alarms: list[cw.Alarm]) -> None:
        """enforce_ssl=True makes a TopicPolicy that holds only a Deny and replaces the
        topic's default policy: without this Allow, CloudWatch cannot publish and no
        alarm ever notifies. Scoped to this account and to exactly these alarms
        (aws:SourceAccount, aws:SourceArn: the confused-deputy guard AWS documents for
        service principals)."""
        self.alarm_topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"],
            resources=[self.alarm_topic.topic_arn],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                        "ArnEquals": {"aws:SourceArn": [alarm.alarm_arn for alarm in alarms]}},
        ))

    def _tool_metric(self, name: str, tool: ToolSpec, label: str | None = None) -> cw.Metric:
        # No label on alarm metrics: a label turns the alarm into a metric-math alarm.
        return cw.Metric(namespace=NAMESPACE, metric_name=name, dimensions_map={TOOL_DIMENSION: tool.name},
                         statistic="Sum", period=Duration.minutes(5), label=label)

    def _alarm(self, construct_id: str, metric: cw.IMetric, description: str, threshold: float = 1) -> cw.Alarm:
        alarm = cw.Alarm(
            self, construct_id, metric=metric, threshold=threshold, evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING, alarm_description=description)
        alarm.add_alarm_action(cw_actions.SnsAction(self.alarm_topic))
        return alarm

    def _observability(self) -> None:
        alarms: list[cw.Alarm] = []
        for tool in TOOLS.values():
            p = contract.pascal(tool.package)
            alarms.append(self._alarm(
                f"{p}CeilingAlarm", self._tool_metric(Metric.CEILING_INTERRUPTIONS, tool),
                f"The retry ceiling interrupted {tool.name}: the model's loop insisted past "
                f"{RETRY_CEILING} attempts (the loop misbehaved, not just a refused action)."))
        alarms.append(self._alarm(
            "UnknownRefundOutcomeAlarm", self._tool_metric(Metric.UNKNOWN_OUTCOMES, EMITIR_REEMBOLSO),
            "A refund reached the gateway without a definite answer; it is reconciled by idempotency key, "
            "but someone should look."))

        function_names = [t.function_name for t in TOOLS.values()] + [ORCHESTRATOR_FUNCTION_NAME]
        for name in function_names:
            p = contract.pascal(name.removeprefix("cadencia-").replace("-", "_"))
            for metric_name in ("Errors", "Throttles"):
                metric = cw.Metric(namespace="AWS/Lambda", metric_name=metric_name,
                                   dimensions_map={"FunctionName": name}, statistic="Sum", period=Duration.minutes(5))
                alarms.append(self._alarm(f"{p}{metric_name}Alarm", metric, f"{name}: {metric_name} in 5 minutes"))
        if self.config.deploy_functions:
            alarms.append(self._alarm(
                "OrchestratorDlqAlarm", self.orchestrator_dlq.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(5), statistic="Maximum"),
                "A customer message failed every orchestrator attempt and waits in the dead-letter queue."))

        self._allow_alarms_to_publish(alarms + self.extra_alarms)

        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=DASHBOARD_NAME)
        tools = list(TOOLS.values())

        def per_tool(name: str) -> list[cw.IMetric]:
            return [self._tool_metric(name, t, t.name) for t in tools]

        dashboard.add_widgets(
            cw.GraphWidget(title="Interrupções por teto (InterrupcoesPorTeto)", left=per_tool(Metric.CEILING_INTERRUPTIONS),
                           width=12),
            cw.GraphWidget(title="Erros de ferramenta (ErrosDeFerramenta)", left=per_tool(Metric.TOOL_ERRORS), width=12),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Reembolsos reais vs. bloqueios por idempotência", width=12, left=[
                self._tool_metric(Metric.REAL_REFUNDS, EMITIR_REEMBOLSO, "ReembolsosReais"),
                self._tool_metric(Metric.IDEMPOTENCY_BLOCKS, EMITIR_REEMBOLSO, "BloqueiosPorIdempotencia"),
                self._tool_metric(Metric.UNKNOWN_OUTCOMES, EMITIR_REEMBOLSO, "ResultadosDesconhecidos"),
            ]),
            cw.GraphWidget(title="Chamadas permitidas e recusas", width=12,
                           left=per_tool(Metric.CALLS_ALLOWED), right=per_tool(Metric.TOOL_REFUSALS)),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Lambda: erros e throttles", width=12, left=[
                cw.Metric(namespace="AWS/Lambda", metric_name=m, dimensions_map={"FunctionName": n}, statistic="Sum",
                          period=Duration.minutes(5), label=f"{n} {m}")
                for n in function_names for m in ("Errors", "Throttles")]),
            cw.AlarmStatusWidget(title="Alarmes", alarms=alarms, width=12),
        )

    # --- what infra/channel.py (the WhatsApp channel) builds with ----------------------
    runtime, architecture, l1_reason = RUNTIME, ARCHITECTURE, L1_REASON
    orchestrator_timeout_s, retry_ceiling = ORCHESTRATOR_TIMEOUT_S, str(RETRY_CEILING)
    pin = staticmethod(_pin)

    @staticmethod
    def ack(construct: Construct, rule: str, reason: str) -> None:
        _ack(construct, rule, reason)  # looked up at call time (the stale-acknowledgement test replaces it)

    def role(self, logical_id: str, role_name: str, description: str, *, in_vpc: bool) -> iam.Role:
        return self._role(logical_id, role_name, description, in_vpc=in_vpc)

    def log_group(self, logical_id: str, function_name: str) -> logs.LogGroup:
        return self._log_group(logical_id, function_name)

    def code(self, name: str) -> lambda_.Code:
        return self._code(name)

    def alarm(self, construct_id: str, metric: cw.IMetric, description: str) -> cw.Alarm:
        return self._alarm(construct_id, metric, description)

    def bedrock_arns(self) -> tuple[str, ...]:
        return self._bedrock_arns()

    @property
    def anthropic_key_arn(self) -> str:
        return self.node.find_child("AnthropicApiKeySecretResource").secret_arn  # type: ignore[attr-defined]

    def allow_database_from(self, sg: ec2.SecurityGroup) -> None:
        sg.connections.allow_to(self.db_peer, ec2.Port.tcp(int(self.db_port)), "PostgreSQL (IAM auth, TLS)")

    def _outputs(self) -> None:
        CfnOutput(self, "LedgerTableName", value=self.ledger.table_name)
        CfnOutput(self, "OrchestratorFunctionName", value=ORCHESTRATOR_FUNCTION_NAME)
        CfnOutput(self, "GatewaySecretArn", value=self.gateway_secret.secret_arn)
        CfnOutput(self, "DatabaseMode", value=self.config.database)
        CfnOutput(self, "DbEndpoint", value=self.db_endpoint)
        if self.config.demo_database:
            assert self.cluster.secret is not None
            CfnOutput(self, "DbClusterArn", value=self.cluster.cluster_arn)
            CfnOutput(self, "DbSecretArn", value=self.cluster.secret.secret_arn)
        CfnOutput(self, "ModelProvider", value=self.config.model_provider)
        CfnOutput(self, "TeardownPhase", value=self.config.teardown or "none")
        CfnOutput(self, "DashboardName", value=DASHBOARD_NAME)
        CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn)
