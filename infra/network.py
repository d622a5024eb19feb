"""The network: the demo VPC (two AZs, one NAT, flow logs, a DynamoDB gateway
endpoint whose policy allows exactly the DynamoDB calls of the functions in the
VPC, derived from the contract: ``infra/endpoint_policy.py``), or the
imported ERP VPC. Exposes the two subnet selections the functions use:
``isolated`` (no route out: PostgreSQL and the DynamoDB endpoint only) and
``with_egress`` (through the NAT: the payment gateway, Secrets Manager, SQS)."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from .base import pin
from .config import StackConfig
from .contract import Ids
from .endpoint_policy import dynamodb_grants
from .grants import LEADING_KEYS, LEADING_KEYS_CONDITION


class Network:
    """Builds into the stack's own scope rather than a ``Flat`` construct: CDK names
    some of these resources from the construct path itself (the VPC's ``Name`` tags,
    the cluster's generated master secret: ``Names.uniqueId``), which ``Flat``
    cannot hide, and a renamed master secret would be replaced on deploy."""

    def __init__(self, scope: Construct, *, config: StackConfig) -> None:
        self.scope = scope
        self.config = config
        self.dynamodb_endpoint: ec2.GatewayVpcEndpoint | None = None
        if config.demo_database:
            self.vpc: ec2.IVpc = self._demo_vpc()
            self.isolated = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
            self.with_egress = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        else:
            imported = config.imported
            assert imported is not None
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self.scope, "Vpc", vpc_id=imported.vpc_id, availability_zones=list(imported.availability_zones),
                private_subnet_ids=list(imported.private_subnet_ids))
            self.isolated = self.with_egress = ec2.SubnetSelection(subnets=self.vpc.private_subnets)

    def _demo_vpc(self) -> ec2.Vpc:
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
        # need it at all: the profile tool writes its audit record from there). Its
        # policy comes with ``restrict_dynamodb_endpoint``, once the tables exist.
        endpoint = vpc.add_gateway_endpoint(
            "DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                     ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
        self.dynamodb_endpoint = endpoint
        pin(endpoint, Ids.DYNAMODB_ENDPOINT)
        return vpc

    def restrict_dynamodb_endpoint(self, tables: Mapping[str, str]) -> None:
        """The endpoint's policy: exactly the DynamoDB grants of the roles whose functions
        run in the VPC (``endpoint_policy``); ``tables`` maps the contract's notation of a
        table (``${LedgerTable.Arn}``) to its ARN in this stack. With no such function
        (a teardown phase) it allows nothing: an endpoint without a policy allows all."""
        if self.dynamodb_endpoint is None:
            return  # the imported VPC's endpoints are the ERP owners' (docs/infrastructure.md)
        grants = dynamodb_grants(self.config)
        for grant in grants:
            conditions = {LEADING_KEYS_CONDITION: {LEADING_KEYS: list(grant.leading_keys)}} \
                if grant.leading_keys else None
            self.dynamodb_endpoint.add_to_policy(iam.PolicyStatement(
                principals=[iam.AnyPrincipal()], actions=list(grant.actions),
                resources=[_resolve(r, tables) for r in grant.resources], conditions=conditions))
        if not grants:
            self.dynamodb_endpoint.add_to_policy(iam.PolicyStatement(
                effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()], actions=["dynamodb:*"], resources=["*"]))


def _resolve(resource: str, tables: Mapping[str, str]) -> str:
    """``${LedgerTable.Arn}/index/x`` -> the ledger's ARN token + ``/index/x``."""
    for name, arn in tables.items():
        if resource == name or resource.startswith(name + "/"):
            return arn + resource[len(name):]
    raise ValueError(f"the DynamoDB endpoint's policy names {resource}, which is no table of this stack")
