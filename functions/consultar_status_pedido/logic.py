from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cadencia_shared.results import ErrorCode, ToolError, ToolResponse

from .models import OrderStatusRequest

TOOL = "consultar_status_pedido"


def order_status(
    req: OrderStatusRequest, fetch: Callable[..., dict[str, Any] | None]
) -> ToolResponse:
    row = fetch(order_id=req.pedidoId, customer_id=req.clienteId)
    if row is None:
        raise ToolError(ErrorCode.ORDER_NOT_FOUND, f"Pedido {req.pedidoId} não encontrado para este cliente.")
    return ToolResponse.success(
        TOOL,
        "consultado",
        {
            "pedidoId": row["id"],
            "status": row["status"],
            "valorPedido": str(row["valor_pedido"]),
            "statusReembolso": row["status_reembolso"],
            "valorReembolsado": str(row["valor_reembolsado"]),
            "previsaoEntrega": row["previsao_entrega"].isoformat() if row["previsao_entrega"] else None,
            "codigoRastreio": row["codigo_rastreio"],
        },
    )
