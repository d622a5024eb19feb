from __future__ import annotations

from cadencia_shared.models import OrderId, ToolRequest


class OrderStatusRequest(ToolRequest):
    pedidoId: OrderId
