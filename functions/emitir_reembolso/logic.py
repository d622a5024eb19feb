"""The refund, exactly once. No AWS or HTTP call is made here directly: the
ledger, the secret, the gateway and the ERP repository are injected.

1. **Decide** — one short transaction holding the order's row lock:
   ownership (the same error for unknown and foreign orders, so nothing leaks);
   then the claim for ``{conversaId}#{pedidoId}#reembolso`` in the ledger:

   - final (executed / declined) -> ``bloqueado_por_idempotencia`` with the
     original outcome; the secret is never read and the gateway never called;
   - in progress under a live lease -> ``em_processamento`` (nothing read or sent);
   - unknown outcome, or in progress with an expired lease -> **reconcile** (2');
   - absent, or failed before the gateway -> check the amount against the balance
     (order value - refunded - amounts *reserved* by refunds still in flight),
     reserve it in the ERP, and claim the key with a conditional PutItem (or
     retake it) — all **before** the secret may be read.
2. **Execute** — only now read the gateway secret, and debit with
   ``Idempotency-Key`` = the key. No database lock is held during the call.
2'. **Reconcile** — take the claim over (fenced), read the secret, look the key
   up at the gateway: what it holds is settled; if it holds nothing, nothing was
   debited, the reservation is released and the decision starts again.
3. **Settle** — record the outcome in the ledger (fenced on the claim owner);
   executed -> the reservation becomes *executado* and the ERP is updated in one
   transaction (once per key); declined or not sent -> the reservation is released;
   unknown -> it keeps holding the amount until the gateway says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

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

from .gateway import (
    GatewayNotReached,
    GatewayOutcomeUnknown,
    GatewayRefund,
    GatewayRejected,
    PaymentGatewayClient,
)
from .models import RefundRequest
from .repository import OrderForRefund, RefundOrders

TOOL = "emitir_reembolso"
_LOOKUP_FAILURES = (GatewayNotReached, GatewayOutcomeUnknown, GatewayRejected)


class Outcome:
    """``resultado`` values this tool answers with."""

    EXECUTED = "executado"
    BLOCKED_BY_IDEMPOTENCY = "bloqueado_por_idempotencia"
    DECLINED = "recusado_pelo_gateway"
    IN_PROGRESS = "em_processamento"
    UNKNOWN = "resultado_desconhecido"


@dataclass(frozen=True)
class _Execute:
    claim: RefundClaim


@dataclass(frozen=True)
class _Reconcile:
    claim: RefundClaim


class _Answer(Exception):
    """Leave the decision transaction with an answer, rolling back what it wrote."""

    def __init__(self, response: ToolResponse) -> None:
        self.response = response


@dataclass
class RefundService:
    ledger: Ledger
    orders: RefundOrders
    gateway: PaymentGatewayClient
    read_gateway_token: Callable[[], str]  # reads the secret; called only after a claim
    claim_lease_s: int

    def issue(self, req: RefundRequest) -> ToolResponse:
        chave = refund_idempotency_key(req.conversaId, req.pedidoId)
        # At most: reconcile a claim the gateway never saw, then decide afresh.
        for _ in range(2):
            step = self._decide(req, chave)
            if isinstance(step, ToolResponse):
                return step
            if isinstance(step, _Execute):
                return self._execute(step.claim)
            answer = self._reconcile(step.claim)
            if answer is not None:
                return answer
        raise RuntimeError(f"refund {chave}: the claim changed under reconciliation twice")

    # -- 1. decide ------------------------------------------------------------------
    def _decide(self, req: RefundRequest, chave: str) -> ToolResponse | _Execute | _Reconcile:
        repaired: RefundClaim | None = None
        try:
            with self.orders.transaction():
                order = self.orders.lock(req.pedidoId, chave=chave)
                if order is None or order.cliente_id != req.clienteId:
                    raise ToolError(ErrorCode.ORDER_NOT_FOUND,
                                    f"Pedido {req.pedidoId} não encontrado para este cliente.")
                existing = self.ledger.get_claim(chave)
                if existing is not None and existing.status is not ClaimStatus.FAILED_BEFORE_GATEWAY:
                    if existing.status in FINAL_CLAIM_STATUSES:
                        if existing.status is ClaimStatus.EXECUTED and not existing.erp_atualizado:
                            # A crash after the debit left the ERP behind: repair it, once.
                            self.orders.apply_executed(chave=chave, pedido_id=existing.pedido_id,
                                                       valor=existing.valor)
                            repaired = existing
                        answer: ToolResponse | _Reconcile = self._repeat(existing, reconciled=False)
                    elif existing.status is ClaimStatus.IN_PROGRESS and not existing.lease_expired(
                            self.ledger.now_ms()):
                        answer = self._in_progress(existing)
                    else:
                        answer = _Reconcile(existing)
                else:
                    self._check_amount(req.valor, order)
                    self.orders.reserve(chave=chave, pedido_id=req.pedidoId, valor=req.valor)
                    try:
                        claim = (
                            self.ledger.retake_claim(existing, valor=req.valor, lease_s=self.claim_lease_s)
                            if existing is not None
                            else self.ledger.claim_refund(
                                chave=chave, conversa_id=req.conversaId, pedido_id=req.pedidoId,
                                cliente_id=req.clienteId, valor=req.valor, lease_s=self.claim_lease_s,
                            )
                        )
                    except ClaimTaken as taken:  # only if something bypassed the row lock
                        raise _Answer(self._answer_for(taken.existing)) from None
                    answer = _Execute(claim)
        except _Answer as early:
            return early.response
        if repaired is not None:
            self.ledger.mark_erp_updated(repaired)  # after COMMIT, never before
        return answer

    @staticmethod
    def _check_amount(valor: Decimal, order: OrderForRefund) -> None:
        if valor > order.saldo:
            raise ToolError(
                ErrorCode.AMOUNT_EXCEEDS_BALANCE,
                f"O valor R$ {valor} excede o saldo reembolsável do pedido {order.id} (R$ {order.saldo}).",
                detalhes={"saldo": str(order.saldo)},
            )

    # -- 2. execute ------------------------------------------------------------------
    def _execute(self, claim: RefundClaim) -> ToolResponse:
        try:
            token = self.read_gateway_token()
        except Exception as err:  # the secret store failed: nothing was sent
            self._free(claim, f"segredo: {type(err).__name__}")
            raise self._unavailable() from None
        try:
            refund = self.gateway.refund(
                idempotency_key=claim.chave, pedido_id=claim.pedido_id, valor=claim.valor, token=token
            )
        except GatewayNotReached as err:
            self._free(claim, str(err))
            raise self._unavailable() from None
        except GatewayRejected as err:
            if err.codigo == "idempotency_key_reutilizada":
                # The gateway already holds this key (with another amount): it decides.
                return self._settle_from_lookup(claim, token)
            self._free(claim, str(err))
            raise ToolError(ErrorCode.GATEWAY_UNAVAILABLE, "O gateway recusou a requisição; nada foi debitado.") from None
        except GatewayOutcomeUnknown as err:
            claim = self.ledger.settle_claim(claim, ClaimStatus.UNKNOWN, detalhe=str(err))
            return self._settle_from_lookup(claim, token)
        return self._settled(claim, refund)

    # -- 2'. reconcile ----------------------------------------------------------------
    def _reconcile(self, existing: RefundClaim) -> ToolResponse | None:
        """Unknown outcome or abandoned claim: the gateway decides, never a guess.
        Returns None when the key never reached the gateway (the claim is free)."""
        try:
            claim = self.ledger.retake_claim(existing, valor=existing.valor, lease_s=self.claim_lease_s)
        except ClaimTaken as taken:
            return self._answer_for(taken.existing)
        try:
            token = self.read_gateway_token()
            found = self.gateway.lookup(idempotency_key=claim.chave, token=token)
        except Exception as err:  # secret store or gateway down: an earlier attempt may have debited
            return self._unknown(claim, f"conciliação: {type(err).__name__}")
        if found is not None:
            return self._as_repeat(self._settled(claim, found))
        self._free(claim, "conciliação: chave ausente no gateway")
        return None

    # -- 3. settle --------------------------------------------------------------------
    def _settle_from_lookup(self, claim: RefundClaim, token: str) -> ToolResponse:
        """After an ambiguous answer: ask the gateway what it holds for this key."""
        try:
            found = self.gateway.lookup(idempotency_key=claim.chave, token=token)
        except _LOOKUP_FAILURES:
            found = None
        if found is None:
            return self._unknown(claim, "sem confirmação do gateway")
        return self._settled(claim, found)

    def _settled(self, claim: RefundClaim, refund: GatewayRefund) -> ToolResponse:
        if not refund.approved:
            claim = self.ledger.settle_claim(claim, ClaimStatus.DECLINED, transacao_gateway=refund.transacao)
            with self.orders.transaction():
                self.orders.release(chave=claim.chave, pedido_id=claim.pedido_id)
            return ToolResponse.success(
                TOOL, Outcome.DECLINED,
                self._data(claim, mensagem=f"O gateway recusou o reembolso do pedido {claim.pedido_id}."),
            )
        # The gateway's record is the truth about the amount (a claim retaken after
        # a wrong "nothing was sent" may carry another amount than the one debited).
        claim = self.ledger.settle_claim(claim, ClaimStatus.EXECUTED, transacao_gateway=refund.transacao,
                                         valor=refund.valor)
        if not refund.replayed:
            count_for_tool(Metric.REAL_REFUNDS, TOOL)
        with self.orders.transaction():
            self.orders.apply_executed(chave=claim.chave, pedido_id=claim.pedido_id, valor=claim.valor)
        claim = self.ledger.mark_erp_updated(claim)
        return ToolResponse.success(
            TOOL, Outcome.EXECUTED,
            self._data(claim, mensagem=f"Reembolso de R$ {claim.valor} do pedido {claim.pedido_id} emitido."),
        )

    def _free(self, claim: RefundClaim, detalhe: str) -> None:
        """Nothing was debited: the claim may be retaken and the amount is free."""
        self.ledger.settle_claim(claim, ClaimStatus.FAILED_BEFORE_GATEWAY, detalhe=detalhe)
        with self.orders.transaction():
            self.orders.release(chave=claim.chave, pedido_id=claim.pedido_id)

    # -- answers --------------------------------------------------------------------
    def _unknown(self, claim: RefundClaim, detalhe: str) -> ToolResponse:
        """The outcome is not known: the reservation keeps holding the amount."""
        count_for_tool(Metric.UNKNOWN_OUTCOMES, TOOL)
        if claim.status is not ClaimStatus.UNKNOWN:
            claim = self.ledger.settle_claim(claim, ClaimStatus.UNKNOWN, detalhe=detalhe)
        return ToolResponse.success(
            TOOL, Outcome.UNKNOWN,
            self._data(claim, mensagem=(
                f"Não foi possível confirmar o reembolso do pedido {claim.pedido_id} agora; "
                "ele será conferido com o gateway antes de qualquer nova tentativa.")),
        )

    @staticmethod
    def _unavailable() -> ToolError:
        return ToolError(ErrorCode.GATEWAY_UNAVAILABLE, "O gateway de pagamento está indisponível; nada foi debitado.")

    def _answer_for(self, claim: RefundClaim) -> ToolResponse:
        if claim.status in FINAL_CLAIM_STATUSES:
            return self._repeat(claim, reconciled=False)
        return self._in_progress(claim)

    def _repeat(self, claim: RefundClaim, *, reconciled: bool) -> ToolResponse:
        count_for_tool(Metric.IDEMPOTENCY_BLOCKS, TOOL)
        return ToolResponse.success(
            TOOL, Outcome.BLOCKED_BY_IDEMPOTENCY,
            self._data(
                claim,
                resultadoOriginal=claim.status.value,
                conciliado=reconciled,
                mensagem=f"O reembolso do pedido {claim.pedido_id} já foi processado nesta conversa.",
            ),
        )

    def _as_repeat(self, settled: ToolResponse) -> ToolResponse:
        dados = dict(settled.dados or {})
        dados.update(
            resultadoOriginal=ClaimStatus.EXECUTED.value if settled.resultado == Outcome.EXECUTED else settled.resultado,
            conciliado=True,
            mensagem=f"O reembolso do pedido {dados.get('pedidoId')} já foi processado nesta conversa.",
        )
        count_for_tool(Metric.IDEMPOTENCY_BLOCKS, TOOL)
        return ToolResponse.success(TOOL, Outcome.BLOCKED_BY_IDEMPOTENCY, dados)

    @staticmethod
    def _in_progress(claim: RefundClaim) -> ToolResponse:
        return ToolResponse.success(
            TOOL, Outcome.IN_PROGRESS,
            RefundService._data(claim, mensagem=f"O reembolso do pedido {claim.pedido_id} está sendo processado; aguarde."),
        )

    @staticmethod
    def _data(claim: RefundClaim, **extra: Any) -> dict[str, Any]:
        return {
            "pedidoId": claim.pedido_id,
            "valor": str(claim.valor),
            "chaveIdempotencia": claim.chave,
            "transacao": claim.transacao_gateway,
            "registradoEm": claim.atualizado_em,
            **extra,
        }
