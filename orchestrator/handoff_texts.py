"""What a hand-off over an unusable approval tells the customer about money: only what
the call's refund claim proves at the moment it is said.

No claim, or one the ledger proves moved nothing (released before the gateway, refused
by it): "Nenhum valor foi movimentado". A claim the gateway debited: the executed
sentence, with the claim's amount. Anything in between (reserved, possibly sent, being
reconciled): the unconfirmed sentence — never "nothing moved" while money may have.
"""

from __future__ import annotations

from cadencia_shared.ledger import ClaimStatus, RefundClaim

from . import money_sentences as ms
from . import texts

NOTHING_MOVED = frozenset({ClaimStatus.FAILED_BEFORE_GATEWAY, ClaimStatus.DECLINED})


def approval_unusable(claim: RefundClaim | None) -> str:
    if claim is None or claim.status in NOTHING_MOVED:
        return texts.APPROVAL_UNUSABLE
    return f"{texts.APPROVAL_UNUSABLE_HANDED_OFF} {_claim_statement(claim)}"


def approved_tool_stopped(claim: RefundClaim) -> str:
    """The tool was stopped before this retry of an approved call whose earlier run may have
    moved money: the hand-off, and what the claim proves (never "nothing was done")."""
    return f"{texts.APPROVED_TOOL_STOPPED_HANDED_OFF} {_claim_statement(claim)}"


def _claim_statement(claim: RefundClaim) -> str:
    kind = ms.REFUND_EXECUTED if claim.status is ClaimStatus.EXECUTED else ms.REFUND_UNCONFIRMED
    return ms.sentence(ms.Rendered(kind, order=claim.order_id, amount=claim.amount))
