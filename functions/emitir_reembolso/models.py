from __future__ import annotations

from cadencia_shared.catalog import RefundArguments
from cadencia_shared.models import ToolRequest

# ``valor`` is ``cadencia_shared.models.Amount``: a JSON number (never a string or a
# bool), finite, positive, at most two decimals, bounded; normalized to cents.


class RefundRequest(ToolRequest, RefundArguments):
    """The model's arguments plus the identity the orchestrator injects."""
