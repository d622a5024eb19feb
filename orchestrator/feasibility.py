"""Feasibility: a call the tool itself would refuse is refused before anyone is
asked to approve it (DESIGN's control chain: after the retry ceiling, before the
confirmation gate).

A tool whose registry row has ``feasibility`` (the refund) is checked against the
order as the status tool reads it — ``consultar_status_pedido``, which the
orchestrator may already invoke: no new privilege. Its read has the customer in
its WHERE clause, so another customer's order and an order that does not exist
are the same "not found"; this control turns both into the same refusal (the
refund tool's own code and sentence), so no answer tells a customer that someone
else's order exists, or was refunded. An amount above the order's value minus
what the ERP says was refunded is refused too: the tool's balance also subtracts
the reservations in flight, so it can only be smaller — this refuses nothing the
tool would accept.

    the tool's row has no feasibility ─────────────────────────────► pass
    this conversation's claim for the call's key answers it by itself ► pass
        (the tool answers a repeat from its claim, before any balance check)
    the order, read through the status tool:
        not read (no time, no answer) ─► pass: the tool decides; the gate fails closed
        not found ─► refuse pedido_nao_encontrado (foreign or nonexistent: one answer)
        amount > value − refunded ─► refuse valor_excede_saldo
        else ─► pass

The read is kept in the call's context (``order_read``), so the confirmation gate
asks nothing twice. A refusal leaves one audit link (``CHAMADA_INVIAVEL``); the
call stays counted by the retry ceiling, never invoked, and the model goes on
(as after the tool's own refusal).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

from cadencia_shared.catalog import CONSULTAR_STATUS_PEDIDO
from cadencia_shared.ledger import ClaimStatus, Ledger, RefundClaim
from cadencia_shared.observability import Metric, count_for_tool

from .controls import CallContext, CallOutcome, Refusal, RetryCeiling
from .invokers import ToolInvoker

FEASIBILITY_EVENT = "CHAMADA_INVIAVEL"
CENT = Decimal("0.01")


class FeasibilityRefusal(StrEnum):
    """The ``erro`` the model reads: the refund tool's own codes (wire names)."""

    ORDER_NOT_FOUND = "pedido_nao_encontrado"
    ABOVE_BALANCE = "valor_excede_saldo"


@dataclass(frozen=True)
class OrderRead:
    """What the status tool said of the call's order: not found, or its figures."""

    found: bool
    order_amount: Decimal = Decimal(0)
    refunded: Decimal = Decimal(0)

    @property
    def refundable(self) -> Decimal:
        """An upper bound of the refund tool's balance (which also subtracts reservations)."""
        return self.order_amount - self.refunded


_READ = "pedido"  # ctx.notes keys shared by this module's readers
_CLAIM = "reivindicacao"


def own_claim(ctx: CallContext, ledger: Ledger) -> RefundClaim | None:
    """This conversation's claim for the call's idempotency key (read once per call)."""
    if _CLAIM not in ctx.notes:
        key = ctx.call.idempotency_key
        ctx.notes[_CLAIM] = None if key is None else ledger.get_claim(key)
    claim: RefundClaim | None = ctx.notes[_CLAIM]
    return claim


def order_read(ctx: CallContext, invoker: ToolInvoker, reserve_s: float) -> OrderRead | None:
    """The call's order through the status tool (once per call); None: not read —
    too little time left for it and the call itself, no answer, or an answer that
    is neither the order nor "not found"."""
    if _READ not in ctx.notes:
        ctx.notes[_READ] = _read(ctx, invoker, reserve_s)
    read: OrderRead | None = ctx.notes[_READ]
    return read


def _read(ctx: CallContext, invoker: ToolInvoker, reserve_s: float) -> OrderRead | None:
    call = ctx.call
    if ctx.deadline.remaining_s() - reserve_s < CONSULTAR_STATUS_PEDIDO.timeout_s + call.spec.timeout_s:
        return None
    event = {"pedidoId": call.order_id, "conversaId": call.conversation_id, "clienteId": call.customer_id}
    answer = invoker.invoke(CONSULTAR_STATUS_PEDIDO, event)
    payload = answer.payload if answer.answered and isinstance(answer.payload, dict) else {}
    if payload.get("ok") is False:
        error = payload.get("erro")
        code = error.get("codigo") if isinstance(error, dict) else None
        return OrderRead(found=False) if code == FeasibilityRefusal.ORDER_NOT_FOUND else None
    data = payload.get("dados") if payload.get("ok") is True else None
    if not isinstance(data, dict):
        return None
    try:
        figures = Decimal(str(data["valorPedido"])), Decimal(str(data["valorReembolsado"]))
    except (KeyError, InvalidOperation):
        return None
    if not all(f.is_finite() and f >= 0 for f in figures):  # never NaN: it would not compare
        return None
    return OrderRead(found=True, order_amount=figures[0], refunded=figures[1])


def answered_by_claim(claim: RefundClaim | None, customer_id: int, now_ms: int) -> bool:
    """True when the tool answers the call from this claim alone, before any
    ownership or balance check: a claim it cannot take for a new request (not
    released, not an in-progress claim whose lease is over)."""
    if claim is None or claim.customer_id != customer_id:
        return False
    if claim.status is ClaimStatus.FAILED_BEFORE_GATEWAY:
        return False
    return not (claim.status is ClaimStatus.IN_PROGRESS and claim.lease_expired(now_ms))


class Feasibility:
    def __init__(self, ledger: Ledger, invoker: ToolInvoker, *, reserve_s: float) -> None:
        self.ledger = ledger
        self.invoker = invoker
        self.reserve_s = reserve_s

    def before(self, ctx: CallContext) -> Refusal | None:
        check = ctx.call.spec.feasibility
        if check is None:
            return None
        if answered_by_claim(own_claim(ctx, self.ledger), ctx.call.customer_id, self.ledger.now_ms()):
            return None
        read = order_read(ctx, self.invoker, self.reserve_s)
        if read is None:
            return None
        order = ctx.call.order_id
        if not read.found:
            # The refund tool's own sentence for an unknown order, word for word.
            return self._refuse(ctx, FeasibilityRefusal.ORDER_NOT_FOUND,
                                {"mensagem": f"Pedido {order} não encontrado para este cliente."})
        amount = Decimal(str(ctx.call.arguments[check.amount_field]))
        if amount <= read.refundable:
            return None
        reais = {"valor": _reais(amount), "valorPedido": _reais(read.order_amount),
                 "valorReembolsado": _reais(read.refunded)}
        text = (f"O valor R$ {reais['valor']} excede o saldo reembolsável do pedido {order} "
                f"(valor do pedido R$ {reais['valorPedido']}, já reembolsado R$ {reais['valorReembolsado']}). "
                "Nada foi executado.")
        return self._refuse(ctx, FeasibilityRefusal.ABOVE_BALANCE, {"mensagem": text, **reais})

    def _refuse(self, ctx: CallContext, reason: FeasibilityRefusal, details: dict[str, Any]) -> Refusal:
        call = ctx.call
        count_for_tool(Metric.TOOL_REFUSALS, call.spec.name)
        attempt = ctx.notes.get(RetryCeiling)  # the number the ceiling gave this call
        self.ledger.append_audit(conversation_id=call.conversation_id, event=FEASIBILITY_EVENT, details={
            "ferramenta": call.spec.name, "assunto": call.subject, "pedidoId": call.order_id,
            "motivo": reason.value, "tentativaNumero": None if attempt is None else attempt.number,
            "mensagemId": ctx.message_id})
        return Refusal(reason, details)

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        return None


def _reais(value: Decimal) -> str:
    return format(value.quantize(CENT), "f")
