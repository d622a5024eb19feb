"""The refund, exactly once. No AWS or HTTP call is made here directly: the
ledger, the secret, the gateway and the ERP repository are injected. Every
change of a claim goes through ``transitions.step`` (one table), so releasing
money is one transition, reachable only on a definitive answer.

1. **Decide** — one short transaction holding the order's row lock:
   ownership (the same error for unknown and foreign orders, so nothing leaks);
   then the claim for ``{conversaId}#{pedidoId}#reembolso`` in the ledger:

   - final (executed / declined) -> ``bloqueado_por_idempotencia`` with the
     original outcome; the secret is never read and the gateway never called;
   - in progress, sending or reconciling under a live lease -> ``em_processamento``;
   - unknown, or sending/reconciling with an expired lease (a request may have
     left) -> **reconcile** (2');
   - absent, failed before the gateway, or in progress with an expired lease
     (no send was ever recorded) -> check the amount against the balance, reserve
     it in the ERP and claim the key (conditional PutItem, or a fenced retake) —
     all **before** the secret may be read.
2. **Execute** — read the gateway secret, record ``envio_possivel`` (fenced),
   then POST with ``Idempotency-Key`` = the key. No database lock is held during
   the call. No answer -> *unknown*, and one immediate reconciliation.
2'. **Reconcile** — take the claim over (fenced) and re-send the *same* request:
   same key, the claim's own order and amount (never a retry's new amount). The
   gateway answers the original outcome, performs it exactly once, or says it is
   still in flight (409): then the outcome stays unknown and the amount held.
   The scheduled reconciler (``conciliar_reembolsos``) runs this same step.
3. **Settle** — the transition's money action: apply (ERP updated once per key,
   in one transaction), release, or hold.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from cadencia_shared.ledger import (
    FINAL_CLAIM_STATUSES,
    ClaimStatus,
    ClaimTaken,
    Ledger,
    RefundClaim,
    refund_idempotency_key,
)
from cadencia_shared.observability import Metric, count_for_tool
from cadencia_shared.results import ErrorCode, ToolError, ToolResponse

from . import answers
from .answers import TOOL, Outcome
from .gateway import (
    GatewayNotReached,
    GatewayOutcomeUnknown,
    GatewayRefund,
    GatewayRejected,
    PaymentGatewayClient,
)
from .models import RefundRequest
from .releases import finish_release, free_released_reservations, mark_released
from .repository import OrderForRefund, RefundOrders
from .transitions import Event, Money, step

__all__ = ["TOOL", "Outcome", "RefundService"]

# Claims a new request may take: no request can have left for their key.
_TAKEABLE = frozenset({ClaimStatus.FAILED_BEFORE_GATEWAY})


@dataclass(frozen=True)
class _Execute:
    claim: RefundClaim


@dataclass(frozen=True)
class _Reconcile:
    claim: RefundClaim


class _HeldByOthers(Exception):
    """The amount exceeds the balance while other keys hold reservations of the order:
    one of them may be a reservation the ledger already released (a release whose
    ERP commit was lost). Leaves the decision transaction before anything is written."""

    def __init__(self, refusal: ToolError) -> None:
        self.refusal = refusal


class _Answer(Exception):
    """Leave the decision transaction with an answer, rolling back what it wrote."""

    def __init__(self, response: ToolResponse) -> None:
        self.response = response


@dataclass(frozen=True)
class _Heard:
    """What the gateway said to one request, as an event of the state machine."""

    event: Event
    refund: GatewayRefund | None = None
    detail: str | None = None


@dataclass
class RefundService:
    ledger: Ledger
    orders: RefundOrders
    gateway: PaymentGatewayClient
    read_gateway_token: Callable[[], str]  # reads the secret; called only after a claim
    claim_lease_s: int
    # Past this many seconds from the first possible send, the gateway may have
    # forgotten the key (Stripe: 24 h) and a re-send could debit again.
    idempotency_window_s: int = 23 * 3600

    def issue(self, req: RefundRequest) -> ToolResponse:
        key = refund_idempotency_key(req.conversaId, req.pedidoId)
        known = answer_from_claim(self.ledger.get_claim(key), req.clienteId, self.ledger.now_ms())
        if known is not None:
            return known
        step_ = self._decide_freeing_released(req, key)
        if isinstance(step_, ToolResponse):
            return step_
        if isinstance(step_, _Execute):
            return self._execute(step_.claim)
        return self.reconcile(step_.claim, as_repeat=True)

    # -- 1. decide ------------------------------------------------------------------
    def _decide_freeing_released(self, req: RefundRequest, key: str) -> ToolResponse | _Execute | _Reconcile:
        """Decide; when the balance refuses the amount while other keys hold part of
        it, free the reservations the ledger has released and decide once more, so
        "exceeds the balance" is said only of amounts really held."""
        try:
            return self._decide(req, key)
        except _HeldByOthers as held:
            if not free_released_reservations(self.ledger, self.orders, order_id=req.pedidoId, key=key):
                raise held.refusal from None
        try:
            return self._decide(req, key)
        except _HeldByOthers as held:
            raise held.refusal from None

    # (answer_from_claim, below the class, runs first: a repeat the claim alone answers.)
    def _decide(self, req: RefundRequest, key: str) -> ToolResponse | _Execute | _Reconcile:
        repaired: RefundClaim | None = None
        try:
            with self.orders.transaction():
                order = self.orders.lock(req.pedidoId, key=key)
                if order is None or order.customer_id != req.clienteId:
                    raise ToolError(ErrorCode.ORDER_NOT_FOUND,
                                    f"Pedido {req.pedidoId} não encontrado para este cliente.")
                existing = self.ledger.get_claim(key)
                if existing is not None and not self._takeable(existing):
                    if existing.status is ClaimStatus.EXECUTED and not existing.erp_updated:
                        # A crash after the debit left the ERP behind: repair it, once.
                        self.orders.apply_executed(key=key, order_id=existing.order_id, amount=existing.amount)
                        repaired = existing
                    answer: ToolResponse | _Execute | _Reconcile = self._answer_existing(existing)
                else:
                    answer = _Execute(self._claim(req, key, order, existing))
        except _Answer as early:
            return early.response
        if repaired is not None:
            self.ledger.mark_erp_updated(repaired)  # after COMMIT, never before
        return answer

    def _takeable(self, claim: RefundClaim) -> bool:
        """Proven that no request left for the key: released, or abandoned before
        it recorded a possible send."""
        if claim.status in _TAKEABLE:
            return True
        return claim.status is ClaimStatus.IN_PROGRESS and claim.lease_expired(self.ledger.now_ms())

    def _answer_existing(self, claim: RefundClaim) -> ToolResponse | _Reconcile:
        if claim.status in FINAL_CLAIM_STATUSES:
            return answers.repeat(claim, reconciled=False)
        if claim.status is ClaimStatus.UNKNOWN or claim.lease_expired(self.ledger.now_ms()):
            return _Reconcile(claim)
        return answers.in_progress(claim)

    def _claim(self, req: RefundRequest, key: str, order: OrderForRefund,
               existing: RefundClaim | None) -> RefundClaim:
        """Check the balance, reserve, claim: the CLAIMED transition (money: reserve)."""
        step(existing.status if existing else None, Event.CLAIMED)  # raises on a take the table forbids
        if req.valor > order.balance:
            refusal = answers.exceeds_balance(req.valor, order.id, order.balance)
            raise _HeldByOthers(refusal) if order.reserved_amount > 0 else refusal
        self.orders.reserve(key=key, order_id=req.pedidoId, amount=req.valor)
        try:
            if existing is not None:
                return self.ledger.retake_claim(existing, amount=req.valor, lease_s=self.claim_lease_s)
            return self.ledger.claim_refund(
                key=key, conversation_id=req.conversaId, order_id=req.pedidoId,
                customer_id=req.clienteId, amount=req.valor, lease_s=self.claim_lease_s,
            )
        except ClaimTaken as taken:  # only if something bypassed the row lock
            raise _Answer(self._answer_taken(taken.existing)) from None

    @staticmethod
    def _answer_taken(claim: RefundClaim) -> ToolResponse:
        if claim.status in FINAL_CLAIM_STATUSES:
            return answers.repeat(claim, reconciled=False)
        return answers.in_progress(claim)

    # -- 2. execute ------------------------------------------------------------------
    def _execute(self, claim: RefundClaim) -> ToolResponse:
        try:
            token = self.read_gateway_token()
        except Exception as err:  # the secret store failed before any send was recorded
            self.transition(claim, _Heard(Event.SECRET_FAILED, detail=f"segredo: {type(err).__name__}"))
            raise answers.unavailable() from None
        claim = self.transition(claim, _Heard(Event.SEND_RECORDED))
        heard = self._send(claim, token)
        claim = self.transition(claim, heard)
        if claim.status is ClaimStatus.FAILED_BEFORE_GATEWAY:
            raise answers.unavailable()
        if claim.status is ClaimStatus.UNKNOWN:
            # Ask once more, with the same request: the gateway may know by now.
            return self.reconcile(claim, token=token, as_repeat=False)
        return answers.settled(claim)

    # -- 2'. reconcile ----------------------------------------------------------------
    def reconcile(self, existing: RefundClaim, *, token: str | None = None, as_repeat: bool) -> ToolResponse:
        """A request may have left for this claim: the gateway decides, by the same
        request re-sent; the answer says what the ledger now shows."""
        claim, took_over = self.reconcile_claim(existing, token=token)
        if not took_over:
            return self._answer_taken(claim)
        if as_repeat and claim.status in FINAL_CLAIM_STATUSES:
            return answers.repeat(claim, reconciled=True)
        return answers.settled(claim)

    def reconcile_claim(self, existing: RefundClaim, *, token: str | None = None) -> tuple[RefundClaim, bool]:
        """Take the claim over (fenced) and re-send its own request (same key, its own
        order and amount). Returns the claim after the transition and True, or the
        claim another invocation holds and False. Also the scheduled reconciler's step."""
        try:
            claim = self.ledger.retake_claim(existing, amount=existing.amount, lease_s=self.claim_lease_s,
                                             status=step(existing.status, Event.RECONCILE_TAKEN).to)
        except ClaimTaken as taken:
            return taken.existing, False
        if self.past_idempotency_window(claim):
            count_for_tool(Metric.PAST_IDEMPOTENCY_WINDOW, TOOL)
            heard = _Heard(Event.WINDOW_EXPIRED, detail="janela de idempotência do gateway expirada: "
                                                       "conciliar manualmente")
            return self.transition(claim, heard), True
        if token is None:
            try:
                token = self.read_gateway_token()
            except Exception as err:  # an earlier request may have debited: hold
                heard = _Heard(Event.SECRET_FAILED, detail=f"conciliação: segredo {type(err).__name__}")
                return self.transition(claim, heard), True
        return self.transition(claim, self._send(claim, token)), True

    def past_idempotency_window(self, claim: RefundClaim) -> bool:
        """True when the gateway may no longer hold this claim's key."""
        return self.ledger.now_ms() - claim.first_possible_send_ms() >= self.idempotency_window_s * 1000

    def finish_executed(self, claim: RefundClaim) -> RefundClaim:
        """An executed claim whose ERP update was lost (a crash between the ledger and
        the ERP): add it to the order — once per key, whoever gets there first."""
        with self.orders.transaction():
            self.orders.apply_executed(key=claim.key, order_id=claim.order_id, amount=claim.amount)
        return self.ledger.mark_erp_updated(claim)

    def finish_release(self, claim: RefundClaim) -> tuple[RefundClaim, bool]:
        """A released claim still listed: its ERP release may not have committed (a
        crash between the ledger and the COMMIT). Free it under the row lock, then unlist."""
        return finish_release(self.ledger, self.orders, claim)

    def release_abandoned(self, existing: RefundClaim) -> tuple[RefundClaim, bool]:
        """An in-progress claim whose lease is over never recorded a send (that record
        precedes every POST), so nothing left for it: take it over (fenced, so a slow
        owner can no longer record a send) and release its amount."""
        try:
            claim = self.ledger.retake_claim(existing, amount=existing.amount, lease_s=self.claim_lease_s)
        except ClaimTaken as taken:
            return taken.existing, False
        heard = _Heard(Event.ABANDONED_BEFORE_SEND, detail="abandonada antes de qualquer envio")
        return self.transition(claim, heard), True

    def _send(self, claim: RefundClaim, token: str) -> _Heard:
        """POST the claim's own request and classify the answer as an event."""
        try:
            refund = self.gateway.refund(
                idempotency_key=claim.key, order_id=claim.order_id, amount=claim.amount, token=token
            )
        except GatewayNotReached as err:
            return _Heard(Event.NOT_REACHED, detail=str(err))
        except GatewayOutcomeUnknown as err:
            return _Heard(Event.NO_ANSWER, detail=str(err))
        except GatewayRejected as err:
            if err.code == "idempotency_key_reutilizada":
                return self._held_with_other_amount(claim, token)
            return _Heard(Event.REJECTED, detail=str(err))
        return self._heard_refund(refund)

    def _held_with_other_amount(self, claim: RefundClaim, token: str) -> _Heard:
        """422: the gateway holds this key for another amount (a claim that lost
        track of its own request). Its record is the truth when it can be read;
        "not found" proves nothing, so it holds."""
        try:
            found = self.gateway.lookup(idempotency_key=claim.key, token=token)
        except (GatewayNotReached, GatewayOutcomeUnknown, GatewayRejected) as err:
            return _Heard(Event.NO_ANSWER, detail=f"chave com outro valor; consulta: {err}")
        if found is None:
            return _Heard(Event.NO_ANSWER, detail="chave com outro valor; consulta sem registro")
        return self._heard_refund(found)

    @staticmethod
    def _heard_refund(refund: GatewayRefund) -> _Heard:
        # Only an explicit decline releases money: a status this client does not
        # know (a gateway's "pending") may still debit, so it holds like no answer.
        if refund.approved:
            return _Heard(Event.APPROVED, refund=refund)
        if refund.declined:
            return _Heard(Event.DECLINED, refund=refund)
        return _Heard(Event.NO_ANSWER, detail=f"status não final do gateway: {refund.status[:40]!r}")

    # -- 3. settle --------------------------------------------------------------------
    def transition(self, claim: RefundClaim, heard: _Heard) -> RefundClaim:
        """Apply one row of the table: the ledger first (fenced), then the money."""
        nxt = step(claim.status, heard.event)
        refund = heard.refund
        if nxt.money is Money.RELEASE:
            # The ledger write and the release commit under the order's row lock, the
            # lock a new request holds while it reads and retakes the claim: no request
            # can take the released key and reserve it again between the two, and so
            # have its fresh reservation freed by this release landing late. The claim
            # leaves the reconciler's list only after the COMMIT (releases.py).
            with self.orders.transaction():
                self.orders.lock_row(claim.order_id)
                claim = self.ledger.settle_claim(claim, nxt.to, detail=heard.detail,
                                                 gateway_transaction=refund.transaction_id if refund else None)
                self.orders.release(key=claim.key, order_id=claim.order_id)
            return mark_released(self.ledger, claim)
        settle = functools.partial(
            self.ledger.settle_claim, claim, nxt.to,
            gateway_transaction=refund.transaction_id if refund else None, detail=heard.detail,
            # The gateway's record is the truth about the amount it debited.
            amount=refund.amount if refund is not None and nxt.money is Money.APPLY else None)
        if nxt.money is not Money.APPLY:
            return settle()
        if refund is not None and not refund.replayed:
            count_for_tool(Metric.REAL_REFUNDS, TOOL)
        # The ERP first, then one claim write that says "executed" and "the ERP agrees"
        # (one write fewer than settling, then flagging). The ERP's update is once per
        # key, so a crash between the two is safe: the claim still says a request may
        # have left (SENDING or RECONCILING), and whoever takes it over re-sends the same
        # request, hears the replayed approval and lands here again, adding nothing.
        try:
            with self.orders.transaction():
                self.orders.apply_executed(key=claim.key, order_id=claim.order_id,
                                           amount=refund.amount if refund is not None else claim.amount)
        except Exception:
            settle()  # the ERP failed: the ledger still proves the debit, listed for the repair
            raise
        return settle(erp_updated=True)


def answer_from_claim(claim: RefundClaim | None, customer_id: int, now_ms: int) -> ToolResponse | None:
    """The answer a repeat gets from its claim alone (one strongly consistent read,
    no SQL, no order lock), or None: decide under the order's row lock.

    Only answers that change nothing and stay true whatever happens next:

    - a final claim (``executado`` with the ERP already updated, ``recusado``): final
      states have no way out in the transition table, so no lock could change them;
    - a claim someone works on under a live lease: the locked path says the same
      ``em_processamento`` (the lock never shortens a lease).

    Everything else takes the locked path, which reads the claim again under the lock:
    an absent or released claim (the balance check and the reservation need the lock),
    an unknown outcome or an expired lease (reconcile), an executed claim whose ERP
    update was lost (repair), and a claim of another customer (the same "not found"
    as an unknown order: ownership is decided by the order row, never by the claim).
    """
    if claim is None or claim.customer_id != customer_id:
        return None
    if claim.status is ClaimStatus.DECLINED or (claim.status is ClaimStatus.EXECUTED and claim.erp_updated):
        return answers.repeat(claim, reconciled=False)
    if claim.status in _WORKED_ON and not claim.lease_expired(now_ms):
        return answers.in_progress(claim)
    return None


# Claims an owner is driving (the ones a live lease protects).
_WORKED_ON = frozenset({ClaimStatus.IN_PROGRESS, ClaimStatus.SENDING, ClaimStatus.RECONCILING})
