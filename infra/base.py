"""What every construct of the stack builds with: one way to make a Lambda's role,
log group and function, one way to pin a logical id or acknowledge a cdk-nag
finding, and the logical-id rule that lets the stack be split into constructs
without renaming a deployed resource.

Why ``Flat``: CloudFormation identifies a resource by its logical id, which CDK
derives from the construct path. Moving, say, the VPC from the stack into a
``Network`` construct would rename every subnet, route and NAT, and a renamed
resource is replaced on the next deploy (the demo cluster with it). A ``Flat``
construct groups resources in code but is left out of its children's logical
ids (``CadenciaStack._allocate_logical_id``), so each keeps the id it had when
it was created directly in the stack. Two children of different ``Flat``
constructs with the same id would collide; CDK refuses to synthesize that.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import Acknowledgment, AssetHashType, CfnElement, Duration, RemovalPolicy, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IConstruct

from . import contract
from .packaging import BuiltAsset

RUNTIME = lambda_.Runtime.PYTHON_3_12  # must match packaging.LAMBDA_PYTHON_VERSION
ARCHITECTURE = lambda_.Architecture.ARM_64
LOG_RETENTION = logs.RetentionDays.ONE_MONTH
L1_REASON = ("python3.12 is a supported Lambda runtime (Amazon Linux 2023) chosen on purpose: the code is tested "
             "on Python 3.11 and every bundled wheel is built for cp312; moving to a newer runtime is a deliberate "
             "change of packaging.LAMBDA_PYTHON_VERSION together with the project's Python, not a silent bump.")


class Flat(Construct):
    """A construct whose own id is left out of its children's logical ids (see the module docstring)."""


def pin(construct: IConstruct, logical_id: str) -> None:
    """Give a construct's CloudFormation resource the contract's logical id."""
    resource = construct.node.default_child
    if not isinstance(resource, CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to give {logical_id}")
    resource.override_logical_id(logical_id)


def ack(construct: IConstruct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """``ack``, looked up at call time (the stale-acknowledgement test replaces it)."""
    import infra.base

    infra.base.ack(construct, rule, reason)


def unique_id(components: Sequence[str]) -> str:
    """CDK's ``makeUniqueId`` (aws-cdk-lib core/lib/private/uniqueid.ts), which is not
    exported: the human-readable path plus 8 hex digits of its MD5."""
    components = [c for c in components if c != "Default"]
    if len(components) == 1 and len(_alnum(components[0])) <= 255:
        return _alnum(components[0])
    digest = hashlib.md5("/".join(components).encode()).hexdigest()[:8].upper()  # noqa: S324 - CDK's naming hash
    deduped: list[str] = []
    for component in components:
        if not deduped or not deduped[-1].endswith(component):
            deduped.append(component)
    return "".join(_alnum(c) for c in deduped if c != "Resource")[:240] + digest


def _alnum(text: str) -> str:
    return "".join(ch for ch in text if ch.isascii() and ch.isalnum())


def flat_path(element: IConstruct, stack: IConstruct) -> list[str]:
    """The construct path from ``stack`` down to ``element``, without ``Flat`` constructs."""
    scopes = element.node.scopes
    below = scopes[[s.node.path for s in scopes].index(stack.node.path) + 1:]
    return [s.node.id for s in below if not isinstance(s, Flat)]


def log_group(scope: Construct, logical_id: str, function_name: str) -> logs.LogGroup:
    group = logs.LogGroup(scope, logical_id + "Resource", log_group_name=f"/aws/lambda/{function_name}",
                          retention=LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY)
    pin(group, logical_id)
    return group


def lambda_role(scope: Construct, logical_id: str, role_name: str, description: str, *, in_vpc: bool) -> iam.Role:
    """A role only Lambda may assume; in the VPC it gets AWS's ENI policy (the contract's ENI_MANAGEMENT)."""
    role = iam.Role(
        scope, logical_id + "Resource",
        role_name=role_name,
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=description,
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(contract.ENI_MANAGEMENT.name)]
        if in_vpc else [],
    )
    pin(role, logical_id)
    if in_vpc:
        acknowledge(role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                    f"{contract.ENI_MANAGEMENT.name}]", contract.ENI_MANAGEMENT.why)
    acknowledge(role, "AwsSolutions-IAM5[Resource::*]", "Only xray:PutTraceSegments and xray:PutTelemetryRecords "
                "(active tracing), which have no resource-level permissions; every other statement names its ARN "
                "(tests/infra/test_contract.py).")
    return role


def code(assets: Mapping[str, BuiltAsset], name: str) -> lambda_.Code:
    asset = assets[name]
    return lambda_.Code.from_asset(str(asset.path), asset_hash=asset.asset_hash,
                                   asset_hash_type=AssetHashType.CUSTOM)


@dataclass(frozen=True)
class Placement:
    """Where a function runs in the VPC (None: outside it)."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_groups: tuple[ec2.ISecurityGroup, ...]


@dataclass(frozen=True)
class FunctionSpec:
    """One Lambda of the stack: the parts every function here shares are fixed in
    ``LambdaFunction.build``; this says what differs."""

    logical_id: str
    description: str
    handler: str
    timeout: Duration
    memory_size: int
    environment: Mapping[str, str] = field(default_factory=dict)
    placement: Placement | None = None
    reserved_concurrency: int | None = None
    retry_attempts: int | None = None
    dead_letter_queue: sqs.IQueue | None = None
    max_event_age: Duration | None = None


class LambdaFunction:
    """A Lambda's role, its log group (30 days, written only by that role) and the
    function, with active tracing on the stack's runtime: ``allow`` each statement
    the contract lists, then ``build``.

    Not a construct of its own: its resources keep the logical ids the contract
    names, in the scope of whichever construct builds them."""

    def __init__(self, scope: Construct, *, role: iam.Role, log_group_id: str, function_name: str) -> None:
        """``function_name`` is also the name of its built asset (infra/app.py)."""
        self.scope = scope
        self.role = role
        self.function_name = function_name
        self.log_group = log_group(scope, log_group_id, function_name)
        self.allow(contract.LOG_ACTIONS, [self.log_group.log_group_arn])

    def allow(self, actions: Sequence[str], resources: Sequence[str]) -> None:
        """Exactly these actions on exactly these resources (no grant helper that adds more)."""
        self.role.add_to_policy(iam.PolicyStatement(actions=list(actions), resources=list(resources)))

    def build(self, spec: FunctionSpec, assets: Mapping[str, BuiltAsset]) -> lambda_.Function:
        placement = spec.placement
        fn = lambda_.Function(
            self.scope, spec.logical_id + "Resource",
            function_name=self.function_name, description=spec.description,
            runtime=RUNTIME, architecture=ARCHITECTURE, handler=spec.handler,
            code=code(assets, self.function_name), role=self.role, log_group=self.log_group,
            timeout=spec.timeout, memory_size=spec.memory_size, environment=dict(spec.environment),
            tracing=lambda_.Tracing.ACTIVE,
            vpc=placement.vpc if placement else None,
            vpc_subnets=placement.subnets if placement else None,
            security_groups=list(placement.security_groups) if placement else None,
            reserved_concurrent_executions=spec.reserved_concurrency,
            dead_letter_queue=spec.dead_letter_queue,
            retry_attempts=spec.retry_attempts,
            max_event_age=spec.max_event_age,
        )
        pin(fn, spec.logical_id)
        acknowledge(fn, "AwsSolutions-L1", L1_REASON)
        return fn


def depends_on(fn: lambda_.Function, resource: IConstruct | None) -> None:
    """Created after ``resource`` (the DB users), and deleted, with its role, before it."""
    if resource is not None:
        fn.node.add_dependency(resource)
        if fn.role is None:  # every function here is built with its own role (LambdaFunction)
            raise TypeError(f"{fn.node.path} has no role to order after {resource.node.path}")
        fn.role.node.add_dependency(resource)
