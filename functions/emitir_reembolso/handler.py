"""Lambda entry point of ``cadencia-emitir-reembolso`` (thin: wiring only, in ``wiring``)."""

from __future__ import annotations

from cadencia_shared.observability import logger_for
from cadencia_shared.results import ToolResponse
from cadencia_shared.seal_approvals import ledger_approvals
from cadencia_shared.tool_edge import tool_handler

from .logic import TOOL
from .models import RefundRequest
from .settings import RefundSettings
from .wiring import RefundAdapters as RefundAdapters
from .wiring import adapters as adapters
from .wiring import refund_service as refund_service
from .wiring import reset_adapters as reset_adapters

logger = logger_for(TOOL)


# A refund above the limit runs only under an approval its envelope names: the edge reads it.
@tool_handler(tool=TOOL, model=RefundRequest, logger=logger, approvals=ledger_approvals)
def lambda_handler(request: RefundRequest) -> ToolResponse:
    return refund_service(RefundSettings.from_env()).issue(request)
