"""The scheduled refund reconciler: an EventBridge schedule, its Lambda, its own
role (infra/contract.py ``reconciler_role``) and its alarms.

Its own module so that stack.py only calls ``add_refund_reconciler``; the Lambda is
built like every other (``infra.base.LambdaFunction``).
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
from aws_cdk import aws_lambda as lambda_

from cadencia_shared import ledger as ledger_schema
from cadencia_shared.catalog import (
    EMITIR_REEMBOLSO,
    RECONCILER_DB_USER,
    RECONCILER_FUNCTION_NAME,
    RECONCILER_PACKAGE,
)
from cadencia_shared.observability import NAMESPACE, Metric

from . import contract
from .base import FunctionSpec, LambdaFunction, Placement, depends_on, lambda_role, pin
from .contract import Ids
from .ledger import ledger_statements
from .monitoring import tool_metric
from .payment_gateway import gateway_environment

if TYPE_CHECKING:
    from .stack import CadenciaStack

# a pass visits RECONCILER_BATCH claims, one gateway request (3 s max) each; then the books' audit
# (one ERP read, one gateway listing, one GetItem per key of its window)
RECONCILER_TIMEOUT_S = 60
RECONCILER_BATCH = 15


def add_refund_reconciler(stack: CadenciaStack) -> lambda_.Function:
    cfg = stack.config
    parts = LambdaFunction(
        stack, role=lambda_role(stack, Ids.RECONCILER_ROLE, contract.RECONCILER_ROLE_NAME,
                                "Refund reconciler: settles unsettled refund claims with the gateway", in_vpc=True),
        log_group_id=Ids.RECONCILER_LOG_GROUP, function_name=RECONCILER_FUNCTION_NAME)
    for statement in ledger_statements(Ids.RECONCILER_ROLE, stack.ledger.table_arn):  # infra/ledger_kinds.py
        parts.role.add_to_policy(statement)
    parts.allow(["dynamodb:Query"], [stack.ledger_construct.index_arn(ledger_schema.GSI_UNSETTLED)])
    parts.allow(["secretsmanager:GetSecretValue"], [stack.gateway_secret.secret_arn])
    stack.database.grant_connect(parts.role, RECONCILER_DB_USER)
    refund = stack.tools[EMITIR_REEMBOLSO.name]
    fn = parts.build(FunctionSpec(
        logical_id=Ids.RECONCILER_FUNCTION,
        description="Refund reconciler: re-sends unsettled refunds' own requests (same Idempotency-Key)",
        handler=f"{RECONCILER_PACKAGE}.handler.lambda_handler",
        timeout=Duration.seconds(RECONCILER_TIMEOUT_S), memory_size=512,
        environment={**stack.db_environment(RECONCILER_FUNCTION_NAME, RECONCILER_DB_USER),
                     "LEDGER_TABLE": stack.ledger.table_name, **gateway_environment(cfg),
                     "RECONCILER_BATCH": str(RECONCILER_BATCH)},
        placement=Placement(stack.vpc, stack.with_egress, (refund.security_group,)),
        # One pass at a time; a missed or failed pass is simply the next one.
        reserved_concurrency=cfg.reconciler_concurrency if cfg.reserved_concurrency else None,
        retry_attempts=0,
    ), stack.assets)
    depends_on(fn, stack.db_users)

    rule = events.Rule(stack, Ids.RECONCILER_SCHEDULE + "Resource",
                       schedule=events.Schedule.rate(Duration.minutes(cfg.reconciler_rate_minutes)),
                       description="One refund reconciliation pass")
    rule.add_target(targets.LambdaFunction(fn, retry_attempts=0))
    pin(rule, Ids.RECONCILER_SCHEDULE)
    _alarms(stack, fn)
    return fn


def _alarms(stack: CadenciaStack, fn: lambda_.Function) -> None:
    """The reconciler's alarms; the stack's topic policy lets CloudWatch publish for them."""
    monitoring = stack.monitoring
    age = cw.Metric(namespace=NAMESPACE, metric_name=Metric.OLDEST_UNSETTLED_AGE, statistic="Maximum",
                    period=Duration.minutes(5))
    minutes = stack.config.unsettled_refund_alarm_minutes
    too_old = monitoring.alarm("UnsettledRefundAgeAlarm", age,
                               f"A refund claim has been unsettled with the gateway for {minutes} minutes or more",
                               threshold=minutes * 60)
    failed = monitoring.alarm("ReconcilerErrorsAlarm", fn.metric_errors(period=Duration.minutes(15), statistic="Sum"),
                              f"{RECONCILER_FUNCTION_NAME} failed a pass in 15 minutes")
    # A reconciler that stops running emits no age at all: missing data must not
    # read as "nothing pending", so no invocation in three periods is an alarm too.
    silent = cw.Alarm(
        monitoring, "ReconcilerNotRunningAlarm",
        metric=fn.metric_invocations(period=Duration.minutes(3 * stack.config.reconciler_rate_minutes),
                                     statistic="Sum"),
        threshold=1, evaluation_periods=1, comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
        treat_missing_data=cw.TreatMissingData.BREACHING,
        alarm_description=f"{RECONCILER_FUNCTION_NAME} did not run in three schedule periods")
    silent.add_alarm_action(cw_actions.SnsAction(monitoring.topic))
    # Counted on every visit (each pass) while such a claim is pending, so it stays in alarm until settled.
    manual = monitoring.alarm(
        "RefundPastIdempotencyWindowAlarm", tool_metric(Metric.PAST_IDEMPOTENCY_WINDOW, EMITIR_REEMBOLSO),
        "A refund claim is still unknown past the gateway's idempotency window: it is no longer re-sent "
        "(a re-send could debit twice); a person must reconcile it with the gateway and settle it by hand")
    # The books' audit (after each pass) emits the disagreements it left unrepaired, 0
    # included; each one's operator line is in the reconciler's log ("divergência ...").
    books = monitoring.alarm(
        "BooksDivergenceAlarm",
        cw.Metric(namespace=NAMESPACE, metric_name=Metric.BOOKS_OPEN_DIVERGENCES, statistic="Maximum",
                  period=Duration.minutes(5)),
        "The books disagree (ERP reservations, executed claims, gateway debits): see the "
        f"'divergência' lines in {RECONCILER_FUNCTION_NAME}'s log; each says the order, the key and what to check")
    monitoring.extra_alarms.extend([too_old, failed, silent, manual, books])
