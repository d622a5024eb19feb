"""The breaker's per-environment cache of the circuit state (``StateCache``,
``DISJUNTOR_CACHE_S``): what it saves on a healthy tool's calls, and what it costs
when another instance opens the circuit. Real SDK (scripted transport), real ledger
(moto); each orchestrator instance has its own cache, as each execution environment
does; the instances share the table and a clock the test moves."""

from __future__ import annotations

import uuid
from collections import Counter

import boto3
import pytest

from cadencia_shared.catalog import LEDGER_TABLE
from cadencia_shared.ledger import Ledger
from orchestrator.circuit_store import ITEM_TYPE, CircuitState, CircuitStore
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts.local_stack.aws import REGION

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build
from .test_orchestrator_breaker import TOOL, Clock, Tool

STATUS_TURNS = 10


class CountedLedger:
    """One instance's ledger, on its own client, whose DynamoDB calls are counted:
    every call, and the breaker's reads."""

    def __init__(self, clock: Clock) -> None:
        self.ledger = Ledger(LEDGER_TABLE, boto3.client("dynamodb", region_name=REGION), clock=clock)
        self.calls: Counter = Counter()
        self.ledger.client.meta.events.register("before-parameter-build.dynamodb.*", self._count)

    def _count(self, model, params, **_) -> None:
        if params.get("TableName") != LEDGER_TABLE:
            return
        self.calls[model.name] += 1
        if model.name == "GetItem" and params["Key"]["pk"]["S"].startswith(f"{ITEM_TYPE}#"):
            self.calls["breaker reads"] += 1


def _instance(mocked_aws, clock: Clock, tool: Tool, cache_s: str, cooldown_s: str = "30"):
    counted = CountedLedger(clock)
    model = ScriptedModel()

    def turn() -> str:
        model.steps.clear()
        model.then(tool_use(TOOL, {"pedidoId": uuid.uuid4().hex[:8]}), text_reply("Posso ajudar em algo mais?"))
        reply = orch.handle(TurnRequest(conversaId=f"conv-{uuid.uuid4().hex[:10]}", clienteId=1001,
                                        mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="status?"),
                            Deadline.after(60))
        return reply.motivo

    orch, _ = build(model, counted.ledger, tool, DISJUNTOR_FALHAS="3", DISJUNTOR_ESPERA_S=cooldown_s,
                    DISJUNTOR_CACHE_S=cache_s)
    return turn, counted


@pytest.mark.parametrize("cache_s, breaker_reads", [("0", STATUS_TURNS), ("2", 4)])
def test_breaker_reads_per_status_turn_before_and_after_the_cache(mocked_aws, cache_s, breaker_reads):
    """Ten status turns of one warm instance, 0.9 s apart (the clock), on a healthy
    tool: without the cache the breaker reads its item on every call (1 GetItem per
    turn); with 2 s, once per window of three turns (at 0.9, 3.6, 6.3 and 9.0 s)."""
    clock, tool = Clock(), Tool()
    tool.mode = "ok"
    turn, counted = _instance(mocked_aws, clock, tool, cache_s)
    for _ in range(STATUS_TURNS):
        clock.now += 0.9
        assert turn() == "resposta"
    assert tool.calls == STATUS_TURNS
    assert counted.calls["breaker reads"] == breaker_reads, counted.calls
    per_turn = sum(v for k, v in counted.calls.items() if k != "breaker reads") / STATUS_TURNS
    print(f"DISJUNTOR_CACHE_S={cache_s}: {breaker_reads / STATUS_TURNS:.1f} breaker reads and "
          f"{per_turn:.1f} ledger calls per status turn")


def test_after_another_instance_opens_it_a_cached_instance_sends_at_most_one_more_call(mocked_aws):
    """B cached a healthy CLOSED circuit; A then opens it. B's next call still reaches
    the failing tool (its cache is 2 s), fails, and B forgets the cache: its next call
    is refused. The cost of the cache: one call per warm environment."""
    clock, tool = Clock(), Tool()
    turn_a, counted = _instance(mocked_aws, clock, tool, "2")
    turn_b, _ = _instance(mocked_aws, clock, tool, "2")
    tool.mode = "ok"
    assert turn_b() == "resposta"  # B now trusts CLOSED for 2 s
    tool.mode = "crash"
    for _ in range(3):
        assert turn_a() == "resposta"
    assert CircuitStore(counted.ledger).read(TOOL).state is CircuitState.OPEN and tool.calls == 4
    assert turn_b() == "resposta" and tool.calls == 5  # the one call the cache costs
    assert turn_b() == "disjuntor_aberto" and tool.calls == 5
    assert turn_a() == "disjuntor_aberto" and tool.calls == 5


def test_a_cached_instance_whose_call_succeeds_keeps_calling_only_inside_the_window(mocked_aws):
    """The tool recovered on B's side (a partial outage): B's cached CLOSED lets its calls
    through until the window ends, then B reads OPEN and is refused like everyone."""
    clock, tool = Clock(), Tool()
    turn_a, _counted = _instance(mocked_aws, clock, tool, "2")
    turn_b, _ = _instance(mocked_aws, clock, tool, "2")
    tool.mode = "ok"
    assert turn_b() == "resposta"
    tool.mode = "crash"
    for _ in range(3):
        turn_a()
    tool.mode = "ok"
    clock.now += 1
    assert turn_b() == "resposta"  # still inside B's window
    clock.now += 1.5
    assert turn_b() == "disjuntor_aberto"  # the window is over: B reads the open circuit


def test_an_open_circuit_is_never_trusted_past_its_cooldown(mocked_aws):
    """B reads OPEN with a cache window (30 s) longer than what is left of the cooldown
    (1 s): the first call after the cooldown probes, it is not refused from the cache."""
    clock, tool = Clock(), Tool()
    turn_a, _ = _instance(mocked_aws, clock, tool, "30", cooldown_s="1.5")
    turn_b, b = _instance(mocked_aws, clock, tool, "30", cooldown_s="1.5")
    for _ in range(3):
        turn_a()
    clock.now += 0.5
    assert turn_b() == "disjuntor_aberto" and turn_b() == "disjuntor_aberto"
    assert b.calls["breaker reads"] == 1  # the second refusal came from B's cache
    clock.now += 1.1  # the cooldown is over; B's 30 s window is not
    tool.mode = "ok"
    assert turn_b() == "resposta" and tool.calls == 4 and b.calls["breaker reads"] == 2
    assert CircuitStore(b.ledger).read(TOOL).state is CircuitState.CLOSED
