"""PostgreSQL: the demo Aurora cluster (TLS only, IAM auth, its master secret
rotated every 30 days, the repository's users and GRANTs applied by a custom
resource) or the imported ERP cluster (users applied with scripts/grants.sh).

``db_environment`` is how a function reaches it as its own user, and
``allow_from`` opens 5432 from a function's security group."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Aws, CustomResource, Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from cadencia_shared.catalog import DATABASE_NAME

from . import contract, db_users
from .base import ARCHITECTURE, L1_REASON, RUNTIME, acknowledge, log_group, pin
from .config import StackConfig
from .contract import Ids
from .network import Network
from .packaging import RDS_CA_BUNDLE_NAME, BuiltAsset

DB_ADMIN_USER = "cadencia_admin"
DEMO_CLUSTER_IDENTIFIER = "cadencia-erp-demo"
AURORA_VERSION = rds.AuroraPostgresEngineVersion.VER_17_7
POSTGRES_PORT_DESCRIPTION = "PostgreSQL (IAM auth, TLS)"


class Database:
    """Builds into the stack's own scope rather than a ``Flat`` construct: CDK names
    some of these resources from the construct path itself (the VPC's ``Name`` tags,
    the cluster's generated master secret: ``Names.uniqueId``), which ``Flat``
    cannot hide, and a renamed master secret would be replaced on deploy."""

    def __init__(self, scope: Construct, *, config: StackConfig, network: Network,
                 assets: Mapping[str, BuiltAsset]) -> None:
        self.scope = scope
        self.config = config
        self.assets = assets
        self.cluster: rds.DatabaseCluster | None = None
        if config.demo_database:
            self.cluster = self._demo_cluster(network)
            self.endpoint = self.cluster.cluster_endpoint.hostname
            self.port = "5432"
            self.peer: ec2.IConnectable = self.cluster
            self.cluster_for_grants: rds.IDatabaseCluster = self.cluster
        else:
            imported = config.imported
            assert imported is not None
            db_sg = ec2.SecurityGroup.from_security_group_id(
                self.scope, "ErpDbSecurityGroup", imported.security_group_id, mutable=imported.manage_ingress)
            self.cluster_for_grants = rds.DatabaseCluster.from_database_cluster_attributes(
                self.scope, "ErpCluster", cluster_identifier=imported.cluster_identifier,
                cluster_resource_identifier=imported.cluster_resource_id,
                cluster_endpoint_address=imported.endpoint, port=imported.port, security_groups=[db_sg])
            self.endpoint = imported.endpoint
            self.port = str(imported.port)
            self.peer = db_sg
        # The users and GRANTs, inside CloudFormation's state (demo cluster only).
        self.users: CustomResource | None = (
            self._database_users() if config.demo_database and config.deploy_database_users else None)

    def allow_from(self, sg: ec2.SecurityGroup) -> None:
        sg.connections.allow_to(self.peer, ec2.Port.tcp(int(self.port)), POSTGRES_PORT_DESCRIPTION)

    def grant_connect(self, role: iam.IRole, db_user: str) -> None:
        """rds-db:connect on dbuser:{cluster resource id}/{db_user}, nothing wider."""
        self.cluster_for_grants.grant_connect(role, db_user)

    def db_environment(self, function_name: str, db_user: str) -> dict[str, str]:
        """How a function reaches PostgreSQL as its own user: IAM auth over TLS that
        verifies the server (the RDS CA bundle ships in its asset)."""
        env = {
            "DB_HOST": self.endpoint,
            "DB_PORT": self.port,
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

    def _demo_cluster(self, network: Network) -> rds.DatabaseCluster:
        cfg = self.config
        sg = ec2.SecurityGroup(self.scope, "DbSecurityGroup", vpc=network.vpc, allow_all_outbound=False,
                               description="Demo Aurora cluster: PostgreSQL from the three tool Lambdas only")
        engine = rds.DatabaseClusterEngine.aurora_postgres(version=AURORA_VERSION)
        # Every connection must be TLS, the master's included (the tools also verify
        # the server: sslmode=verify-full with the RDS CA bundle).
        parameters = rds.ParameterGroup(self.scope, "DbClusterParameters", engine=engine,
                                        description="Cadencia demo cluster: TLS only",
                                        parameters={"rds.force_ssl": "1"})
        cluster = rds.DatabaseCluster(
            self.scope, "Db",
            engine=engine,
            parameter_group=parameters,
            cluster_identifier=DEMO_CLUSTER_IDENTIFIER,
            writer=rds.ClusterInstance.serverless_v2("writer", publicly_accessible=False,
                                                     auto_minor_version_upgrade=True),
            serverless_v2_min_capacity=cfg.db_min_capacity,
            serverless_v2_max_capacity=cfg.db_max_capacity,
            serverless_v2_auto_pause_duration=Duration.minutes(10) if cfg.db_min_capacity == 0 else None,
            vpc=network.vpc,
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
        pin(cluster, Ids.CLUSTER)
        assert cluster.secret is not None
        pin(cluster.secret, Ids.CLUSTER_SECRET_ATTACHMENT)  # the SecretTargetAttachment
        acknowledge(cluster, "AwsSolutions-RDS10", "Demo cluster with synthetic data, removed by scripts/limpeza.sh; "
                    "production uses the imported ERP cluster (database=imported), whose protection the ERP owns.")
        # The master secret rotates (single user: the master's own password) every 30
        # days; the rotation Lambda runs in the subnets with egress (it must reach
        # Secrets Manager) and gets ingress to the cluster.
        cluster.add_rotation_single_user(automatically_after=Duration.days(30), vpc_subnets=network.with_egress)
        return cluster

    def _database_users(self) -> CustomResource:
        cluster = self.cluster
        assert cluster is not None and cluster.secret is not None
        role = iam.Role(self.scope, "DbUsersRoleResource",
                        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="Applies the repository's DB users and GRANTs through the RDS Data API")
        pin(role, Ids.DB_USERS_ROLE)
        group = log_group(self.scope, Ids.DB_USERS_LOG_GROUP, contract.DB_USERS_FUNCTION_NAME)
        for actions, arn in (
            ("rds-data:ExecuteStatement", cluster.cluster_arn),
            ("secretsmanager:GetSecretValue", cluster.secret.secret_arn),
            # Acts only while CloudFormation is working on this very resource (handler.py);
            # a failed create's Delete also reads the stack's status (is it rolling back?).
            ("cloudformation:DescribeStackResource", Aws.STACK_ID),
            ("cloudformation:DescribeStacks", Aws.STACK_ID),
        ):
            role.add_to_policy(iam.PolicyStatement(actions=[actions], resources=[arn]))
        role.add_to_policy(iam.PolicyStatement(actions=list(contract.LOG_ACTIONS), resources=[group.log_group_arn]))
        asset = db_users.build_asset(seed_demo_data=self.config.seed_demo_data)
        fn = lambda_.Function(
            self.scope, "DbUsersFunctionResource",
            function_name=contract.DB_USERS_FUNCTION_NAME,
            description="Custom resource: the repository's schema.sql + grants.sql on create/update, revoke.sql on "
                        "delete (shipped in its code; the event names only their SHA-256)",
            runtime=RUNTIME, architecture=ARCHITECTURE,
            handler="handler.on_event",
            code=lambda_.Code.from_asset(str(asset.path)),
            role=role, log_group=group, timeout=Duration.minutes(5), memory_size=256,
            environment={
                # Where and for whom it acts comes from here, never from the event.
                "STACK_ID": Aws.STACK_ID,
                "LOGICAL_RESOURCE_ID": Ids.DB_USERS,
                "CLUSTER_ARN": cluster.cluster_arn,
                "SECRET_ARN": cluster.secret.secret_arn,
                "DATABASE": DATABASE_NAME,
            },
            # CloudFormation invokes it asynchronously; a retry after a crash could send a
            # second, different answer. It answers once or CloudFormation times out.
            retry_attempts=0,
        )
        pin(fn, Ids.DB_USERS_FUNCTION)
        acknowledge(fn, "AwsSolutions-L1", L1_REASON)
        fn.node.add_dependency(role)
        resource = CustomResource(
            self.scope, "DbUsersResource",
            service_token=fn.function_arn,
            resource_type="Custom::CadenciaDbUsers",
            # Only the digest: a changed SQL file changes it and re-runs the grants on update.
            properties={"SqlSha256": asset.sql_sha256},
            service_timeout=Duration.minutes(10),
        )
        pin(resource, Ids.DB_USERS)
        # After the writer instance exists (the Data API needs it), not just the cluster.
        # Secrets Manager rotates once as soon as the schedule exists, and a Data API call
        # made while it swaps the master password fails: the schedule comes after the users
        # (and, on destroy, goes before they are revoked).
        for child in cluster.node.find_all():
            if isinstance(child, (rds.CfnDBCluster, rds.CfnDBInstance, secretsmanager.CfnSecretTargetAttachment)):
                resource.node.add_dependency(child)
            elif isinstance(child, secretsmanager.CfnRotationSchedule):
                child.node.add_dependency(resource)
        return resource
