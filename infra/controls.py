"""Infrastructure of the orchestrator's controls.

- The tamper-evident audit table (``cadencia_shared.audit_chain``): deletion
  protection, point-in-time recovery, retained on ``cdk destroy``; the orchestrator
  may ``PutItem`` and ``Query`` it, nothing else (infra/contract.py).
- An alarm per tool when its circuit opens. The breaker's state lives in the
  ledger table (``disjuntor#{tool}`` items, written with the orchestrator's
  existing UpdateItem grant); the stack's topic policy lets CloudWatch publish for
  these alarms (``stack.extra_alarms``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from cadencia_shared import audit_chain
from cadencia_shared.catalog import TOOLS
from cadencia_shared.observability import NAMESPACE, TOOL_DIMENSION, Metric

from . import contract

if TYPE_CHECKING:
    from .stack import CadenciaStack


def add_audit_table(stack: CadenciaStack, *writers: lambda_.Function) -> dynamodb.Table:
    """The audit table; each writer (the orchestrator, the WhatsApp queue's consumer, which
    runs the same loop, and the approval decisions) may append to it (PutItem, and Query its
    last link) and gets ``AUDIT_TABLE``."""
    definition = audit_chain.table_definition()
    table = dynamodb.Table(
        stack, "Audit", table_name=definition["TableName"],
        partition_key=dynamodb.Attribute(name=audit_chain.CHAIN_KEY, type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name=audit_chain.SEQ_KEY, type=dynamodb.AttributeType.NUMBER),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True),
        # The audit outlives the stack and cannot be dropped by accident.
        removal_policy=RemovalPolicy.RETAIN, deletion_protection=True,
    )
    table.node.default_child.override_logical_id(contract.Ids.AUDIT_TABLE)
    for writer in writers:
        writer.role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:PutItem", "dynamodb:Query"],
                                                      resources=[table.table_arn]))
        writer.add_environment("AUDIT_TABLE", table.table_name)
    return table


def add_control_alarms(stack: CadenciaStack) -> None:
    for tool in TOOLS.values():
        opened = cw.Metric(namespace=NAMESPACE, metric_name=Metric.BREAKER_TRANSITIONS, statistic="Sum",
                           period=Duration.minutes(5),
                           dimensions_map={TOOL_DIMENSION: tool.name, "Estado": "aberto"})
        stack.extra_alarms.append(stack.alarm(
            f"{contract.pascal(tool.package)}BreakerOpenAlarm", opened,
            f"The circuit breaker of {tool.name} opened: its Lambda failed (crash, timeout, throttle) "
            "several times in a row and calls to it are being refused."))
