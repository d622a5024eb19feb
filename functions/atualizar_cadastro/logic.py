from __future__ import annotations

from collections.abc import Callable

from cadencia_shared.ledger import Ledger
from cadencia_shared.results import ErrorCode, ToolError, ToolResponse

from .models import ProfileUpdateRequest

TOOL = "atualizar_cadastro"


def update_profile(req: ProfileUpdateRequest, *, update: Callable[..., bool], ledger: Ledger) -> ToolResponse:
    changes = req.campos.changes()

    def audit() -> None:
        # Field names only: the new values are personal data and stay in the ERP.
        ledger.append_audit(
            conversation_id=req.conversaId,
            event="CADASTRO_ATUALIZADO",
            details={"clienteId": req.clienteId, "campos": sorted(changes)},
        )

    if not update(customer_id=req.clienteId, changes=changes, before_commit=audit):
        raise ToolError(ErrorCode.CUSTOMER_NOT_FOUND, "Cadastro do cliente não encontrado.")
    return ToolResponse.success(TOOL, "atualizado", {"camposAtualizados": sorted(changes)})
