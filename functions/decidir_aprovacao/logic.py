"""The decision Lambda's rules (no AWS call inline: the store and the resume port
are passed in).

A decision is ONE conditional write (``ApprovalStore.decide``): single-use,
refused when expired, already decided, or by someone not on ``APROVADORES``.
This module is the direct-invocation (break-glass) path; ``api.py`` is the HTTP API's.
Only after it is recorded is the conversation resumed; the resume is a separate,
repeatable step (the orchestrator's), so a lost resume is retried, never a
second decision.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from cadencia_shared import approval_policy
from cadencia_shared.approvals import ApprovalRecord, ApprovalStore, DecisionRefused
from cadencia_shared.identity import APPROVERS, VIA_BREAK_GLASS, break_glass_person
from cadencia_shared.ledger import Ledger
from cadencia_shared.masking import mask_arguments, mask_identifier
from cadencia_shared.models import DecisionRequest, ExpireRequest, PendingListRequest, ShowRequest

Request = DecisionRequest | PendingListRequest | ShowRequest | ExpireRequest
CENTS = Decimal("0.01")
INVALID = "invalida"  # shown in place of the status of a record that is not intact


def masked(record: ApprovalRecord, now_ms: int) -> dict[str, Any]:
    """What an operator sees: the call to decide on, personal data masked."""
    return {
        "aprovacaoId": record.id, "ferramenta": record.tool, "versaoFerramenta": record.tool_version,
        "argumentos": mask_arguments(record.arguments), "argumentosSha256": record.arguments_sha256,
        "conversaId": mask_identifier(record.conversation_id), "clienteId": mask_identifier(record.customer_id, keep=2),
        # The amount is the bound argument's; a record whose stored copy disagrees (or
        # whose arguments do not hash to its digest) is shown as invalid, never decided.
        "valor": None if record.amount is None else format(record.amount.quantize(CENTS), "f"),
        "motivo": record.reason, "status": record.status.value if record.intact else INVALID,
        "criadoEm": record.created_at, "expirada": record.expired(now_ms), "decididoPor": record.decided_by,
    }


def handle(request: Request, ledger: Ledger, *, approvers: frozenset[str], resume: Callable[[str], None],
           policy: approval_policy.PolicySettings | None = None) -> dict[str, Any]:
    policy = policy or approval_policy.PolicySettings()
    store = ApprovalStore(ledger)
    now = ledger.now_ms()
    if isinstance(request, PendingListRequest):
        return {"ok": True, "pendentes": [masked(r, now) for r in store.pending()]}
    if isinstance(request, ExpireRequest):
        # The orchestrator's resume closes each one and tells its customer (this role
        # runs no conversation); a rerun resumes again, harmlessly. Approved ones whose
        # resume was lost are found too: closed as approved-but-not-run, never as undecided.
        overdue = [r.id for r in [*store.pending(), *store.approved()] if r.expired(now)]
        for approval in overdue:
            resume(approval)
        return {"ok": True, "expiradas": overdue}
    if isinstance(request, ShowRequest):
        record = store.get(request.aprovacaoId)
        if record is None:
            return _error("aprovacao_inexistente")
        if not record.intact:
            ledger.append_audit(conversation_id=record.conversation_id, event="APROVACAO_INVALIDA",
                                details={"aprovacaoId": record.id, "status": record.status.value, "vinculada": False})
            return _error("aprovacao_invalida")
        return {"ok": True, "aprovacao": masked(record, now)}
    # A direct invocation is the break-glass path: the named approver must be on the
    # deploy's list, the same policy applies (two people above its amount), and the
    # audit says which path it came by.
    if request.aprovador not in approvers:
        refused = DecisionRefused("aprovador_nao_autorizado", store.get(request.aprovacaoId))
        return _refused(ledger, request, refused, resume)
    person = break_glass_person(request.aprovador, approvers, APPROVERS)
    try:
        decided = approval_policy.decide(ledger, request.aprovacaoId, person=person,
                                         approve=request.decisao == "aprovar", justification=request.justificativa,
                                         approved_amount=None, settings=policy)
    except DecisionRefused as refused:
        return _refused(ledger, request, refused, resume)
    record = decided.record
    # The justification stays on the record (the model reads it on a denial), not in the audit.
    ledger.append_audit(conversation_id=record.conversation_id, event="APROVACAO_DECIDIDA",
                        details={"aprovacaoId": record.id, "status": record.status.value,
                                 "resultado": decided.outcome, "aprovador": request.aprovador,
                                 "argumentosSha256": record.arguments_sha256, **person.audit()})
    if decided.outcome != approval_policy.AWAITING_SECOND:
        resume(record.id)
    return {"ok": True, "resultado": decided.outcome, "aprovacao": masked(record, now)}


def _refused(ledger: Ledger, request: DecisionRequest, refused: DecisionRefused,
             resume: Callable[[str], None]) -> dict[str, Any]:
    ledger.append_audit(conversation_id=refused.record.conversation_id if refused.record else None,
                        event="DECISAO_DE_APROVACAO_RECUSADA",
                        details={"aprovacaoId": request.aprovacaoId, "motivo": refused.reason,
                                 "aprovador": request.aprovador, "via": VIA_BREAK_GLASS})
    if refused.reason == "aprovacao_expirada":
        resume(request.aprovacaoId)  # a late decision unsticks the conversation: it is closed and told
    return _error(refused.reason)


def _error(code: str) -> dict[str, Any]:
    return {"ok": False, "erro": {"codigo": code}}
