"""The money scenarios: a SIGKILL at every point of the refund path, the in-flight
reconciliation race, and many processes racing for one order.

Every scenario uses fresh orders of R$ 100.00 and asks for the whole value, so any
second debit of an order is an over-refund. Retries are the ones AWS makes: the same
event again (Lambda's async retry, a redelivered message), another conversation of
the same customer on the same order, the same event after the claim's lease expired,
and — when the project has one — a pass of the scheduled reconciler.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from cadencia_shared.catalog import EMITIR_REEMBOLSO

from .fleet import Answer, Fleet, Running
from .truth import Verdicts, judge_all
from .world import CUSTOMER, World

ORDER_VALUE = Decimal("100.00")
CRASH_POINTS = {
    "after_claim": "after the claim (conditional PutItem)",
    "after_secret": "after the gateway secret is read",
    "during_gateway": "during the gateway call (request held by the gateway)",
    "after_debit": "after the debit, before the ledger settle",
    "after_erp": "after the ERP commit, before the ledger settle",
    "after_settle": "after the ledger settle (executed, ERP agreeing), before the answer",
}
RACE_VARIANTS = {
    "other_amount": "A's retry asks another amount (R$ 150.00, refused), then B asks",
    "retry_killed": "A's retry is SIGKILLed after it releases the reservation (or before it answers), then B asks",
    "concurrent": "A's retry and B at the same time",
}
Reconciler = Callable[[Fleet, World], list[Answer]]


@dataclass
class Tally:
    """One row of the table: several trials of one scenario."""

    name: str
    description: str
    trials: int = 0
    seam_hits: int = 0
    over_value: int = 0
    exactly_one: int = 0
    consistent: int = 0
    debit_counts: list[int] = field(default_factory=list)
    totals: list[Decimal] = field(default_factory=list)
    verdicts: Verdicts = field(default_factory=Verdicts)
    notes: list[str] = field(default_factory=list)


def _event(conv: str, order_id: str, amount: Decimal = ORDER_VALUE) -> dict:
    return {"conversaId": conv, "clienteId": CUSTOMER, "pedidoId": order_id, "valor": float(amount)}


def _record(tally: Tally, world: World, order_id: str, convs: list[str], answers: list[Answer]) -> None:
    book = world.book(order_id, convs)
    tally.trials += 1
    tally.debit_counts.append(len(book.gateway_debits))
    tally.totals.append(book.gateway_total)
    tally.over_value += book.gateway_total > book.order_value
    tally.exactly_one += len(book.gateway_debits) == 1
    if book.consistent:
        tally.consistent += 1
    else:
        tally.notes.append(f"{order_id}: ledger {book.ledger_total}, gateway {book.gateway_total}, "
                           f"ERP {book.erp_refunded}")
    judge_all(answers, book, tally.verdicts)


def _retries(fleet: Fleet, world: World, order_id: str, a: str, b: str,
             reconciler: Reconciler | None) -> list[Answer]:
    """The retries AWS would make after a death, in the order they would come."""
    answers = [fleet.run(EMITIR_REEMBOLSO, _event(a, order_id), label=f"{order_id} A de novo"),
               fleet.run(EMITIR_REEMBOLSO, _event(b, order_id), label=f"{order_id} B, outra conversa")]
    time.sleep(world.timing.lease_s + 0.3)
    answers.append(fleet.run(EMITIR_REEMBOLSO, _event(a, order_id), label=f"{order_id} A após o lease"))
    if reconciler is not None:
        answers += reconciler(fleet, world)
    answers += [fleet.run(EMITIR_REEMBOLSO, _event(a, order_id), label=f"{order_id} A no fim"),
                fleet.run(EMITIR_REEMBOLSO, _event(b, order_id), label=f"{order_id} B no fim")]
    return answers


def _die_at(fleet: Fleet, world: World, point: str, event: dict) -> Answer:
    if point != "during_gateway":
        return fleet.run(EMITIR_REEMBOLSO, event, kill_at=point, label=f"{event['pedidoId']} A morre")
    world.gateway.inject(world.hold_fault(), delay_s=world.timing.held_s)
    running = fleet.start(EMITIR_REEMBOLSO, event, kill_at=point, label=f"{event['pedidoId']} A morre")
    if running.wait_for_seam(15):
        time.sleep(0.2)  # the POST is on the wire and the gateway is holding it
    running.kill()
    return running.join()


def crash_point(fleet: Fleet, world: World, point: str, trials: int, reconciler: Reconciler | None) -> Tally:
    tally = Tally(point, CRASH_POINTS[point])
    for trial in range(trials):
        order_id = world.new_order(ORDER_VALUE)
        a, b = f"{order_id}-t{trial}-a", f"{order_id}-t{trial}-b"
        first = _die_at(fleet, world, point, _event(a, order_id))
        tally.seam_hits += first.seam_reached and first.killed
        answers = [first, *_retries(fleet, world, order_id, a, b, reconciler)]
        if point == "during_gateway":
            time.sleep(world.timing.held_s)  # what the gateway still held has landed by now
        _record(tally, world, order_id, [a, b], answers)
    return tally


def _race_retry(fleet: Fleet, variant: str, a: str, b: str, order_id: str) -> list[Answer]:
    if variant == "other_amount":
        return [fleet.run(EMITIR_REEMBOLSO, _event(a, order_id, Decimal("150.00")), label=f"{order_id} A pede 150"),
                fleet.run(EMITIR_REEMBOLSO, _event(b, order_id), label=f"{order_id} B")]
    if variant == "retry_killed":
        dead = fleet.run(EMITIR_REEMBOLSO, _event(a, order_id), kill_at="retry_dies",
                         label=f"{order_id} A de novo, morre")
        return [dead, fleet.run(EMITIR_REEMBOLSO, _event(b, order_id), label=f"{order_id} B")]
    both: list[Running] = [fleet.start(EMITIR_REEMBOLSO, _event(a, order_id), label=f"{order_id} A de novo"),
                           fleet.start(EMITIR_REEMBOLSO, _event(b, order_id), label=f"{order_id} B")]
    return [r.join() for r in both]


def in_flight_race(fleet: Fleet, world: World, variant: str, trials: int, reconciler: Reconciler | None) -> Tally:
    """A's POST times out while the gateway still holds it; then A retries, B asks too."""
    tally = Tally(variant, RACE_VARIANTS[variant])
    for trial in range(trials):
        order_id = world.new_order(ORDER_VALUE)
        a, b = f"{order_id}-r{trial}-a", f"{order_id}-r{trial}-b"
        held_since = time.monotonic()
        world.gateway.inject(world.hold_fault(), delay_s=world.timing.held_s)
        answers = [fleet.run(EMITIR_REEMBOLSO, _event(a, order_id), label=f"{order_id} A (POST expira)")]
        answers += _race_retry(fleet, variant, a, b, order_id)
        tally.seam_hits += any(x.killed and x.seam_reached for x in answers)
        time.sleep(max(0.0, held_since + world.timing.held_s + 0.5 - time.monotonic()))
        time.sleep(world.timing.lease_s + 0.3)
        if reconciler is not None:
            answers += reconciler(fleet, world)
        answers += [fleet.run(EMITIR_REEMBOLSO, _event(a, order_id), label=f"{order_id} A no fim"),
                    fleet.run(EMITIR_REEMBOLSO, _event(b, order_id), label=f"{order_id} B no fim")]
        _record(tally, world, order_id, [a, b], answers)
    return tally


def identical_storm(fleet: Fleet, world: World, processes: int) -> Tally:
    """N processes send the very same refund event at once: one debit."""
    tally = Tally("identical", f"{processes} identical refunds in separate processes")
    order_id = world.new_order(ORDER_VALUE)
    conv = f"{order_id}-mesmo"
    running = [fleet.start(EMITIR_REEMBOLSO, _event(conv, order_id), label=f"{order_id} #{i}")
               for i in range(processes)]
    answers = [r.join() for r in running]
    _record(tally, world, order_id, [conv], answers)
    return tally


def conversation_storm(fleet: Fleet, world: World, processes: int) -> Tally:
    """N conversations ask R$ 30.00 of one R$ 100.00 order at once: at most 3 debits."""
    tally = Tally("conversations", f"{processes} conversations on one R$ 100.00 order, R$ 30.00 each")
    order_id = world.new_order(ORDER_VALUE)
    convs = [f"{order_id}-c{i}" for i in range(processes)]
    running = [fleet.start(EMITIR_REEMBOLSO, _event(c, order_id, Decimal("30.00")), label=f"{order_id} {c}")
               for c in convs]
    answers = [r.join() for r in running]
    _record(tally, world, order_id, convs, answers)
    return tally
