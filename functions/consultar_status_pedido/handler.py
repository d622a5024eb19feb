"""Lambda entry point of ``cadencia-consultar-status-pedido``."""

from __future__ import annotations

from functools import partial

from cadencia_shared import db
from cadencia_shared.observability import logger_for
from cadencia_shared.results import ToolResponse
from cadencia_shared.settings import DatabaseSettings
from cadencia_shared.tool_edge import tool_handler

from .logic import TOOL, order_status
from .models import OrderStatusRequest
from .repository import fetch_own_order

logger = logger_for(TOOL)


@tool_handler(tool=TOOL, model=OrderStatusRequest, logger=logger)
def lambda_handler(request: OrderStatusRequest) -> ToolResponse:
    conn = db.connection(DatabaseSettings.from_env(), read_only=True)
    return order_status(request, partial(fetch_own_order, conn))
