"""SEAL's approval check over the ledger's ``aprovacao#`` records (codes 2005/2006):
what the refund's edge reads when an envelope names an approval (docs/seal.md).

The named record exists, is approved (or already handed to this call: consumed),
unexpired, and binds exactly this conversation, tool and arguments
(``ApprovalRecord.binds``; the tool version is the confirmation gate's check, the
release being the orchestrator's). One GetItem of the record; nothing written. Only
the refund's handler wires it (the one tool with an approval policy), so no other
tool's code reaches approval records.
"""

from __future__ import annotations

from typing import Any

from .approval_arguments import canonical_arguments
from .approval_record import ApprovalRecord, ApprovalStatus
from .ledger import Ledger, approval_pk
from .seal import ApprovalCheck, SealCode


def ledger_approvals(ledger: Ledger) -> ApprovalCheck:
    def check(approval: str, conversation_id: str, tool: str, arguments: dict[str, Any]) -> SealCode | None:
        try:
            item = ledger.table.get(approval_pk(approval))
        except ValueError:
            item = None
        record = ApprovalRecord.from_item(item) if item else None
        digest = canonical_arguments(arguments)[1]
        if record is None or not record.binds(conversation_id=conversation_id, tool=tool,
                                              version=record.tool_version, arguments_sha256=digest):
            return SealCode.APPROVAL_NOT_BINDING
        if record.status not in (ApprovalStatus.APPROVED, ApprovalStatus.CONSUMED) \
                or record.expired(ledger.now_ms()):
            return SealCode.APPROVAL_NOT_USABLE
        return None

    return check

