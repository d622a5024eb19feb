"""Approval decisions (issue 10): the decision Lambda and its own role
(infra/contract.py ``decision_role``).

Its own construct module so that stack.py only calls ``add_approval_decisions``.
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
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from cadencia_shared import ledger as ledger_schema
from cadencia_shared.catalog import DECISION_FUNCTION_NAME, DECISION_PACKAGE, ORCHESTRATOR_FUNCTION_NAME

from . import contract
from .contract import Ids

if TYPE_CHECKING:
    from .stack import CadenciaStack

DECISION_TIMEOUT_S = 10


def approval_environment(stack: CadenciaStack) -> dict[str, str]:
    """The policy's configuration: the orchestrator's gate and the decision Lambda read the same."""
    return {"APROVADORES": stack.config.approvers, "APROVACAO_LIMITE_REAIS": stack.config.approval_threshold}


def add_approval_decisions(stack: CadenciaStack) -> lambda_.Function:
    from .stack import ARCHITECTURE, L1_REASON, RUNTIME, _ack, _pin

    role = stack._role(Ids.DECISION_ROLE, contract.DECISION_ROLE_NAME,
                       "Approval decisions: read and decide approvals, resume the conversation", in_vpc=False)
    log_group = stack._log_group(Ids.DECISION_LOG_GROUP, DECISION_FUNCTION_NAME)
    role.add_to_policy(iam.PolicyStatement(actions=list(contract.LOG_ACTIONS), resources=[log_group.log_group_arn]))
    role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"],
                                           resources=[stack.ledger.table_arn]))
    role.add_to_policy(iam.PolicyStatement(
        actions=["dynamodb:Query"], resources=[f"{stack.ledger.table_arn}/index/{ledger_schema.GSI_UNSETTLED}"]))
    role.add_to_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"],
                                           resources=[stack.orchestrator.function_arn]))
    fn = lambda_.Function(
        stack, Ids.DECISION_FUNCTION + "Resource",
        function_name=DECISION_FUNCTION_NAME,
        description="Approval decisions: list, show, approve or deny; resumes the conversation",
        runtime=RUNTIME, architecture=ARCHITECTURE,
        handler=f"{DECISION_PACKAGE}.handler.lambda_handler",
        code=stack._code(DECISION_FUNCTION_NAME),
        role=role, log_group=log_group,
        timeout=Duration.seconds(DECISION_TIMEOUT_S), memory_size=256,
        environment={"LEDGER_TABLE": stack.ledger.table_name, "RESUME_FUNCTION": ORCHESTRATOR_FUNCTION_NAME,
                     **approval_environment(stack)},
        tracing=lambda_.Tracing.ACTIVE,
        # A person invokes it synchronously; nothing to retry on their behalf.
        retry_attempts=0,
    )
    _pin(fn, Ids.DECISION_FUNCTION)
    _ack(fn, "AwsSolutions-L1", L1_REASON)
    return fn
