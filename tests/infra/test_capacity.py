"""Reserved concurrency sized from the scale arithmetic (docs/performance.md, *Scale on
paper*): orchestrators busy = turns per second at the busiest hour x seconds per turn,
and a deploy whose reservations the account cannot hold is refused at synth, not at
CloudFormation's update."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.capacity import orchestrators_needed
from infra.config import ConfigError, from_context


def _ctx(values):
    return from_context(values.get)


def test_100_million_turns_a_month_need_about_830_orchestrators_and_today_is_20():
    # 100e6 / 30 days x 15 % in the busiest hour / 3,600 s x 6 s per turn = 833.3
    assert orchestrators_needed(100_000_000) == 834
    assert orchestrators_needed(2_400_000) == 20  # the default deploy: ~80,000 turns a day
    assert _ctx({}).orchestrator_concurrency == 20
    assert _ctx({"monthlyTurns": "100000000"}).orchestrator_concurrency == 834
    assert _ctx({"monthlyTurns": 10_000_000, "turnSeconds": "3"}).orchestrator_concurrency == 42


@given(turns=st.integers(min_value=1, max_value=10**10), seconds=st.floats(min_value=0.5, max_value=900),
       share=st.floats(min_value=1 / 24, max_value=1.0))
def test_the_reservation_carries_the_busiest_hour(turns, seconds, share):
    needed = orchestrators_needed(turns, turn_seconds=seconds, busiest_hour_share=share)
    per_second = turns / 30 * share / 3600
    assert needed >= 1 and needed >= per_second * seconds - 1e-6  # never short of the load
    assert needed - 1 < max(per_second * seconds, 1) + 1e-6       # and not a unit more than it


def test_an_explicit_orchestrator_concurrency_still_wins_but_not_beside_monthly_turns():
    assert _ctx({"orchestratorConcurrency": "7"}).orchestrator_concurrency == 7
    with pytest.raises(ConfigError, match="monthlyTurns"):
        _ctx({"orchestratorConcurrency": "7", "monthlyTurns": "1000000"})


@pytest.mark.parametrize("key, value", [("monthlyTurns", "0"), ("monthlyTurns", "1e6"), ("monthlyTurns", True),
                                        ("orchestratorConcurrency", "-1"), ("orchestratorConcurrency", "x"),
                                        ("turnSeconds", "0"), ("busiestHourShare", "1.5"),
                                        ("busiestHourShare", "0.01"), ("accountConcurrency", "50")])
def test_nonsense_sizing_is_refused(key, value):
    with pytest.raises(ConfigError, match=key):
        _ctx({key: value})


def test_reservations_the_account_cannot_hold_are_refused_at_synth():
    # Lambda keeps 100 of the account's concurrency unreserved; the default account has 1,000.
    # 834 for the API orchestrator and 834 for the WhatsApp one do not fit.
    with pytest.raises(ConfigError, match="accountConcurrency"):
        _ctx({"monthlyTurns": "100000000"}).check_reservations()
    big = _ctx({"monthlyTurns": "100000000", "accountConcurrency": "3000"})
    big.check_reservations()
    assert big.total_reserved() == 2 * 834 + sum(big.tool_concurrency.values()) + 20 + 1
    assert not _ctx({"monthlyTurns": "100000000", "reservedConcurrency": "false"}).total_reserved()
    _ctx({"monthlyTurns": "100000000", "reservedConcurrency": "false"}).check_reservations()
    assert math.isfinite(_ctx({}).total_reserved())


def test_the_synthesized_template_reserves_what_the_config_counts(default_synth):
    from infra.contract import DB_USERS_FUNCTION_NAME

    functions = {f["Properties"].get("FunctionName"): f["Properties"]
                 for f in default_synth.of_type("AWS::Lambda::Function").values()}
    unreserved = {n for n, p in functions.items() if "ReservedConcurrentExecutions" not in p}
    # The deploy-time custom resource and the three operator-paced functions (the console's cookie
    # authorizer runs once per console request, which the API stage throttles to 10/s) run on the
    # 100 Lambda keeps unreserved; every function a customer's traffic scales reserves.
    assert unreserved == {DB_USERS_FUNCTION_NAME, "cadencia-resposta-atendente", "cadencia-decidir-aprovacao",
                          "cadencia-autorizar-console"}
    reserved = [p["ReservedConcurrentExecutions"] for p in functions.values() if "ReservedConcurrentExecutions" in p]
    assert sum(reserved) == default_synth.config.total_reserved()
    assert sum(reserved) <= default_synth.config.account_concurrency - 100
    assert reserved.count(default_synth.config.orchestrator_concurrency) >= 2


def test_a_deploy_sized_for_100_million_turns_a_month_synthesizes_834_per_orchestrator(tmp_path_factory):
    from infra.contract import ORCHESTRATOR_FUNCTION_NAME
    from infra.contract import WHATSAPP_CONSUMER_FUNCTION_NAME as CONSUMER_FUNCTION_NAME
    from tests.infra.conftest import synthesize

    synth = synthesize({"monthlyTurns": "100000000", "accountConcurrency": "3000"},
                       tmp_path_factory.mktemp("cdk-capacity"), nag=False)
    by_name = {f["Properties"].get("FunctionName"): f["Properties"]
               for f in synth.of_type("AWS::Lambda::Function").values()}
    assert by_name[ORCHESTRATOR_FUNCTION_NAME]["ReservedConcurrentExecutions"] == 834
    assert by_name[CONSUMER_FUNCTION_NAME]["ReservedConcurrentExecutions"] == 834
    assert sum(p.get("ReservedConcurrentExecutions", 0) for p in by_name.values()) <= 3000 - 100
