"""What the refund tool says, one sentence per claim state, each true when said.

The model may relay ``mensagem`` to the customer, so every text here is bound
to what the ledger shows: "emitido" only for an executed claim, "nada foi
debitado" only when no request could have moved money (a decline, or a
failure proven to happen before any request left), and an unknown outcome
says neither.
"""

from __future__ import annotations

from typing import Any

from cadencia_shared.ledger import ClaimStatus, RefundClaim
from cadencia_shared.observability import Metric, count_for_tool
from cadencia_shared.results import ErrorCode, ToolError, ToolResponse

TOOL = "emitir_reembolso"


class Outcome:
    """``resultado`` values this tool answers with."""

    EXECUTED = "executado"
    BLOCKED_BY_IDEMPOTENCY = "bloqueado_por_idempotencia"
    DECLINED = "recusado_pelo_gateway"
    IN_PROGRESS = "em_processamento"
    UNKNOWN = "resultado_desconhecido"


def _data(claim: RefundClaim, **extra: Any) -> dict[str, Any]:
    return {
        "pedidoId": claim.order_id,
        "valor": str(claim.amount),
        "chaveIdempotencia": claim.key,
        "transacao": claim.gateway_transaction,
        "registradoEm": claim.updated_at,
        **extra,
    }


def sentence(claim: RefundClaim) -> str:
    order, amount = claim.order_id, claim.amount
    if claim.status is ClaimStatus.EXECUTED:
        return f"Reembolso de R$ {amount} do pedido {order} emitido."
    if claim.status is ClaimStatus.DECLINED:
        return f"O gateway recusou o reembolso do pedido {order}; nada foi debitado."
    if claim.status is ClaimStatus.UNKNOWN:
        return (f"Ainda não há confirmação do gateway sobre o reembolso de R$ {amount} do pedido {order}. "
                "O valor fica reservado e o reembolso será conferido com o gateway; "
                "não faça outra solicitação enquanto isso.")
    return f"O reembolso do pedido {order} está sendo processado; aguarde."


def settled(claim: RefundClaim) -> ToolResponse:
    """The answer to the request that just moved the claim."""
    if claim.status is ClaimStatus.EXECUTED:
        return ToolResponse.success(TOOL, Outcome.EXECUTED, _data(claim, mensagem=sentence(claim)))
    if claim.status is ClaimStatus.DECLINED:
        return ToolResponse.success(TOOL, Outcome.DECLINED, _data(claim, mensagem=sentence(claim)))
    if claim.status is ClaimStatus.UNKNOWN:
        count_for_tool(Metric.UNKNOWN_OUTCOMES, TOOL)
        return ToolResponse.success(TOOL, Outcome.UNKNOWN, _data(claim, mensagem=sentence(claim)))
    return in_progress(claim)


def repeat(claim: RefundClaim, *, reconciled: bool) -> ToolResponse:
    """The same (conversation, order) asks again: the original outcome, said as it is."""
    if claim.status is ClaimStatus.UNKNOWN:
        return settled(claim)
    count_for_tool(Metric.IDEMPOTENCY_BLOCKS, TOOL)
    if claim.status is ClaimStatus.EXECUTED:
        text = f"O reembolso de R$ {claim.amount} do pedido {claim.order_id} já foi emitido nesta conversa."
    else:
        text = (f"O reembolso do pedido {claim.order_id} já foi recusado pelo gateway nesta conversa; "
                "nada foi debitado.")
    return ToolResponse.success(
        TOOL, Outcome.BLOCKED_BY_IDEMPOTENCY,
        _data(claim, resultadoOriginal=claim.status.value, conciliado=reconciled, mensagem=text),
    )


def in_progress(claim: RefundClaim) -> ToolResponse:
    return ToolResponse.success(TOOL, Outcome.IN_PROGRESS, _data(claim, mensagem=sentence(claim)))


def unavailable() -> ToolError:
    """Only after a release proven by the state machine: nothing left for the key."""
    return ToolError(ErrorCode.GATEWAY_UNAVAILABLE, "O gateway de pagamento está indisponível; nada foi debitado.")


def exceeds_balance(amount: Any, order_id: str, balance: Any) -> ToolError:
    return ToolError(
        ErrorCode.AMOUNT_EXCEEDS_BALANCE,
        f"O valor R$ {amount} excede o saldo reembolsável do pedido {order_id} (R$ {balance}).",
        details={"saldo": str(balance)},
    )
