"""Approval decisions: the decision Lambda and its own role
(infra/contract.py ``decision_role``).

Its own module so that stack.py only calls ``add_approval_decisions``; the Lambda's
role, log group and function are built like every other (``infra.base.LambdaFunction``).
Operators invoke it (scripts/aprovar.py ``--alvo aws``; they need only
lambda:InvokeFunction on it). It may read and decide approval items on the ledger
(GetItem, UpdateItem), append audit records (PutItem), list pending requests from
the ledger's sparse index (Query), and invoke the orchestrator asynchronously to
resume a conversation. A schedule invokes it with ``{"acao": "expirar"}`` every
few minutes (requests that expired undecided: each conversation is resumed, the
record closed, the customer told). It runs no tool and reads no secret; outside the VPC (it
reaches only DynamoDB and Lambda).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_

from cadencia_shared import ledger as ledger_schema
from cadencia_shared.catalog import DECISION_FUNCTION_NAME, DECISION_PACKAGE, ORCHESTRATOR_FUNCTION_NAME

from . import contract
from .base import FunctionSpec, LambdaFunction, lambda_role, pin
from .config import StackConfig
from .contract import Ids
from .ledger import ledger_statements

if TYPE_CHECKING:
    from .stack import CadenciaStack

DECISION_TIMEOUT_S = 10
APPROVAL_EXPIRY_RATE_MINUTES = 5  # a customer hears of an expiry at most this late (or at their next message)


def approval_environment(config: StackConfig) -> dict[str, str]:
    """The policy's configuration: the orchestrator's gate and the decision Lambda read the same."""
    return {"APROVADORES": config.approvers, "APROVACAO_LIMITE_REAIS": config.approval_threshold,
            "APROVACAO_DUPLA_ACIMA_REAIS": config.two_person_amount}


def add_approval_decisions(stack: CadenciaStack) -> lambda_.Function:
    parts = LambdaFunction(
        stack, role=lambda_role(stack, Ids.DECISION_ROLE, contract.DECISION_ROLE_NAME,
                                "Approval decisions: read and decide approvals, resume the conversation",
                                in_vpc=False),
        log_group_id=Ids.DECISION_LOG_GROUP, function_name=DECISION_FUNCTION_NAME)
    for statement in ledger_statements(Ids.DECISION_ROLE, stack.ledger.table_arn):  # infra/ledger_kinds.py
        parts.role.add_to_policy(statement)
    parts.allow(["dynamodb:Query"], [stack.ledger_construct.index_arn(ledger_schema.GSI_UNSETTLED)])
    parts.allow(["lambda:InvokeFunction"], [stack.orchestrator.function_arn])
    fn = parts.build(FunctionSpec(
        logical_id=Ids.DECISION_FUNCTION,
        description="Approval decisions: list, show, approve or deny; resumes the conversation",
        handler=f"{DECISION_PACKAGE}.handler.lambda_handler",
        timeout=Duration.seconds(DECISION_TIMEOUT_S), memory_size=256,
        environment={"LEDGER_TABLE": stack.ledger.table_name, "RESUME_FUNCTION": ORCHESTRATOR_FUNCTION_NAME,
                     **approval_environment(stack.config)},
        # A person invokes it synchronously; nothing to retry on their behalf.
        retry_attempts=0,
    ), stack.assets)
    # Requests that expired undecided: each conversation is resumed (the record closed,
    # the customer told) without waiting for the customer's next message.
    rule = events.Rule(stack, Ids.APPROVAL_EXPIRY_SCHEDULE + "Resource",
                       schedule=events.Schedule.rate(Duration.minutes(APPROVAL_EXPIRY_RATE_MINUTES)),
                       description="Close approval requests that expired undecided")
    rule.add_target(targets.LambdaFunction(fn, event=events.RuleTargetInput.from_object({"acao": "expirar"}),
                                           retry_attempts=0))
    pin(rule, Ids.APPROVAL_EXPIRY_SCHEDULE)
    return fn
