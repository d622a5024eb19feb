"""The benchmark's own counts on the local stack (scripts/perf): the status turn measured
with the breaker's state cold (a new environment, or past ``DISJUNTOR_CACHE_S``) and warm
(the state read within the window), so neither figure hides the other."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from orchestrator import handler as orchestrator_handler


@pytest.fixture()
def bench(local_stack: Any) -> Iterator[Any]:
    from scripts.harness.scripted_model import ScriptedModelServer
    from scripts.local_stack.aws import REGION
    from scripts.perf.aws_count import AwsCounter
    from scripts.perf.measure import captured_output
    from scripts.perf.scenarios import Bench

    counter = AwsCounter(local_stack.aws_endpoint, REGION)
    with counter.installed(), ScriptedModelServer() as model, captured_output():
        b = Bench(local_stack, counter, model)
        # The window outlasts a loaded machine's delay between the warming read and the
        # tool's call (the deployed 2 s is what the bench itself runs with).
        b.runner.env["DISJUNTOR_CACHE_S"] = "15"
        try:
            yield b
        finally:
            b.close()
            orchestrator_handler.reset()


def test_the_status_turn_is_counted_with_the_breaker_state_cold_and_warm(bench):
    from scripts.perf.report import goals_table, scenario_tables
    from scripts.perf.scenarios import status_call

    order = bench.new_order()
    plan = [[], [status_call(order)]]
    bench.turn("perf-frio", 0, plan)
    bench.status_turns("perf-frio", 1, plan, warm=False)
    bench.turn("perf-morno", 0, plan)
    bench.status_turns("perf-morno", 1, plan)
    cold, warm = bench.results
    assert (cold.scenario, warm.scenario) == ("status_disjuntor_frio", "status")
    # The one difference: the breaker's strongly consistent GetItem of disjuntor#<tool>.
    assert cold.aws.calls["dynamodb.GetItem"] == warm.aws.calls["dynamodb.GetItem"] + 1
    assert cold.aws_calls() == warm.aws_calls() + 1
    assert cold.aws.read_units == warm.aws.read_units + 1
    assert cold.aws.total_write_units == warm.aws.total_write_units
    tables = "\n".join(scenario_tables(bench.results))
    assert "status query, breaker state cold (read first)" in tables
    goal = next(line for line in goals_table_rows(bench, goals_table) if "breaker state cold" in line)
    assert goal.endswith("| yes |"), goal


def goals_table_rows(bench: Any, goals_table: Any) -> list[str]:
    """The goals table needs every scenario: the other rows come from their own measurements."""
    from scripts.perf.measure import Measurement

    filler = [Measurement(design, scenario, scope, lambda_requests=1)
              for design in ("cadencia", "lab87")
              for scenario in ("status", "primeiro_reembolso", "reembolso_duplicado", "recusa_pelo_teto")
              for scope in ("ferramenta", "turno")
              if (design, scenario, scope) != ("cadencia", "status", "turno")]
    return goals_table([*bench.results, *filler])
