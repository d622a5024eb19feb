from __future__ import annotations

from collections.abc import Callable

from cadencia_shared.ledger import AuditTrail
from cadencia_shared.results import ErrorCode, ToolError, ToolResponse

from .models import ProfileUpdateRequest

TOOL = "atualizar_cadastro"


def update_profile(req: ProfileUpdateRequest, *, update: Callable[..., bool], audit: AuditTrail) -> ToolResponse:
    changes = req.campos.changes()

    def record() -> None:
        # Field names only: the new values are personal data and stay in the ERP
        # (the chain would mask them anyway: cadencia_shared.audit_chain.mask).
        audit.append_audit(
            conversation_id=req.conversaId,
            event="CADASTRO_ATUALIZADO",
            details={"clienteId": req.clienteId, "campos": sorted(changes)},
        )

    if not update(customer_id=req.clienteId, changes=changes, before_commit=record):
        raise ToolError(ErrorCode.CUSTOMER_NOT_FOUND, "Cadastro do cliente não encontrado.")
    return ToolResponse.success(TOOL, "atualizado", {"camposAtualizados": sorted(changes)})
