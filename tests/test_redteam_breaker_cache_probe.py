"""Red team: the half-open probe stays single under the per-environment
state cache. ``DISJUNTOR_CACHE_S`` may be up to 30 s and ``DISJUNTOR_ESPERA_S`` as
short as a fraction of a second; an environment that cached CLOSED just before
another opened the circuit must not still trust that CLOSED once the cooldown is
over and a probe is in flight — else two calls reach the half-open tool. Each
orchestrator instance has its own cache, as each execution environment does."""

from __future__ import annotations

from orchestrator.circuit_store import CircuitState, CircuitStore

from .test_breaker_cache import _instance
from .test_orchestrator_breaker import TOOL, Clock, Tool


def test_a_closed_state_cached_longer_than_the_cooldown_does_not_make_a_second_probe(mocked_aws):
    clock, tool = Clock(), Tool()
    turn_a, counted = _instance(mocked_aws, clock, tool, "30", cooldown_s="1.5")
    turn_c, _ = _instance(mocked_aws, clock, tool, "30", cooldown_s="1.5")
    tool.mode = "ok"
    assert turn_c() == "resposta"  # C reads a healthy CLOSED circuit
    tool.mode = "crash"
    for _ in range(3):
        turn_a()  # A opens it
    assert CircuitStore(counted.ledger).read(TOOL).state is CircuitState.OPEN and tool.calls == 4
    clock.now += 1.6  # the cooldown is over
    store = CircuitStore(counted.ledger)
    # The probe is in flight (A took it; its answer has not come back yet).
    assert store.take_probe(TOOL, store.read(TOOL), store.new_owner(), lease_ms=60_000)
    assert store.read(TOOL).state is CircuitState.HALF_OPEN
    # C must read the half-open circuit and be refused, not call the tool from its cache.
    assert turn_c() == "disjuntor_aberto"
    assert tool.calls == 4


def test_across_processes_a_long_cache_does_not_send_a_call_beside_the_probe(local_stack, tmp_path):
    """The same across two spawned orchestrator processes on the moto server (each its
    own cache of 30 s, cooldown 1.5 s): B reads CLOSED, A opens the circuit, the
    cooldown ends (the test's clock moves), both call at once while the tool holds the
    probe until the other has answered. Exactly one call reaches the tool — the probe;
    the other customer hears the breaker's reply."""
    from .test_breaker_fleet import COOLDOWN_S, _drop, _Fleet, _tables

    ledger_table, audit_table = _tables(local_stack.aws_endpoint)
    fleet = _Fleet(local_stack.aws_endpoint, ledger_table, audit_table, tmp_path, 2, cache_s="30")
    try:
        assert fleet.turn(1, "ok") == ("resposta", 1)  # B now holds a CLOSED state
        assert [fleet.turn(0, "crash") for _ in range(3)] == [("resposta", 1)] * 3  # A opens it
        fleet.clock.advance(COOLDOWN_S + 0.2)
        assert sorted(fleet.racing_a_held_probe()) == [("disjuntor_aberto", 0), ("resposta", 1)]
    finally:
        fleet.close()
        _drop(local_stack.aws_endpoint, ledger_table, audit_table)


FLEET = 4


def test_after_one_process_opens_it_each_warm_process_sends_at_most_one_more_call(local_stack, tmp_path):
    """Four spawned orchestrator processes, each holding a healthy CLOSED state (default
    2 s cache); process 0 opens the circuit with three crashes; then every process
    takes three turns against the still-failing tool at once. Calls that reach the
    tool after the opening: at most one per other warm process (3), never more."""
    from .test_breaker_fleet import _drop, _Fleet, _tables

    ledger_table, audit_table = _tables(local_stack.aws_endpoint)
    fleet = _Fleet(local_stack.aws_endpoint, ledger_table, audit_table, tmp_path, FLEET)
    try:
        assert fleet.together("ok") == [("resposta", 1)] * FLEET  # every process caches CLOSED
        assert [fleet.turn(0, "crash") for _ in range(3)] == [("resposta", 1)] * 3  # process 0 opens it
        after_open = [fleet.together("crash") for _ in range(3)]
    finally:
        fleet.close()
        _drop(local_stack.aws_endpoint, ledger_table, audit_table)
    leaked = sum(calls for round_ in after_open for _, calls in round_)
    print(f"calls reaching the failing tool after another process opened the circuit: {leaked} "
          f"({FLEET - 1} other warm processes)")
    assert leaked <= FLEET - 1
    assert all(reply == ("disjuntor_aberto", 0) for reply in after_open[-1])
