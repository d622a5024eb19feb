"""Alarms of the orchestrator's controls (issue 11): a circuit that opens, per
tool. The breaker's state lives in the ledger table (``disjuntor#{tool}`` items,
written with the orchestrator's existing UpdateItem grant), so there is no
resource here beyond the alarms; the stack's topic policy lets CloudWatch publish
for them (``stack.extra_alarms``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw

from cadencia_shared.catalog import TOOLS
from cadencia_shared.observability import NAMESPACE, TOOL_DIMENSION, Metric

from . import contract

if TYPE_CHECKING:
    from .stack import CadenciaStack


def add_control_alarms(stack: CadenciaStack) -> None:
    for tool in TOOLS.values():
        opened = cw.Metric(namespace=NAMESPACE, metric_name=Metric.BREAKER_TRANSITIONS, statistic="Sum",
                           period=Duration.minutes(5),
                           dimensions_map={TOOL_DIMENSION: tool.name, "Estado": "aberto"})
        stack.extra_alarms.append(stack._alarm(
            f"{contract.pascal(tool.package)}BreakerOpenAlarm", opened,
            f"The circuit breaker of {tool.name} opened: its Lambda failed (crash, timeout, throttle) "
            "several times in a row and calls to it are being refused."))
