"""SEAL's approval check over the ledger (codes 2005/2006): what the refund's edge
reads when an envelope names an approval (docs/seal.md).

One answer, ``approval_use.usability``: the named request (``aprovacao#``) binds exactly
this conversation, tool and arguments (``ApprovalRecord.binds``; the tool version is the
confirmation gate's check, the release being the orchestrator's), is approved (or already
handed to this call: consumed) and unexpired — else 2005 when it binds nothing, 2006 when
it is not usable — AND the person's decision record (``decisao#``, which only the decision
role writes) approves exactly it, else 2006. Two GetItems; nothing written. Only the
refund's handler wires it (the one tool with an approval policy), so no other tool's code
reaches approval records.
"""

from __future__ import annotations

from typing import Any

from .approval_arguments import canonical_arguments
from .approval_record import ApprovalRecord
from .approval_use import Usability, usability
from .ledger import Ledger, approval_pk
from .seal import ApprovalCheck, SealCode

_CODES = {Usability.NOT_BINDING: SealCode.APPROVAL_NOT_BINDING, Usability.NOT_USABLE: SealCode.APPROVAL_NOT_USABLE}


def ledger_approvals(ledger: Ledger) -> ApprovalCheck:
    def check(approval: str, conversation_id: str, tool: str, arguments: dict[str, Any]) -> SealCode | None:
        try:
            item = ledger.table.get(approval_pk(approval))
        except ValueError:
            item = None
        record = ApprovalRecord.from_item(item) if item else None
        answer = usability(ledger, record, conversation_id=conversation_id, tool=tool,
                           arguments_sha256=canonical_arguments(arguments)[1])
        return _CODES.get(answer)

    return check
