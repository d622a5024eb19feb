"""Race escape: N separate OS processes attempt one (conversation, order, tool)
at the same moment, for R rounds, against both designs' ceilings.

This project: one ``Ledger.register_attempt`` each (an atomic counter). Lab 87:
its Query count, then the attempt record (count-then-act). The allowed count
per round should be exactly the ceiling (4).
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from . import lab87

CEILING = 4


def _worker(design: str, endpoint: str, table: str, rounds: int, barrier: Any, results: Any) -> None:
    from cadencia_shared.ledger import Ledger
    from scripts.local_stack.aws import session_client

    ddb = session_client("dynamodb", endpoint)
    ledger = Ledger(table, ddb)
    gate = lab87.Lab87Gate(ddb, session_client("cloudwatch", endpoint))
    for r in range(rounds):
        conversa, order = f"corrida-{design}-{r}", "7777"
        barrier.wait()
        if design == "cadencia":
            allowed = ledger.register_attempt(conversation_id=conversa, subject=order, tool="emitir_reembolso",
                                              ceiling=CEILING, order_id=order, idempotency_key=None).allowed
        else:
            numero = gate.evaluate(conversa, "emitir_reembolso", order)
            allowed = numero is not None
            if allowed:
                gate.record(conversa, "emitir_reembolso", order, numero, "executado")
        results.put((r, allowed))


def race_one(state: Any, design: str, processes: int, rounds: int) -> list[int]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    table = state.ledger_table if design == "cadencia" else lab87.TABLE
    workers = [ctx.Process(target=_worker, args=(design, state.aws_endpoint, table, rounds, barrier, results))
               for _ in range(processes)]
    for w in workers:
        w.start()
    allowed = [0] * rounds
    for _ in range(processes * rounds):
        r, ok = results.get(timeout=300)
        allowed[r] += int(ok)
    for w in workers:
        w.join(timeout=60)
    return allowed


def race(state: Any, *, processes: int, rounds: int) -> dict[str, list[int]]:
    return {design: race_one(state, design, processes, rounds) for design in ("cadencia", "lab87")}
