"""Freeing a reservation the ledger has released, once the ERP has committed it.

A releasing transition writes the ledger (``recusado_pelo_gateway`` /
``falhou_antes_do_gateway``) and frees the ERP reservation in one PostgreSQL
transaction under the order's row lock; only after that COMMIT does the claim leave
the reconciler's list (``mark_erp_updated``). A process that dies in between (a
SIGKILL, a Lambda timeout, a failed COMMIT) leaves the claim listed and the ERP row
``reservado``: ``finish_release`` (the reconciler) and ``free_released_reservations``
(a refund of the same order that the stale reservation would refuse) finish it.

Why it is safe: under the order's row lock a released claim cannot change — the
only way out of ``falhou_antes_do_gateway`` is a retake by a new request, which
happens under that same lock, and ``recusado_pelo_gateway`` is final. So a
``reservado`` row whose claim the ledger shows released, read under the lock, is
a reservation nobody can still be using.
"""

from __future__ import annotations

from cadencia_shared.ledger import SETTLED_CLAIM_STATUSES, ClaimLost, RefundClaim, RefundClaims

from .repository import RefundOrders


def mark_released(ledger: RefundClaims, claim: RefundClaim) -> RefundClaim:
    """After the ERP's COMMIT: the claim leaves the reconciler's list (fenced: a
    claim retaken since belongs to a new generation and stays listed)."""
    try:
        return ledger.mark_erp_updated(claim)
    except ClaimLost:
        return claim


def finish_release(ledger: RefundClaims, orders: RefundOrders, claim: RefundClaim) -> tuple[RefundClaim, bool]:
    """Free the ERP reservation of a claim the ledger released. Returns the claim and
    True, or the claim as it now is and False when it is no longer that released
    generation (retaken under the lock since): nothing is done then."""
    with orders.transaction():
        orders.lock_row(claim.order_id)
        current = ledger.get_claim(claim.key)
        if (current is None or current.status not in SETTLED_CLAIM_STATUSES
                or (current.owner, current.status) != (claim.owner, claim.status)):
            return current or claim, False
        orders.release(key=current.key, order_id=current.order_id)
    return mark_released(ledger, current), True


def free_released_reservations(ledger: RefundClaims, orders: RefundOrders, *, order_id: str, key: str) -> int:
    """Free every reservation of the order (other than ``key``'s) whose claim the
    ledger shows released; returns how many. One transaction under the row lock."""
    freed: list[RefundClaim] = []
    with orders.transaction():
        orders.lock_row(order_id)
        for other in orders.reserved_keys(order_id, excluding=key):
            claim = ledger.get_claim(other)
            if claim is not None and claim.order_id == order_id and claim.status in SETTLED_CLAIM_STATUSES:
                orders.release(key=other, order_id=order_id)
                freed.append(claim)
    for claim in freed:
        mark_released(ledger, claim)
    return len(freed)
