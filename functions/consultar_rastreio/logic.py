from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cadencia_shared.results import ErrorCode, ToolError, ToolResponse

from .models import TrackingRequest

TOOL = "consultar_rastreio"


def tracking(req: TrackingRequest, fetch: Callable[..., dict[str, Any] | None]) -> ToolResponse:
    row = fetch(pedido_id=req.pedidoId, cliente_id=req.clienteId)
    if row is None:
        raise ToolError(ErrorCode.ORDER_NOT_FOUND, f"Pedido {req.pedidoId} não encontrado para este cliente.")
    return ToolResponse.success(TOOL, "consultado", {"pedidoId": row["id"], "codigoRastreio": row["codigo_rastreio"]})
