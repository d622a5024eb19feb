"""Hand-offs that reach a person: the stack's own EventBridge bus, a
default rule delivering every agent event to an SQS queue, and the orchestrator's
permission to publish on that bus only.

Its own construct module so that stack.py only calls ``add_handoff_bus``. A
company's helpdesk subscribes with rules of its own on ``cadencia-agente``, or
reads the queue. The events are typed and masked (orchestrator/handoffs.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from cadencia_shared.catalog import HANDOFF_BUS_NAME, HANDOFF_EVENT_SOURCE, HANDOFF_QUEUE_NAME

from .base import acknowledge, pin
from .contract import Ids

if TYPE_CHECKING:
    from .stack import CadenciaStack


def add_handoff_bus(stack: CadenciaStack, orchestrator: lambda_.Function, role: iam.IRole) -> events.EventBus:
    bus = events.EventBus(stack, Ids.HANDOFF_BUS + "Resource", event_bus_name=HANDOFF_BUS_NAME)
    pin(bus, Ids.HANDOFF_BUS)
    queue = sqs.Queue(stack, Ids.HANDOFF_QUEUE + "Resource", queue_name=HANDOFF_QUEUE_NAME,
                      encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
                      retention_period=Duration.days(14))
    pin(queue, Ids.HANDOFF_QUEUE)
    acknowledge(queue, "AwsSolutions-SQS3", "This queue is the helpdesk's inbox of hand-off events, not a work queue of "
         "this stack: what a consumer cannot process, and where it goes, is the consumer's redrive policy.")
    rule = events.Rule(stack, Ids.HANDOFF_RULE + "Resource", event_bus=bus,
                       event_pattern=events.EventPattern(source=[HANDOFF_EVENT_SOURCE]),
                       description="Every hand-off and approval request to the helpdesk queue")
    rule.add_target(targets.SqsQueue(queue))
    pin(rule, Ids.HANDOFF_RULE)
    role.add_to_principal_policy(iam.PolicyStatement(actions=["events:PutEvents"], resources=[bus.event_bus_arn]))
    orchestrator.add_environment("EVENT_BUS_NAME", HANDOFF_BUS_NAME)
    return bus
