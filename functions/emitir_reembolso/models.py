from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import Field

from cadencia_shared.models import OrderId, ToolRequest

# Positive, at most two decimals, below a ceiling no order of this ERP reaches.
Amount = Annotated[Decimal, Field(gt=0, max_digits=12, decimal_places=2, allow_inf_nan=False)]


class RefundRequest(ToolRequest):
    pedidoId: OrderId
    valor: Amount
