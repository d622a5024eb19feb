"""Approval decisions (issue 10): the decision Lambda and its own role
(infra/contract.py ``decision_role``).

Its own module so that stack.py only calls ``add_approval_decisions``; the Lambda's
role, log group and function are built like every other (``infra.base.LambdaFunction``).
Operators invoke it (scripts/aprovar.py ``--alvo aws``; they need only
lambda:InvokeFunction on it). It may read and decide approval items on the ledger
(GetItem, UpdateItem), append audit records (PutItem), list pending requests from
the ledger's sparse index (Query), and invoke the orchestrator asynchronously to
resume a conversation. It runs no tool and reads no secret; outside the VPC (it
reaches only DynamoDB and Lambda).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_

from cadencia_shared import ledger as ledger_schema
from cadencia_shared.catalog import DECISION_FUNCTION_NAME, DECISION_PACKAGE, ORCHESTRATOR_FUNCTION_NAME

from . import contract
from .base import FunctionSpec, LambdaFunction, lambda_role
from .config import StackConfig
from .contract import Ids

if TYPE_CHECKING:
    from .stack import CadenciaStack

DECISION_TIMEOUT_S = 10


def approval_environment(config: StackConfig) -> dict[str, str]:
    """The policy's configuration: the orchestrator's gate and the decision Lambda read the same."""
    return {"APROVADORES": config.approvers, "APROVACAO_LIMITE_REAIS": config.approval_threshold}


def add_approval_decisions(stack: CadenciaStack) -> lambda_.Function:
    parts = LambdaFunction(
        stack, role=lambda_role(stack, Ids.DECISION_ROLE, contract.DECISION_ROLE_NAME,
                                "Approval decisions: read and decide approvals, resume the conversation",
                                in_vpc=False),
        log_group_id=Ids.DECISION_LOG_GROUP, function_name=DECISION_FUNCTION_NAME)
    parts.allow(["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"], [stack.ledger.table_arn])
    parts.allow(["dynamodb:Query"], [stack.ledger_construct.index_arn(ledger_schema.GSI_UNSETTLED)])
    parts.allow(["lambda:InvokeFunction"], [stack.orchestrator.function_arn])
    return parts.build(FunctionSpec(
        logical_id=Ids.DECISION_FUNCTION,
        description="Approval decisions: list, show, approve or deny; resumes the conversation",
        handler=f"{DECISION_PACKAGE}.handler.lambda_handler",
        timeout=Duration.seconds(DECISION_TIMEOUT_S), memory_size=256,
        environment={"LEDGER_TABLE": stack.ledger.table_name, "RESUME_FUNCTION": ORCHESTRATOR_FUNCTION_NAME,
                     **approval_environment(stack.config)},
        # A person invokes it synchronously; nothing to retry on their behalf.
        retry_attempts=0,
    ), stack.assets)
