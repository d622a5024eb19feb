"""A conversation's approvals when the conversation moves on without a decision.

Which approvals a conversation asked for is read from its own history: every
request left an ``is_error`` tool_result ``{"erro": "aguardando_aprovacao",
"aprovacaoId": …}`` written by the confirmation gate (code, never the model), and
the stored history never drops a tool block (``history.for_storage``). So no index
is queried and no new permission is needed.

- A cancellation (consumed by a turn's or a resume's commit, or requested by an
  operator) voids every open approval of the conversation — pending, or approved
  and not yet consumed: ``aprovada`` can never authorise the same call after the
  conversation was taken from the agent. Voiding happens BEFORE the cancelled commit,
  so a crash in between leaves the cancellation pending and the next turn voids again.
- A request whose expiry passed undecided — or approved but not run before its
  expiry (its resume was lost or came late: an approval binds an expiry, so it never
  runs after it) — is closed (``expirada``, audited), the customer is told in code's
  words (``texts.APPROVAL_EXPIRED``, or ``texts.APPROVED_EXPIRED``: a person approved
  it, it was not run in time; nothing moved either way, ask again), and the conversation
  goes back to the AGENT, not to a person: nothing is pending any more, and the same call
  asked again is a fresh request. Two paths reach it: the customer's next message (the
  loop, no model call in that turn), or
  the resume (``Resumer.resume``), which the decision Lambda's ``expirar`` and a
  decision refused as expired both trigger, so the customer is told unprompted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cadencia_shared.approval_history import awaited_approval, requested_approvals
from cadencia_shared.approvals import OPEN, ApprovalRecord, ApprovalStatus, ApprovalStore
from cadencia_shared.ledger import Ledger

from . import texts

__all__ = ["awaited_approval", "expire", "expired_text", "expired_wait", "requested_approvals",
           "void_approval", "void_open_approvals", "was_approved"]


def void_approval(ledger: Ledger, conversation_id: str, approval: str, *, reason: str,
                  consumed_too: bool = False) -> bool:
    """Void one open approval (a no-op when it is not open; ``consumed_too``: a consumed one
    too, when its call is proven not to have run); audited with ``reason``."""
    before = ApprovalStore(ledger).close(approval, conversation_id=conversation_id, status=ApprovalStatus.VOIDED,
                                         consumed_too=consumed_too)
    if before is None:
        return False
    ledger.append_audit(conversation_id=conversation_id, event="APROVACAO_ANULADA",
                        details={"aprovacaoId": approval, "statusAnterior": before.value, "motivo": reason})
    return True


def void_open_approvals(ledger: Ledger, conversation_id: str, messages: Iterable[dict[str, Any]],
                        *also: str) -> list[str]:
    """Void the conversation's open approvals (``ApprovalStore.close``: one conditional
    write each, a no-op on a decided, consumed or already closed one). Returns the voided ids."""
    store = ApprovalStore(ledger)
    voided = []
    for approval in dict.fromkeys([*requested_approvals(messages), *also]):
        before = store.close(approval, conversation_id=conversation_id, status=ApprovalStatus.VOIDED)
        if before is not None:
            ledger.append_audit(conversation_id=conversation_id, event="APROVACAO_ANULADA",
                                details={"aprovacaoId": approval, "statusAnterior": before.value,
                                         "motivo": "conversa_cancelada"})
            voided.append(approval)
    return voided


def expire(ledger: Ledger, record: ApprovalRecord) -> bool:
    """Close an open record whose expiry passed (→ ``expirada``, audited). True: closed
    now or before (the customer may be told); False: still open or decided."""
    if record.status is ApprovalStatus.EXPIRED:
        return True
    if record.status not in OPEN or not record.expired(ledger.now_ms()):
        return False
    before = ApprovalStore(ledger).close(record.id, conversation_id=record.conversation_id,
                                         status=ApprovalStatus.EXPIRED, only_expired=True)
    if before is None:
        fresh = ApprovalStore(ledger).get(record.id)  # closed by a racing reader?
        return fresh is not None and fresh.status is ApprovalStatus.EXPIRED
    ledger.append_audit(conversation_id=record.conversation_id, event="APROVACAO_EXPIRADA",
                        details={"aprovacaoId": record.id, "statusAnterior": before.value})
    return True


def expired_wait(ledger: Ledger, messages: list[dict[str, Any]]) -> str | None:
    """While the conversation waits: the customer's sentence when the request it waits
    on expired (closed now; the conversation goes back to the agent), else None."""
    approval = awaited_approval(messages)
    record = ApprovalStore(ledger).get(approval) if approval is not None else None
    if record is None or record.status is ApprovalStatus.VOIDED or not expire(ledger, record):
        return None
    return expired_text(record)


def was_approved(record: ApprovalRecord) -> bool:
    """A person approved it (a denial never expires; ``decididoPor`` stays once closed)."""
    return record.status is ApprovalStatus.APPROVED or (record.status is ApprovalStatus.EXPIRED
                                                         and record.decided_by is not None)


def expired_text(record: ApprovalRecord) -> str:
    template = texts.APPROVED_EXPIRED if was_approved(record) else texts.APPROVAL_EXPIRED
    return template.format(order_id=record.arguments.get("pedidoId"))
