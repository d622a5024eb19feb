from __future__ import annotations

from cadencia_shared.models import OrderStatusArguments, ToolRequest


class OrderStatusRequest(ToolRequest, OrderStatusArguments):
    """The model's arguments plus the identity the orchestrator injects."""
