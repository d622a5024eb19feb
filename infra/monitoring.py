"""Alarms and the dashboard: the alarm topic (TLS only, CloudWatch allowed to
publish for exactly the stack's alarms), an alarm per tool on the retry
ceiling, Lambda errors and throttles, the orchestrator's dead-letter queue, and
one dashboard. Other constructs make their alarms with ``alarm`` and list them in
``extra_alarms`` (``stack.extra_alarms``), so the topic policy names them too;
``finish`` runs last."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cadencia_shared.catalog import ORCHESTRATOR_FUNCTION_NAME, TOOLS, ToolSpec
from cadencia_shared.observability import NAMESPACE, TOOL_DIMENSION, Metric

from .base import Flat
from .contract import pascal
from .orchestrator_function import RETRY_CEILING

DASHBOARD_NAME = "Cadencia-AgenteAtendimento"
PERIOD = Duration.minutes(5)


def tool_metric(name: str, tool: ToolSpec, label: str | None = None) -> cw.Metric:
    # No label on alarm metrics: a label turns the alarm into a metric-math alarm.
    return cw.Metric(namespace=NAMESPACE, metric_name=name, dimensions_map={TOOL_DIMENSION: tool.name},
                     statistic="Sum", period=PERIOD, label=label)


def lambda_metric(function_name: str, metric_name: str, label: str | None = None) -> cw.Metric:
    return cw.Metric(namespace="AWS/Lambda", metric_name=metric_name, dimensions_map={"FunctionName": function_name},
                     statistic="Sum", period=PERIOD, label=label)


class Monitoring(Flat):
    def __init__(self, scope: Construct, construct_id: str, *, alarm_email: str | None) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "AlarmTopic", topic_name="cadencia-alarmes", enforce_ssl=True,
                               display_name="Cadencia agent alarms")
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        # Alarms made by other constructs (reconciler, channel, controls): the topic
        # policy lets CloudWatch publish for exactly these and the stack's own.
        self.extra_alarms: list[cw.Alarm] = []

    def alarm(self, construct_id: str, metric: cw.IMetric, description: str, threshold: float = 1) -> cw.Alarm:
        """At or above ``threshold`` in one period notifies the topic; missing data is not a breach."""
        alarm = cw.Alarm(
            self, construct_id, metric=metric, threshold=threshold, evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING, alarm_description=description)
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        return alarm

    def finish(self, orchestrator_dlq: sqs.IQueue | None) -> None:
        """The stack's own alarms and the dashboard, then the topic policy over every alarm."""
        own = self._tool_alarms() + self._lambda_alarms()
        if orchestrator_dlq is not None:
            own.append(self.alarm(
                "OrchestratorDlqAlarm", orchestrator_dlq.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic="Maximum"),
                "A customer message failed every orchestrator attempt and waits in the dead-letter queue."))
        self._allow_alarms_to_publish(own + self.extra_alarms)
        self._dashboard(own)

    def _tool_alarms(self) -> list[cw.Alarm]:
        alarms = [self.alarm(
            f"{pascal(tool.package)}CeilingAlarm", tool_metric(Metric.CEILING_INTERRUPTIONS, tool),
            f"The retry ceiling interrupted {tool.name}: the model's loop insisted past "
            f"{RETRY_CEILING} attempts (the loop misbehaved, not just a refused action).")
            for tool in TOOLS.values()]
        for number, tool in enumerate(t for t in TOOLS.values() if t.calls_payment_gateway):
            # The refund's alarm keeps the id it was deployed with; another such tool gets its own.
            alarm_id = "UnknownRefundOutcomeAlarm" if number == 0 else f"{pascal(tool.package)}UnknownOutcomeAlarm"
            alarms.append(self.alarm(
                alarm_id, tool_metric(Metric.UNKNOWN_OUTCOMES, tool),
                "A refund reached the gateway without a definite answer; it is reconciled by idempotency key, "
                "but someone should look."))
        return alarms

    def _lambda_alarms(self) -> list[cw.Alarm]:
        return [self.alarm(f"{pascal(name.removeprefix('cadencia-').replace('-', '_'))}{metric}Alarm",
                           lambda_metric(name, metric), f"{name}: {metric} in 5 minutes")
                for name in _function_names() for metric in ("Errors", "Throttles")]

    def _allow_alarms_to_publish(self, alarms: Sequence[cw.Alarm]) -> None:
        """enforce_ssl=True makes a TopicPolicy that holds only a Deny and replaces the
        topic's default policy: without this Allow, CloudWatch cannot publish and no
        alarm ever notifies. Scoped to this account and to exactly these alarms
        (aws:SourceAccount, aws:SourceArn: the confused-deputy guard AWS documents for
        service principals)."""
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"],
            resources=[self.topic.topic_arn],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                        "ArnEquals": {"aws:SourceArn": [alarm.alarm_arn for alarm in alarms]}},
        ))

    def _dashboard(self, own_alarms: Sequence[cw.Alarm]) -> None:
        tools = list(TOOLS.values())
        money = [t for t in tools if t.calls_payment_gateway]

        def per_tool(name: str) -> list[cw.IMetric]:
            return [tool_metric(name, t, t.name) for t in tools]

        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=DASHBOARD_NAME)
        dashboard.add_widgets(
            cw.GraphWidget(title="Interrupções por teto (InterrupcoesPorTeto)",
                           left=per_tool(Metric.CEILING_INTERRUPTIONS), width=12),
            cw.GraphWidget(title="Erros de ferramenta (ErrosDeFerramenta)", left=per_tool(Metric.TOOL_ERRORS),
                           width=12),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Reembolsos reais vs. bloqueios por idempotência", width=12, left=[
                tool_metric(name, t, label) for t in money for name, label in (
                    (Metric.REAL_REFUNDS, "ReembolsosReais"),
                    (Metric.IDEMPOTENCY_BLOCKS, "BloqueiosPorIdempotencia"),
                    (Metric.UNKNOWN_OUTCOMES, "ResultadosDesconhecidos"))]),
            cw.GraphWidget(title="Chamadas permitidas e recusas", width=12,
                           left=per_tool(Metric.CALLS_ALLOWED), right=per_tool(Metric.TOOL_REFUSALS)),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Lambda: erros e throttles", width=12, left=[
                lambda_metric(n, m, f"{n} {m}") for n in _function_names() for m in ("Errors", "Throttles")]),
            cw.AlarmStatusWidget(title="Alarmes", alarms=list(own_alarms), width=12),
        )


def _function_names() -> list[str]:
    return [t.function_name for t in TOOLS.values()] + [ORCHESTRATOR_FUNCTION_NAME]
