"""Each tool's circuit opening is alarmed: on the synthesized
template, one CloudWatch alarm per registry row on ``TransicoesDoDisjuntor`` with
exactly that tool's ``Ferramenta`` and ``Estado=aberto`` dimensions — what
``orchestrator/breaker.py`` emits on a trip — notifying the stack's alarm topic."""

from __future__ import annotations

import pytest

from cadencia_shared.catalog import TOOLS
from cadencia_shared.observability import NAMESPACE, TOOL_DIMENSION, Metric
from orchestrator.circuit_store import CircuitState


@pytest.mark.infra
def test_one_breaker_open_alarm_per_tool_on_the_metric_the_breaker_emits(default_synth):
    alarms = [res["Properties"] for res in default_synth.template["Resources"].values()
              if res["Type"] == "AWS::CloudWatch::Alarm"
              and res["Properties"].get("MetricName") == Metric.BREAKER_TRANSITIONS]
    by_tool = {}
    for props in alarms:
        dimensions = {d["Name"]: d["Value"] for d in props["Dimensions"]}
        assert dimensions.keys() == {TOOL_DIMENSION, "Estado"}
        assert dimensions["Estado"] == CircuitState.OPEN.value
        assert props["Namespace"] == NAMESPACE and props["Statistic"] == "Sum" and props["Threshold"] == 1
        assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert props["AlarmActions"], "an alarm nobody hears"
        by_tool[dimensions[TOOL_DIMENSION]] = props
    assert sorted(by_tool) == sorted(TOOLS) and len(alarms) == len(TOOLS)
