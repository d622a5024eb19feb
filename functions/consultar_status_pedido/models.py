from __future__ import annotations

from cadencia_shared.catalog import OrderStatusArguments
from cadencia_shared.models import ToolRequest


class OrderStatusRequest(ToolRequest, OrderStatusArguments):
    """The model's arguments plus the identity the orchestrator injects."""
