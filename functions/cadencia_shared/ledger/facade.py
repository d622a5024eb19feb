"""``Ledger``: every item kind's operations on one table, as one object.

Kept because it removes churn: about forty call sites (the Lambdas' adapters, the
orchestrator, the scripts, the tests — and code on other branches) build one
``Ledger(table_name, client)`` and pass it around. New code should ask for the
small Protocol it uses (``AttemptRecorder``, ``RefundClaims``, ``Conversations``,
``AuditTrail``, ``ConversationCancellation``); this object
satisfies all of them, and each store also works alone over a ``LedgerTable``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .attempts import AttemptStore
from .audit import AuditChain, AuditStore
from .claims import ClaimStore
from .conversations import ConversationStore
from .table import LedgerTable


class Ledger(ClaimStore, AttemptStore, ConversationStore, AuditStore):
    """Typed operations on the ledger table. ``client`` is a boto3 DynamoDB client."""

    def __init__(self, table_name: str, client: Any | None = None, *, clock: Callable[[], float] = time.time,
                 audit_chain: AuditChain | None = None) -> None:
        """``audit_chain``: given, audit records go to its hash-chained table instead
        of ``auditoria#`` items here."""
        self.table = LedgerTable(table_name, client, clock=clock)
        self.audit_chain = audit_chain

    @property
    def table_name(self) -> str:
        return self.table.name

    @property
    def client(self) -> Any:
        return self.table.client

    def now_ms(self) -> int:
        return self.table.now_ms()
