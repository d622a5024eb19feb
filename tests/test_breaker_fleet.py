"""The circuit breaker re-attacked across OS processes:
separate orchestrator instances (spawned processes, each its own boto3 clients and
its own per-environment state cache) share only the moto server's ledger and audit
tables and a clock the test moves (tests/support/shared_clock.py): a cooldown or a
probe's lease ends when the test advances it, never because a process was slow.

- closed → open → half-open → closed across two orchestrator processes, the state
  changes on the audit chain and as EMF metrics, each exactly once;
- the probe after the cooldown raced from six processes in lock-step, round after
  round: exactly one call passes each round;
- an instance SIGKILLed between its failure's count and the trip: the next failure
  from another process opens the circuit.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.audit_chain import table_definition as audit_table_definition
from cadencia_shared.ledger import Ledger, table_definition
from scripts.local_stack.aws import session_client
from tests.support.shared_clock import SharedClock

TOOL = "consultar_status_pedido"
COOLDOWN_S = 1.5
ANSWER_WAIT_S = 120  # how long a held probe waits for the test's release (a bound, never a window)


def _tables(endpoint: str) -> tuple[str, str]:
    ddb = session_client("dynamodb", endpoint)
    suffix = uuid.uuid4().hex[:10]
    ledger, audit = f"disjuntor-frota-{suffix}", f"auditoria-frota-{suffix}"
    ddb.create_table(**table_definition(ledger))
    ddb.create_table(**audit_table_definition(audit))
    return ledger, audit


def _drop(endpoint: str, *tables: str) -> None:
    ddb = session_client("dynamodb", endpoint)
    for table in tables:
        ddb.delete_table(TableName=table)


class _Tool:
    """The status tool's Lambda as this instance sees it: the mode comes with each command.
    ``held``: it answers only once the test releases it — the probe stays in flight until
    the other instance has decided, however slow either process is."""

    mode = "crash"
    calls = 0

    def __init__(self, release) -> None:
        self.release = release

    def invoke(self, tool, event):
        from orchestrator.invokers import Invocation, InvocationStatus

        self.calls += 1
        if self.mode == "crash":
            return Invocation(InvocationStatus.FUNCTION_ERROR, detail="Unhandled")
        if self.mode == "held":
            self.release.wait(ANSWER_WAIT_S)
        return Invocation(InvocationStatus.OK, payload={"ferramenta": tool.name, "ok": True,
                                                        "resultado": "consultado", "dados": {}})


def _orchestrator_process(endpoint: str, ledger_table: str, audit_table: str, emf_path: str, conn,
                          clock: SharedClock, release, cache_s: str = "2") -> None:
    """One warm orchestrator instance: runs a status turn per command, answers
    (motivo, tool calls made)."""
    from orchestrator.events import TurnRequest
    from orchestrator.model import Deadline
    from tests.support.anthropic_fake import ScriptedModel, text_reply, tool_use
    from tests.support.orchestrators import build

    sys.stdout = open(emf_path, "w", buffering=1)  # noqa: SIM115 (the breaker's EMF lines, read by the test)
    ddb = session_client("dynamodb", endpoint)
    ledger = Ledger(ledger_table, ddb, clock=clock,
                    audit_chain=AuditChain(audit_table, ddb, clock=clock, anchor_table=ledger_table))
    tool, model = _Tool(release), ScriptedModel()
    orch, _ = build(model, ledger, tool, DISJUNTOR_FALHAS="3", DISJUNTOR_ESPERA_S=str(COOLDOWN_S),
                    DISJUNTOR_CACHE_S=cache_s)
    conn.send("pronto")
    while (command := conn.recv()) != "fim":
        tool.mode, before = command, tool.calls
        model.steps.clear()
        model.then(tool_use(TOOL, {"pedidoId": uuid.uuid4().hex[:8]}), text_reply("Posso ajudar em algo mais?"))
        reply = orch.handle(TurnRequest(conversaId=f"conv-{uuid.uuid4().hex[:10]}", clienteId=1001,
                                        mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="status?"),
                            Deadline.after(60))
        conn.send((reply.motivo, tool.calls - before))


class _Fleet:
    def __init__(self, endpoint: str, ledger_table: str, audit_table: str, directory: Path, size: int,
                 cache_s: str = "2") -> None:
        spawn = mp.get_context("spawn")
        self.clock, self.release = SharedClock(spawn), spawn.Event()
        self.emf = [directory / f"emf-{i}.jsonl" for i in range(size)]
        self.pipes, self.procs = [], []
        for path in self.emf:
            ours, theirs = spawn.Pipe()
            proc = spawn.Process(target=_orchestrator_process,
                                 args=(endpoint, ledger_table, audit_table, str(path), theirs, self.clock,
                                       self.release, cache_s))
            proc.start()
            self.pipes.append(ours)
            self.procs.append(proc)
        for pipe in self.pipes:
            assert pipe.poll(120) and pipe.recv() == "pronto"

    def turn(self, instance: int, mode: str) -> tuple[str, int]:
        self.pipes[instance].send(mode)
        return self.pipes[instance].recv()

    def together(self, mode: str) -> list[tuple[str, int]]:
        for pipe in self.pipes:
            pipe.send(mode)
        return [pipe.recv() for pipe in self.pipes]

    def racing_a_held_probe(self) -> list[tuple[str, int]]:
        """Every instance runs a turn at once; a call that reaches the tool is held there
        until every other instance has answered (or the bound passes: two probes held
        at once answer only then, and the answers show it), then released."""
        self.release.clear()
        for pipe in self.pipes:
            pipe.send("held")
        answers, waiting = [], list(self.pipes)
        while waiting:
            ready = mp_connection.wait(waiting, timeout=ANSWER_WAIT_S if len(waiting) == 1 else 2 * ANSWER_WAIT_S)
            assert ready, "no instance answered"
            for pipe in ready:
                answers.append(pipe.recv())
                waiting.remove(pipe)
            if len(waiting) <= 1:
                self.clock.advance(1.0)  # the probe's answer is recorded after the refusal, on the record
                self.release.set()
        return answers

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send("fim")
        for proc in self.procs:
            proc.join(30)

    def metrics(self) -> Counter:
        seen: Counter = Counter()
        for path in self.emf:
            for line in path.read_text().splitlines():
                emf = json.loads(line) if line.startswith("{") and '"_aws"' in line else {}
                if "TransicoesDoDisjuntor" in emf:
                    seen[emf["Estado"]] += 1
        return seen


def _state_changes(endpoint: str, audit_table: str) -> list[str]:
    chain = AuditChain(audit_table, session_client("dynamodb", endpoint))
    found = [(r["registradoEm"], r["evento"]) for c in chain.chains() for r in chain.records(c)
             if r["evento"].startswith("DISJUNTOR_")]
    return [event for _, event in sorted(found)]


def test_closed_open_half_open_closed_across_two_orchestrator_processes(local_stack, tmp_path):
    ledger_table, audit_table = _tables(local_stack.aws_endpoint)
    fleet = _Fleet(local_stack.aws_endpoint, ledger_table, audit_table, tmp_path, 2)
    try:
        # Three consecutive crashes, split across the processes: the fleet's third opens it.
        assert [fleet.turn(i, "crash") for i in (0, 1, 0)] == [("resposta", 1)] * 3
        # Open: neither process invokes; each customer hears the breaker's truthful reply.
        assert [fleet.turn(i, "ok") for i in (1, 0)] == [("disjuntor_aberto", 0)] * 2
        fleet.clock.advance(COOLDOWN_S + 0.2)
        # After the cooldown both race for the probe, which the tool holds until the other
        # has answered: one probes (and closes it), the other is refused while it is in flight.
        assert sorted(fleet.racing_a_held_probe()) == [("disjuntor_aberto", 0), ("resposta", 1)]
        # Closed again, for both.
        assert fleet.together("ok") == [("resposta", 1)] * 2
    finally:
        fleet.close()
    try:
        assert _state_changes(local_stack.aws_endpoint, audit_table) == [
            "DISJUNTOR_ABERTO", "DISJUNTOR_MEIO_ABERTO", "DISJUNTOR_FECHADO"]
        assert fleet.metrics() == Counter({"aberto": 1, "meio_aberto": 1, "fechado": 1})
        chain = AuditChain(audit_table, session_client("dynamodb", local_stack.aws_endpoint),
                           anchor_table=ledger_table)
        assert all(chain.verify(c)[1] is None for c in chain.chains())
    finally:
        _drop(local_stack.aws_endpoint, ledger_table, audit_table)


PROBE_RACERS, PROBE_ROUNDS = 6, 4


def _probe_racer(endpoint: str, table: str, clock: SharedClock, barrier, passed, rounds: int) -> None:
    """One instance: in each round, all racers ask to call at the same moment after the
    cooldown (the test moved the clock past it); whoever passes is the probe, which
    answers only once every racer has decided — failing in every round but the last."""
    import os

    from cadencia_shared.catalog import TOOLS
    from orchestrator.breaker import CircuitBreaker
    from orchestrator.controls import CallContext, CallOutcome
    from orchestrator.invokers import Invocation, InvocationStatus
    from orchestrator.model import Deadline
    from orchestrator.tools import ToolCall

    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (EMF lines; the figure is the count)
    breaker = CircuitBreaker(Ledger(table, session_client("dynamodb", endpoint), clock=clock), failures=1,
                             cooldown_s=0.3, closed_cache_s=2.0)
    for n in range(rounds):
        barrier.wait()  # the clock is past the (restarted) cooldown
        call = ToolCall(spec=TOOLS[TOOL], tool_use_id=f"toolu_{uuid.uuid4().hex}", arguments={"pedidoId": str(n)},
                        conversation_id="conv-sonda", customer_id=1)
        ctx = CallContext(call, Deadline.after(60))
        probing = breaker.before(ctx) is None
        if probing:
            with passed.get_lock():
                passed[n] += 1
        barrier.wait()  # every racer has decided while the probe is in flight
        if probing:
            status = InvocationStatus.OK if n == rounds - 1 else InvocationStatus.TIMEOUT
            breaker.after(ctx, CallOutcome(invocation=Invocation(status, payload={"ok": True})))
        barrier.wait()  # the round's probe has answered


def test_the_probe_after_the_cooldown_raced_from_six_processes_lets_exactly_one_through(local_stack):
    from orchestrator.circuit_store import CircuitState, CircuitStore
    from orchestrator.invokers import InvocationStatus
    from tests.test_orchestrator_breaker import opened_on_a_fresh_table

    spawn = mp.get_context("spawn")
    clock = SharedClock(spawn)
    ddb, table, _ = opened_on_a_fresh_table(local_stack.aws_endpoint, InvocationStatus.THROTTLED, cooldown_s=0.3,
                                            clock=clock)
    try:
        # The racers and the test meet at each step; only the test moves the clock.
        barrier, passed = spawn.Barrier(PROBE_RACERS + 1), spawn.Array("i", PROBE_ROUNDS)  # calls through, per round
        racers = [spawn.Process(target=_probe_racer, args=(local_stack.aws_endpoint, table, clock, barrier, passed,
                                                           PROBE_ROUNDS)) for _ in range(PROBE_RACERS)]
        for racer in racers:
            racer.start()
        for _ in range(PROBE_ROUNDS):
            clock.advance(0.45)  # past the (restarted) cooldown
            for _step in range(3):
                barrier.wait(timeout=180)
        for racer in racers:
            racer.join(180)
        assert [racer.exitcode for racer in racers] == [0] * PROBE_RACERS
        assert list(passed) == [1] * PROBE_ROUNDS  # exactly one probe per round
        assert CircuitStore(Ledger(table, ddb, clock=clock)).read(TOOL).state is CircuitState.CLOSED
    finally:
        ddb.delete_table(TableName=table)


def _fail_then_hang_before_the_trip(endpoint: str, table: str, ready) -> None:
    """An orchestrator whose tool call failed: its ``ADD falhas`` lands, and it is
    killed before the conditional trip (the write that opens the circuit)."""
    from orchestrator.breaker import CircuitBreaker
    from orchestrator.controls import CallOutcome
    from orchestrator.invokers import Invocation, InvocationStatus
    from tests.test_orchestrator_breaker import _ctx

    breaker = CircuitBreaker(Ledger(table, session_client("dynamodb", endpoint)), failures=2, cooldown_s=30)

    def hang(*_args) -> bool:
        ready.set()
        time.sleep(600)  # SIGKILLed here
        return False

    breaker.store.trip = hang
    ctx = _ctx()
    assert breaker.before(ctx) is None
    breaker.after(ctx, CallOutcome(invocation=Invocation(InvocationStatus.FUNCTION_ERROR)))


def test_an_instance_sigkilled_between_its_failure_and_the_trip_leaves_the_next_failure_to_open_it(local_stack):
    """Two failures counted (N = 2), the second's writer SIGKILLed before its trip: the
    circuit is still closed with ``falhas = 2``. The next failure, from another
    process, opens it (its count is 3 ≥ N) — one call later than N, never lost."""
    import os
    import signal

    from orchestrator.breaker import CircuitBreaker
    from orchestrator.circuit_store import CircuitState, CircuitStore
    from orchestrator.controls import CallOutcome
    from orchestrator.invokers import Invocation, InvocationStatus
    from tests.test_orchestrator_breaker import _ctx

    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    table = f"disjuntor-morto-{uuid.uuid4().hex[:10]}"
    ddb.create_table(**table_definition(table))
    store = CircuitStore(Ledger(table, ddb))
    try:
        store.add_failure(TOOL)  # the first failure, from anyone
        spawn = mp.get_context("spawn")
        ready = spawn.Event()
        victim = spawn.Process(target=_fail_then_hang_before_the_trip, args=(local_stack.aws_endpoint, table, ready))
        victim.start()
        assert ready.wait(120)
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(30)
        assert victim.exitcode == -signal.SIGKILL
        left = store.read(TOOL)
        assert (left.state, left.failures) == (CircuitState.CLOSED, 2)

        survivor = CircuitBreaker(Ledger(table, ddb), failures=2, cooldown_s=30, closed_cache_s=2)
        ctx = _ctx()
        assert survivor.before(ctx) is None  # closed: the call goes out
        survivor.after(ctx, CallOutcome(invocation=Invocation(InvocationStatus.TIMEOUT)))
        assert store.read(TOOL).state is CircuitState.OPEN
        assert survivor.before(_ctx()) is not None
    finally:
        ddb.delete_table(TableName=table)
