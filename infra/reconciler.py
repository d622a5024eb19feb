"""The scheduled refund reconciler: an EventBridge schedule, its Lambda, its own
role (infra/contract.py ``reconciler_role``) and its alarms.

Its own construct module so that stack.py only calls ``add_refund_reconciler``.
The Lambda runs the refund's own state machine (``conciliar_reembolsos`` imports
``emitir_reembolso``), as its own DB user ``cadencia_agente_conciliacao``. It may:
Query the ledger's sparse index of unsettled claims, read and update a claim
(GetItem/UpdateItem; never PutItem: it creates no claim), read the gateway
secret, log in to PostgreSQL as its user. Nothing else.

It shares the refund tool's security group: exactly the same egress (the gateway
and Secrets Manager over HTTPS, PostgreSQL, the DynamoDB endpoint), so a second
group would only repeat its rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from cadencia_shared import ledger as ledger_schema
from cadencia_shared.catalog import (
    EMITIR_REEMBOLSO,
    GATEWAY_SECRET_NAME,
    RECONCILER_DB_USER,
    RECONCILER_FUNCTION_NAME,
    RECONCILER_PACKAGE,
)
from cadencia_shared.observability import NAMESPACE, Metric

from . import contract
from .contract import Ids

if TYPE_CHECKING:
    from .stack import CadenciaStack

RECONCILER_TIMEOUT_S = 60  # a pass visits RECONCILER_BATCH claims, one gateway request (3 s max) each
RECONCILER_BATCH = 15


def add_refund_reconciler(stack: CadenciaStack) -> lambda_.Function:
    from .stack import (
        ARCHITECTURE,
        GATEWAY_IDEMPOTENCY_WINDOW_H,
        GATEWAY_TIMEOUT_S,
        L1_REASON,
        REFUND_CLAIM_LEASE_S,
        RUNTIME,
        _ack,
        _pin,
    )

    cfg = stack.config
    role = stack._role(Ids.RECONCILER_ROLE, contract.RECONCILER_ROLE_NAME,
                       "Refund reconciler: settles unsettled refund claims with the gateway", in_vpc=True)
    log_group = stack._log_group(Ids.RECONCILER_LOG_GROUP, RECONCILER_FUNCTION_NAME)
    role.add_to_policy(iam.PolicyStatement(actions=list(contract.LOG_ACTIONS), resources=[log_group.log_group_arn]))
    role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
                                           resources=[stack.ledger.table_arn]))
    role.add_to_policy(iam.PolicyStatement(
        actions=["dynamodb:Query"], resources=[f"{stack.ledger.table_arn}/index/{ledger_schema.GSI_UNSETTLED}"]))
    role.add_to_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"],
                                           resources=[stack.gateway_secret.secret_arn]))
    stack.cluster_for_grants.grant_connect(role, RECONCILER_DB_USER)

    env = {
        **stack.db_environment(RECONCILER_FUNCTION_NAME, RECONCILER_DB_USER),
        "LEDGER_TABLE": stack.ledger.table_name, "GATEWAY_URL": cfg.gateway_url,
        "GATEWAY_SECRET_NAME": GATEWAY_SECRET_NAME, "GATEWAY_TIMEOUT_S": str(GATEWAY_TIMEOUT_S),
        "REFUND_CLAIM_LEASE_S": str(REFUND_CLAIM_LEASE_S), "RECONCILER_BATCH": str(RECONCILER_BATCH),
        "GATEWAY_IDEMPOTENCY_WINDOW_H": str(GATEWAY_IDEMPOTENCY_WINDOW_H),
    }
    fn = lambda_.Function(
        stack, Ids.RECONCILER_FUNCTION + "Resource",
        function_name=RECONCILER_FUNCTION_NAME,
        description="Refund reconciler: re-sends unsettled refunds' own requests (same Idempotency-Key)",
        runtime=RUNTIME, architecture=ARCHITECTURE,
        handler=f"{RECONCILER_PACKAGE}.handler.lambda_handler",
        code=stack._code(RECONCILER_FUNCTION_NAME),
        role=role, log_group=log_group,
        timeout=Duration.seconds(RECONCILER_TIMEOUT_S), memory_size=512, environment=env,
        tracing=lambda_.Tracing.ACTIVE, vpc=stack.vpc, vpc_subnets=stack.with_egress,
        security_groups=[stack.tool_security_groups[EMITIR_REEMBOLSO.name]],
        # One pass at a time; a missed or failed pass is simply the next one.
        reserved_concurrent_executions=1 if cfg.reserved_concurrency else None,
        retry_attempts=0,
    )
    _pin(fn, Ids.RECONCILER_FUNCTION)
    _ack(fn, "AwsSolutions-L1", L1_REASON)
    if stack.db_users is not None:
        fn.node.add_dependency(stack.db_users)
        role.node.add_dependency(stack.db_users)

    rule = events.Rule(stack, Ids.RECONCILER_SCHEDULE + "Resource",
                       schedule=events.Schedule.rate(Duration.minutes(cfg.reconciler_rate_minutes)),
                       description="One refund reconciliation pass")
    rule.add_target(targets.LambdaFunction(fn, retry_attempts=0))
    _pin(rule, Ids.RECONCILER_SCHEDULE)
    _alarms(stack, fn)
    return fn


def _alarms(stack: CadenciaStack, fn: lambda_.Function) -> None:
    """The reconciler's alarms; the stack's topic policy lets CloudWatch publish for them."""
    age = cw.Metric(namespace=NAMESPACE, metric_name=Metric.OLDEST_UNSETTLED_AGE, statistic="Maximum",
                    period=Duration.minutes(5))
    minutes = stack.config.unsettled_refund_alarm_minutes
    too_old = stack._alarm("UnsettledRefundAgeAlarm", age,
                           f"A refund claim has been unsettled with the gateway for {minutes} minutes or more",
                           threshold=minutes * 60)
    failed = stack._alarm("ReconcilerErrorsAlarm", fn.metric_errors(period=Duration.minutes(15), statistic="Sum"),
                          f"{RECONCILER_FUNCTION_NAME} failed a pass in 15 minutes")
    # A reconciler that stops running emits no age at all: missing data must not
    # read as "nothing pending", so no invocation in three periods is an alarm too.
    silent = cw.Alarm(
        stack, "ReconcilerNotRunningAlarm",
        metric=fn.metric_invocations(period=Duration.minutes(3 * stack.config.reconciler_rate_minutes),
                                     statistic="Sum"),
        threshold=1, evaluation_periods=1, comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
        treat_missing_data=cw.TreatMissingData.BREACHING,
        alarm_description=f"{RECONCILER_FUNCTION_NAME} did not run in three schedule periods")
    silent.add_alarm_action(cw_actions.SnsAction(stack.alarm_topic))
    # Counted on every visit (each pass) while such a claim is pending, so it stays in alarm until settled.
    manual = stack._alarm(
        "RefundPastIdempotencyWindowAlarm", stack._tool_metric(Metric.PAST_IDEMPOTENCY_WINDOW, EMITIR_REEMBOLSO),
        "A refund claim is still unknown past the gateway's idempotency window: it is no longer re-sent "
        "(a re-send could debit twice); a person must reconcile it with the gateway and settle it by hand")
    stack.extra_alarms.extend([too_old, failed, silent, manual])
