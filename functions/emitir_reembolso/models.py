from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, Field

from cadencia_shared.models import OrderId, ToolRequest

# Positive, at most two decimals, below a ceiling no order of this ERP reaches;
# normalized to cents so 50, 50.0 and 50.00 are one amount everywhere (ledger,
# gateway body, idempotency comparison).
Amount = Annotated[
    Decimal,
    Field(gt=0, max_digits=12, decimal_places=2, allow_inf_nan=False),
    AfterValidator(lambda v: v.quantize(Decimal("0.01"))),
]


class RefundRequest(ToolRequest):
    pedidoId: OrderId
    valor: Amount
