"""The network: the demo VPC (two AZs, one NAT, flow logs, a DynamoDB gateway
endpoint whose policy allows only what the ledger's users call), or the
imported ERP VPC. Exposes the two subnet selections the functions use:
``isolated`` (no route out: PostgreSQL and the DynamoDB endpoint only) and
``with_egress`` (through the NAT: the payment gateway, Secrets Manager, SQS)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from cadencia_shared import ledger as ledger_schema

from .base import pin
from .config import StackConfig
from .contract import Ids
from .ledger import Ledger


class Network:
    """Builds into the stack's own scope rather than a ``Flat`` construct: CDK names
    some of these resources from the construct path itself (the VPC's ``Name`` tags,
    the cluster's generated master secret: ``Names.uniqueId``), which ``Flat``
    cannot hide, and a renamed master secret would be replaced on deploy."""

    def __init__(self, scope: Construct, *, config: StackConfig, ledger: Ledger) -> None:
        self.scope = scope
        if config.demo_database:
            self.vpc: ec2.IVpc = self._demo_vpc(ledger)
            self.isolated = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
            self.with_egress = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        else:
            imported = config.imported
            assert imported is not None
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self.scope, "Vpc", vpc_id=imported.vpc_id, availability_zones=list(imported.availability_zones),
                private_subnet_ids=list(imported.private_subnet_ids))
            self.isolated = self.with_egress = ec2.SubnetSelection(subnets=self.vpc.private_subnets)

    def _demo_vpc(self, ledger: Ledger) -> ec2.Vpc:
        flow_group = logs.LogGroup(self.scope, "FlowLogGroup", retention=logs.RetentionDays.TWO_WEEKS,
                                   removal_policy=RemovalPolicy.DESTROY)
        pin(flow_group, Ids.FLOW_LOG_GROUP)
        flow_role = iam.Role(self.scope, "FlowLogRole",
                             assumed_by=iam.ServicePrincipal("vpc-flow-logs.amazonaws.com"),
                             description="VPC flow logs to their log group")
        pin(flow_role, Ids.FLOW_LOG_ROLE)
        vpc = ec2.Vpc(
            self.scope, "Vpc",
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
            resources=[ledger.table.table_arn]))
        # ... and the refund reconciler's Query on the sparse index of unsettled claims.
        endpoint.add_to_policy(iam.PolicyStatement(
            principals=[iam.AnyPrincipal()], actions=["dynamodb:Query"],
            resources=[ledger.index_arn(ledger_schema.GSI_UNSETTLED)]))
        pin(endpoint, Ids.DYNAMODB_ENDPOINT)
        return vpc
