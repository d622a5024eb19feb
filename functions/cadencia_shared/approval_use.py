"""Whether an approval may be used to run a call: ONE answer every reader asks
(the confirmation gate before it consumes, the resume before it runs the approved
call, the tool edge's SEAL check ``seal_approvals.ledger_approvals``).

    the request (``aprovacao#``) binds exactly this conversation, tool, version and
        arguments, intact                                          ─ else NOT_BINDING
    its lifecycle status is aprovada (or consumida: handed to this call), unexpired
    the person's decision (``decisao#``, written only by the decision role) approves,
        binds the same id, conversation, tool, version and digest, is unexpired, and
        names as many distinct people as the policy required       ─ else NOT_USABLE

The request's ``aprovada`` alone never authorises: the orchestrators can write it.
"""

from __future__ import annotations

from enum import StrEnum

from . import approval_decisions
from .approval_record import ApprovalRecord, ApprovalStatus
from .ledger import Ledger


class Usability(StrEnum):
    USABLE = "utilizavel"
    NOT_BINDING = "nao_vincula"
    NOT_USABLE = "inutilizavel"


USABLE_STATUSES = (ApprovalStatus.APPROVED, ApprovalStatus.CONSUMED)


def binding_of(record: ApprovalRecord) -> approval_decisions.Binding:
    return approval_decisions.Binding(record.id, record.conversation_id, record.tool, record.tool_version,
                                      record.arguments_sha256, record.expires_at_ms)


def usability(ledger: Ledger, record: ApprovalRecord | None, *, conversation_id: str, tool: str,
              arguments_sha256: str, version: str | None = None) -> Usability:
    """``version`` None: the request's own (the tool edge cannot know the release)."""
    if record is None or not record.binds(conversation_id=conversation_id, tool=tool,
                                          version=record.tool_version if version is None else version,
                                          arguments_sha256=arguments_sha256):
        return Usability.NOT_BINDING
    now = ledger.now_ms()
    if record.status not in USABLE_STATUSES or record.expired(now):
        return Usability.NOT_USABLE
    decision = approval_decisions.read(ledger, record.id)
    if decision is None or not decision.approves(binding_of(record), now):
        return Usability.NOT_USABLE
    return Usability.USABLE


def usable(ledger: Ledger, record: ApprovalRecord) -> bool:
    """The record's own call: approved by its decision record, and unexpired."""
    return usability(ledger, record, conversation_id=record.conversation_id, tool=record.tool,
                     arguments_sha256=record.arguments_sha256, version=record.tool_version) is Usability.USABLE
