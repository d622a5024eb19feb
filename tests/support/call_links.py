"""A tool call's outcome written the way the orchestrator writes it, for ledger-level tests.

``orchestrator.controls.DecisionAudit`` appends ONE ``CHAMADA_DE_FERRAMENTA`` link per
invoked call with these details; the attempt record is never updated. Tests of the
ledger alone (no control chain) answer an attempt with this, so what they read back
comes through the same join (``Ledger.attempts``) as production's.
"""

from __future__ import annotations

from cadencia_shared.ledger import Attempt, AttemptResult, AuditTrail
from cadencia_shared.ledger.attempts import CALL_EVENT, RESULT_DETAIL_MAX


def answer(trail: AuditTrail, attempt: Attempt, result: AttemptResult, detail: str | None = None) -> None:
    trail.append_audit(conversation_id=attempt.conversation_id, event=CALL_EVENT, details={
        "ferramenta": attempt.tool, "assunto": attempt.subject, "pedidoId": attempt.order_id, "decisao": "permitida",
        "resultado": result.value, "detalhe": detail[:RESULT_DETAIL_MAX] if detail else None,
        "tentativaNumero": attempt.number})
