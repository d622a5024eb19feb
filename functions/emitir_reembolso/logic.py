"""The refund, exactly once. No AWS or HTTP call is made here directly: the
ledger, the secret, the gateway and the order repository are injected.

Order of operations (each step's reason is the invariant it protects):

1. lock the order row and check ownership — same error for unknown and foreign
   orders, so the tool reveals nothing about other customers;
2. look at the claim for ``{conversaId}#{pedidoId}#reembolso``:
   - final (executed / declined) -> answer ``bloqueado_por_idempotencia`` with the
     original outcome; the secret is never read and the gateway never called;
   - in progress under a live lease -> ``em_processamento`` (nothing read or sent);
   - unknown outcome, or in progress with an expired lease -> take it over, read
     the secret and *look the key up* at the gateway before answering anything;
   - failed before the gateway -> may be retaken (it is not "already processed");
3. check the amount against the order balance;
4. claim the key with a conditional PutItem (or retake it) — **before** the secret;
5. only now read the gateway secret, and debit with ``Idempotency-Key`` = the key;
6. record the outcome in the ledger (fenced on the claim owner), then the ERP.
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


class Outcome:
    """``resultado`` values this tool answers with."""

    EXECUTED = "executado"
    BLOCKED_BY_IDEMPOTENCY = "bloqueado_por_idempotencia"
    DECLINED = "recusado_pelo_gateway"
    IN_PROGRESS = "em_processamento"
    UNKNOWN = "resultado_desconhecido"


@dataclass
class RefundService:
    ledger: Ledger
    orders: RefundOrders
    gateway: PaymentGatewayClient
    read_gateway_token: Callable[[], str]  # reads the secret; called only after a claim
    claim_lease_s: int

    def issue(self, req: RefundRequest) -> ToolResponse:
        self._erp_written: list[RefundClaim] = []
        with self.orders.locked(req.pedidoId) as order:
            response = self._decide(req, order)
        # The order transaction has committed: only now may the ledger say so.
        for claim in self._erp_written:
            self.ledger.mark_erp_updated(claim)
        return response

    def _decide(self, req: RefundRequest, order: OrderForRefund | None) -> ToolResponse:
        if order is None or order.cliente_id != req.clienteId:
            raise ToolError(ErrorCode.ORDER_NOT_FOUND, f"Pedido {req.pedidoId} não encontrado para este cliente.")
        chave = refund_idempotency_key(req.conversaId, req.pedidoId)
        existing = self.ledger.get_claim(chave)
        token: str | None = None
        if existing is not None:
            if existing.status in FINAL_CLAIM_STATUSES:
                return self._repeat(existing, reconciled=False)
            if existing.status is ClaimStatus.IN_PROGRESS and not existing.lease_expired(self.ledger.now_ms()):
                return self._in_progress(existing)
            if existing.status is not ClaimStatus.FAILED_BEFORE_GATEWAY:
                existing, token, answer = self._reconcile(existing)
                if answer is not None:
                    return answer
        self._check_amount(req.valor, order)
        try:
            claim = (
                self.ledger.retake_claim(existing, valor=req.valor, lease_s=self.claim_lease_s)
                if existing is not None
                else self.ledger.claim_refund(
                    chave=chave,
                    conversa_id=req.conversaId,
                    pedido_id=req.pedidoId,
                    cliente_id=req.clienteId,
                    valor=req.valor,
                    lease_s=self.claim_lease_s,
                )
            )
        except ClaimTaken as taken:  # only reachable if something bypassed the row lock
            return self._in_progress(taken.existing)
        return self._execute(claim, token)

    # -- steps ------------------------------------------------------------------
    @staticmethod
    def _check_amount(valor: Decimal, order: OrderForRefund) -> None:
        if valor > order.saldo:
            raise ToolError(
                ErrorCode.AMOUNT_EXCEEDS_BALANCE,
                f"O valor R$ {valor} excede o saldo reembolsável do pedido {order.id} (R$ {order.saldo}).",
                detalhes={"saldo": str(order.saldo)},
            )

    def _token(self, claim: RefundClaim, *, on_failure: ClaimStatus = ClaimStatus.FAILED_BEFORE_GATEWAY) -> str:
        """Read the gateway secret. If the secret store fails, nothing is sent now;
        the claim goes back to ``on_failure`` (still UNKNOWN when it was being
        reconciled: an earlier attempt may have debited)."""
        try:
            return self.read_gateway_token()
        except Exception as err:
            self.ledger.settle_claim(claim, on_failure, detalhe=f"segredo: {type(err).__name__}")
            raise ToolError(
                ErrorCode.GATEWAY_UNAVAILABLE, "O gateway de pagamento está indisponível; nada foi debitado."
            ) from None

    def _execute(self, claim: RefundClaim, token: str | None) -> ToolResponse:
        token = token or self._token(claim)
        try:
            refund = self.gateway.refund(
                idempotency_key=claim.chave, pedido_id=claim.pedido_id, valor=claim.valor, token=token
            )
        except GatewayNotReached as err:
            self.ledger.settle_claim(claim, ClaimStatus.FAILED_BEFORE_GATEWAY, detalhe=str(err))
            raise ToolError(
                ErrorCode.GATEWAY_UNAVAILABLE, "O gateway de pagamento está indisponível; nada foi debitado."
            ) from None
        except GatewayRejected as err:
            if err.codigo == "idempotency_key_reutilizada":
                # The gateway already holds this key (with another amount): reconcile.
                return self._settle_from_lookup(claim, token)
            self.ledger.settle_claim(claim, ClaimStatus.FAILED_BEFORE_GATEWAY, detalhe=str(err))
            raise ToolError(
                ErrorCode.GATEWAY_UNAVAILABLE, "O gateway recusou a requisição; nada foi debitado."
            ) from None
        except GatewayOutcomeUnknown as err:
            claim = self.ledger.settle_claim(claim, ClaimStatus.UNKNOWN, detalhe=str(err))
            return self._settle_from_lookup(claim, token)
        return self._settled(claim, refund)

    def _settle_from_lookup(self, claim: RefundClaim, token: str) -> ToolResponse:
        """After an ambiguous answer: ask the gateway what it holds for this key."""
        try:
            found = self.gateway.lookup(idempotency_key=claim.chave, token=token)
        except (GatewayNotReached, GatewayOutcomeUnknown, GatewayRejected):
            found = None
        if found is None:
            count_for_tool(Metric.UNKNOWN_OUTCOMES, TOOL)
            if claim.status is not ClaimStatus.UNKNOWN:
                claim = self.ledger.settle_claim(claim, ClaimStatus.UNKNOWN, detalhe="sem confirmação do gateway")
            return ToolResponse.success(
                TOOL,
                Outcome.UNKNOWN,
                self._data(
                    claim,
                    mensagem=(
                        f"Não foi possível confirmar o reembolso do pedido {claim.pedido_id} agora; "
                        "ele será conferido com o gateway antes de qualquer nova tentativa."
                    ),
                ),
            )
        return self._settled(claim, found)

    def _settled(self, claim: RefundClaim, refund: GatewayRefund) -> ToolResponse:
        if not refund.approved:
            claim = self.ledger.settle_claim(claim, ClaimStatus.DECLINED, transacao_gateway=refund.transacao)
            return ToolResponse.success(
                TOOL,
                Outcome.DECLINED,
                self._data(claim, mensagem=f"O gateway recusou o reembolso do pedido {claim.pedido_id}."),
            )
        # The gateway's record is the truth about the amount (a reconciled claim may
        # have been retaken with another amount than the one that was debited).
        claim = self.ledger.settle_claim(claim, ClaimStatus.EXECUTED, transacao_gateway=refund.transacao,
                                         valor=refund.valor)
        if not refund.replayed:
            count_for_tool(Metric.REAL_REFUNDS, TOOL)
        self._update_erp(claim)
        return ToolResponse.success(
            TOOL,
            Outcome.EXECUTED,
            self._data(claim, mensagem=f"Reembolso de R$ {claim.valor} do pedido {claim.pedido_id} emitido."),
        )

    def _update_erp(self, claim: RefundClaim) -> None:
        # Inside the order's transaction; ``issue`` flags the ledger after COMMIT,
        # so a crash in between is repaired by the next repeat (apply_refund is
        # guarded by the key and never adds the same refund twice).
        self.orders.apply_refund(pedido_id=claim.pedido_id, valor=claim.valor, chave=claim.chave)
        self._erp_written.append(claim)

    def _reconcile(self, existing: RefundClaim) -> tuple[RefundClaim, str | None, ToolResponse | None]:
        """Unknown outcome or abandoned claim: the gateway decides, never a guess."""
        try:
            claim = self.ledger.retake_claim(existing, valor=existing.valor, lease_s=self.claim_lease_s)
        except ClaimTaken as taken:
            return existing, None, self._in_progress(taken.existing)
        token = self._token(claim, on_failure=ClaimStatus.UNKNOWN)
        try:
            found = self.gateway.lookup(idempotency_key=claim.chave, token=token)
        except (GatewayNotReached, GatewayOutcomeUnknown, GatewayRejected) as err:
            claim = self.ledger.settle_claim(claim, ClaimStatus.UNKNOWN, detalhe=f"conciliação: {err}")
            count_for_tool(Metric.UNKNOWN_OUTCOMES, TOOL)
            return claim, token, ToolResponse.success(
                TOOL,
                Outcome.UNKNOWN,
                self._data(claim, mensagem="O gateway não respondeu; o reembolso será conferido antes de repetir."),
            )
        if found is not None:
            settled = self._settled(claim, found)
            return claim, token, self._as_repeat(settled)
        # The key never reached the gateway: nothing was debited, so the claim is free.
        claim = self.ledger.settle_claim(
            claim, ClaimStatus.FAILED_BEFORE_GATEWAY, detalhe="conciliação: chave ausente no gateway"
        )
        return claim, token, None

    # -- answers --------------------------------------------------------------------
    def _repeat(self, claim: RefundClaim, *, reconciled: bool) -> ToolResponse:
        if claim.status is ClaimStatus.EXECUTED and not claim.erp_atualizado:
            self._update_erp(claim)
        count_for_tool(Metric.IDEMPOTENCY_BLOCKS, TOOL)
        return ToolResponse.success(
            TOOL,
            Outcome.BLOCKED_BY_IDEMPOTENCY,
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
            TOOL,
            Outcome.IN_PROGRESS,
            RefundService._data(
                claim, mensagem=f"O reembolso do pedido {claim.pedido_id} está sendo processado; aguarde."
            ),
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
