"""The circuit breaker per tool, shared by orchestrator instances:
closed → open → half-open → closed across two instances, one probe at a time, a
failed probe reopening, typed refusals never counting. Real SDK (scripted
transport), real ledger (moto); the instances share only the table and a clock."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest

from cadencia_shared.catalog import LEDGER_TABLE, ToolSpec
from cadencia_shared.ledger import ItemType, Ledger
from orchestrator import texts
from orchestrator.circuit_store import CircuitState, CircuitStore
from orchestrator.events import TurnRequest
from orchestrator.invokers import Invocation, InvocationStatus
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build

TOOL = "consultar_status_pedido"


class Clock:
    """Shared by the instances; moved by the test, and 1 ms per reading so records
    written in one step still sort in the order they were written."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


class Tool:
    """The status tool's Lambda, as seen by every instance: crashing, answering, or
    refusing (a typed business refusal)."""

    def __init__(self) -> None:
        self.mode = "crash"
        self.calls = 0
        self.during_call = None  # run while the call is in flight (another instance acting)

    def invoke(self, tool: ToolSpec, event: dict) -> Invocation:
        self.calls += 1
        if self.during_call is not None:
            action, self.during_call = self.during_call, None
            action()
        if self.mode == "crash":
            return Invocation(InvocationStatus.FUNCTION_ERROR, detail="Unhandled")
        if self.mode == "refusal":
            return Invocation(InvocationStatus.OK, payload={"ferramenta": tool.name, "ok": False,
                                                            "erro": {"codigo": "PEDIDO_NAO_ENCONTRADO"}})
        return Invocation(InvocationStatus.OK, payload={"ferramenta": tool.name, "ok": True,
                                                        "resultado": "consultado", "dados": {}})


def _instance(mocked_aws, clock: Clock, tool: Tool):
    """One orchestrator instance: its own Ledger client object, the shared table."""
    ledger = Ledger(LEDGER_TABLE, mocked_aws["dynamodb"], clock=clock)
    model = ScriptedModel(default=lambda _b: tool_use(TOOL, {"pedidoId": uuid.uuid4().hex[:8]}))

    def turn() -> object:
        # Each turn: one tool call, then a text reply (or the breaker's ending).
        model.steps.clear()
        model.then(tool_use(TOOL, {"pedidoId": uuid.uuid4().hex[:8]}), text_reply("Posso ajudar em algo mais?"))
        return orch.handle(TurnRequest(conversaId=f"conv-{uuid.uuid4().hex[:10]}", clienteId=1001,
                                       mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="status?"),
                           Deadline.after(60))

    orch, _ = build(model, ledger, tool, DISJUNTOR_FALHAS="3", DISJUNTOR_ESPERA_S="30")
    return turn, ledger


def _state(ledger: Ledger) -> CircuitState:
    return CircuitStore(ledger).read(TOOL).state


def _transitions(ledger: Ledger) -> list[str]:
    found = []
    for item in ledger.client.scan(TableName=ledger.table_name)["Items"]:
        if item.get("tipo", {}).get("S") == ItemType.AUDIT.value and item["evento"]["S"].startswith("DISJUNTOR_"):
            found.append((item["timestamp"]["S"], item["evento"]["S"]))
    return [event for _, event in sorted(found)]


def _metrics(out: str) -> Counter:
    seen: Counter = Counter()
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            emf = json.loads(line)
            if "TransicoesDoDisjuntor" in emf:
                seen[(emf["Ferramenta"], emf["Estado"])] += 1
            if "RecusasPorDisjuntor" in emf:
                seen[(emf["Ferramenta"], "recusa")] += 1
    return seen


def test_closed_open_half_open_closed_across_two_instances(mocked_aws, capsys):
    clock, tool = Clock(), Tool()
    turn_a, ledger = _instance(mocked_aws, clock, tool)
    turn_b, _ = _instance(mocked_aws, clock, tool)

    # Three consecutive crashes, two on A and one on B: the fleet's third opens it.
    for turn in (turn_a, turn_b):
        clock.now += 1
        assert turn().motivo == "resposta" and _state(ledger) is CircuitState.CLOSED
    clock.now += 1
    assert turn_a().motivo == "resposta"
    assert tool.calls == 3 and _state(ledger) is CircuitState.OPEN

    # Open: neither instance invokes; the customer hears the truthful reply.
    for turn in (turn_b, turn_a):
        reply = turn()
        assert (reply.status, reply.motivo, reply.resposta) == ("ativa", "disjuntor_aberto", texts.TOOL_UNAVAILABLE)
    assert tool.calls == 3

    # After the cooldown, B's call is the one probe; while it is in flight, A is refused.
    clock.now += 31
    tool.mode = "ok"
    refused_meanwhile = []
    tool.during_call = lambda: refused_meanwhile.append(turn_a().motivo)
    assert turn_b().motivo == "resposta"
    assert refused_meanwhile == ["disjuntor_aberto"] and tool.calls == 4
    assert _state(ledger) is CircuitState.CLOSED

    # Closed again, for both.
    assert turn_a().motivo == "resposta" and tool.calls == 5
    assert _transitions(ledger) == ["DISJUNTOR_ABERTO", "DISJUNTOR_MEIO_ABERTO", "DISJUNTOR_FECHADO"]
    metrics = _metrics(capsys.readouterr().out)
    assert metrics[(TOOL, "aberto")] == 1 and metrics[(TOOL, "meio_aberto")] == 1
    assert metrics[(TOOL, "fechado")] == 1 and metrics[(TOOL, "recusa")] == 3


def test_a_failed_probe_reopens_for_a_new_cooldown(mocked_aws):
    clock, tool = Clock(), Tool()
    turn_a, ledger = _instance(mocked_aws, clock, tool)
    turn_b, _ = _instance(mocked_aws, clock, tool)
    for _ in range(3):
        clock.now += 1
        turn_a()
    assert _state(ledger) is CircuitState.OPEN
    clock.now += 31
    assert turn_b().motivo == "resposta" and tool.calls == 4  # the probe crashed: the model was told
    assert _state(ledger) is CircuitState.OPEN
    clock.now += 10  # inside the new cooldown
    assert turn_a().motivo == "disjuntor_aberto" and tool.calls == 4
    clock.now += 25
    tool.mode = "ok"
    assert turn_a().motivo == "resposta" and _state(ledger) is CircuitState.CLOSED
    assert _transitions(ledger) == ["DISJUNTOR_ABERTO", "DISJUNTOR_MEIO_ABERTO", "DISJUNTOR_ABERTO",
                                    "DISJUNTOR_MEIO_ABERTO", "DISJUNTOR_FECHADO"]


def test_typed_refusals_never_count_and_an_answer_breaks_a_streak(mocked_aws):
    clock, tool = Clock(), Tool()
    turn_a, ledger = _instance(mocked_aws, clock, tool)
    turn_b, _ = _instance(mocked_aws, clock, tool)
    tool.mode = "refusal"
    for _ in range(6):
        turn_a()
    assert _state(ledger) is CircuitState.CLOSED
    for mode in ("crash", "crash", "refusal", "crash", "crash"):
        tool.mode = mode
        turn_b()
    assert _state(ledger) is CircuitState.CLOSED and tool.calls == 11
    assert _transitions(ledger) == []


def test_a_probe_whose_orchestrator_died_is_taken_over_after_its_lease(mocked_aws):
    """The prober took the half-open state and was killed (never answered): after the
    probe lease (the tool's timeout + 5 s), another instance probes."""
    clock, tool = Clock(), Tool()
    turn_a, ledger = _instance(mocked_aws, clock, tool)
    for _ in range(3):
        turn_a()
    clock.now += 31
    store = CircuitStore(ledger)
    assert store.take_probe(TOOL, store.read(TOOL), "orquestrador-morto", 10_000)
    assert turn_a().motivo == "disjuntor_aberto"
    clock.now += 11
    tool.mode = "ok"
    assert turn_a().motivo == "resposta" and _state(ledger) is CircuitState.CLOSED


def test_separate_processes_share_one_failure_count(local_stack):
    """Four OS processes (four warm orchestrator instances) call an always-crashing
    tool in lock-step through the breaker on the moto server: the fleet lets at most
    N + K - 1 = 6 calls through (the round that trips it was already in flight),
    where per-process counters (Powertools) let K x N = 12 through
    (``scripts/medir-disjuntor`` measures both)."""
    from scripts.medir_disjuntor import measure

    reached = measure(local_stack.aws_endpoint, 4, 3, ours=True)
    assert 3 <= reached <= 6


def _probe_then_hang(endpoint: str, table: str, ready, clock) -> None:
    """An orchestrator that wins the half-open probe and is killed mid-invoke."""
    import time as _time

    from orchestrator.breaker import CircuitBreaker
    from scripts.local_stack.aws import session_client

    breaker = CircuitBreaker(Ledger(table, session_client("dynamodb", endpoint), clock=clock), failures=1,
                             cooldown_s=0.01, probe_margin_s=0.5)
    assert breaker.before(_ctx()) is None  # the probe is ours
    ready.set()
    _time.sleep(600)  # "invoking": SIGKILLed here, never answers


def _ctx():
    from cadencia_shared.catalog import TOOLS
    from orchestrator.controls import CallContext
    from orchestrator.tools import ToolCall

    call = ToolCall(spec=TOOLS[TOOL], tool_use_id=f"toolu_{uuid.uuid4().hex}", arguments={"pedidoId": "1"},
                    conversation_id="conv-sigkill", customer_id=1)
    return CallContext(call, Deadline.after(60))


def opened_on_a_fresh_table(endpoint: str, failure: InvocationStatus, *, clock=time.time, **breaker_args):
    """A ledger table of its own on the moto server, its circuit opened by one
    ``failure`` (threshold 1) at ``clock``'s time: (client, table, the breaker that opened it)."""
    from cadencia_shared.ledger import table_definition
    from orchestrator.breaker import CircuitBreaker
    from orchestrator.controls import CallOutcome
    from scripts.local_stack.aws import session_client

    ddb = session_client("dynamodb", endpoint)
    table = f"cadencia-teste-{uuid.uuid4().hex[:10]}"
    ddb.create_table(**table_definition(table))
    breaker = CircuitBreaker(Ledger(table, ddb, clock=clock), failures=1, **breaker_args)
    ctx = _ctx()
    assert breaker.before(ctx) is None
    breaker.after(ctx, CallOutcome(invocation=Invocation(failure)))
    assert CircuitStore(Ledger(table, ddb)).read(TOOL).state is CircuitState.OPEN
    return ddb, table, breaker


def test_a_prober_sigkilled_mid_invoke_is_taken_over_after_its_lease(local_stack):
    """Real processes, real SIGKILL: while the dead prober's lease (the status tool's
    5 s timeout + 0.5 s) runs, every call is refused; after it, another instance
    probes, and its answer closes the circuit. Both processes read one clock the test
    moves (tests/support/shared_clock.py): the lease ends when the test says, not
    when a slow kill or read happens to cross it."""
    import multiprocessing as mp
    import os
    import signal

    from orchestrator.controls import CallOutcome
    from tests.support.shared_clock import SharedClock

    spawn = mp.get_context("spawn")
    clock = SharedClock(spawn)
    ddb, table, breaker = opened_on_a_fresh_table(local_stack.aws_endpoint, InvocationStatus.TIMEOUT,
                                                  cooldown_s=0.01, probe_margin_s=0.5, clock=clock)
    try:
        clock.advance(0.05)  # past the cooldown

        ready = spawn.Event()
        prober = spawn.Process(target=_probe_then_hang, args=(local_stack.aws_endpoint, table, ready, clock))
        prober.start()
        assert ready.wait(120)
        os.kill(prober.pid, signal.SIGKILL)
        prober.join(30)
        assert prober.exitcode == -signal.SIGKILL

        clock.advance(5.5 - 0.1)  # just inside the dead prober's lease
        refused = breaker.before(_ctx())
        assert refused is not None and refused.reason == "ferramenta_indisponivel"
        clock.advance(0.1 + 0.3)  # past it
        ctx = _ctx()
        assert breaker.before(ctx) is None  # took over the dead prober's half-open state
        breaker.after(ctx, CallOutcome(invocation=Invocation(InvocationStatus.OK, payload={"ok": True})))
        assert CircuitStore(Ledger(table, ddb)).read(TOOL).state is CircuitState.CLOSED
    finally:
        ddb.delete_table(TableName=table)


@pytest.mark.parametrize("status", [InvocationStatus.FUNCTION_ERROR, InvocationStatus.TIMEOUT,
                                    InvocationStatus.THROTTLED, InvocationStatus.INVOKE_FAILED])
def test_every_kind_of_failure_counts_and_opens_it(mocked_aws, status):
    """A crash, a timeout, a throttle and a failed invoke each count: three in a row open
    the circuit. A typed refusal answered in between would have reset the streak."""
    from orchestrator.breaker import CircuitBreaker
    from orchestrator.controls import CallOutcome

    ledger: Ledger = mocked_aws["ledger"]
    breaker = CircuitBreaker(ledger, failures=3, cooldown_s=30, closed_cache_s=2)
    outcomes = [Invocation(status), Invocation(status),
                Invocation(InvocationStatus.OK, payload={"ok": False, "erro": {"codigo": "PEDIDO_NAO_ENCONTRADO"}}),
                Invocation(status), Invocation(status), Invocation(status)]
    states = []
    for invocation in outcomes:
        ctx = _ctx()
        assert breaker.before(ctx) is None
        breaker.after(ctx, CallOutcome(invocation=invocation))
        states.append(_state(ledger))
    assert states == [CircuitState.CLOSED] * 5 + [CircuitState.OPEN]
    assert breaker.before(_ctx()) is not None  # refused before any invoke
